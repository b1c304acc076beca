"""Internal errors while tracing never give a wrong result: InternalError, or plain Python with one warning
under config.suppress_errors."""

import dis
import warnings

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same
from framejit.trace import translator
from tests.helpers import logged


@pytest.fixture
def broken_binary_op():

    def boom(tx, inst):
        raise RuntimeError("boom in BINARY_OP")

    index = dis.opmap["BINARY_OP"]
    saved = translator.OPCODE_HANDLERS[index]
    translator.OPCODE_HANDLERS[index] = boom
    yield
    translator.OPCODE_HANDLERS[index] = saved


def add_mul(x, y):
    return x * 2 + y


def test_internal_error_with_suppress_errors_runs_python_with_one_warning(broken_binary_op):
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(add_mul)
    x, y = torch.randn(3), torch.randn(3)
    with framejit.config.patch(suppress_errors=True), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert same(f(x, y), add_mul(x, y))
        assert same(f(x, y), add_mul(x, y))
    assert cnt.frame_count == 0
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1, "the failing frame is not retraced on every call"
    assert "internal error" in messages[0] and "boom in BINARY_OP" in messages[0]
    assert f"add_mul ({__file__}:{add_mul.__code__.co_firstlineno})" in messages[0]
    assert caught[0].filename == __file__, "the warning points at the user's call"


def test_internal_error_raises_internal_error_without_suppress_errors(broken_binary_op):
    f = framejit.optimize(CompileCounter())(add_mul)
    with pytest.raises(framejit.exc.InternalError, match="add_mul") as info:
        f(torch.randn(3), torch.randn(3))
    assert isinstance(info.value.__cause__, RuntimeError) and "suppress_errors" in str(info.value)


def test_internal_error_raises_under_fullgraph(broken_binary_op):
    f = framejit.compile(add_mul, backend=CompileCounter(), fullgraph=True)
    with pytest.raises(framejit.exc.InternalError, match="add_mul") as info:
        f(torch.randn(3), torch.randn(3))
    assert isinstance(info.value.__cause__, RuntimeError)


def test_guard_that_raises_is_a_miss_not_a_crash():
    class Config:
        scale = 2

    cfg = Config()

    def fn(x):
        return x * cfg.scale

    cnt = CompileCounter()
    f = framejit.optimize(cnt)(fn)
    x = torch.randn(3)
    assert same(f(x), x * 2)
    del Config.scale  # the guard on cfg.scale now raises AttributeError
    with pytest.raises(AttributeError):
        f(x)  # eager raises the same error


def test_a_shape_error_in_the_program_raises_eagers_error_without_torchs_kernel_log():
    # the trace runs the op on fake tensors first; the kernel's failure is the program's own error, raised at the
    # break as eager raises it, so torch's "failed while attempting to run meta" traceback is only noise
    def f(x, y):
        return x.unsqueeze(-1) / y

    x, y = torch.randn(3, 6), torch.randn(3, 6)
    with pytest.raises(RuntimeError) as eager:
        f(x, y)
    with logged("torch._subclasses.fake_tensor") as records, pytest.raises(RuntimeError) as compiled:
        framejit.compile(f, backend="eager")(x, y)
    assert str(compiled.value) == str(eager.value)
    assert not records, [r.getMessage() for r in records]
    assert compiled.traceback[-1].frame.code.name == "f"

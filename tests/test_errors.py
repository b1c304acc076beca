"""Internal errors while tracing never give a wrong result: plain Python instead, or InternalError under fullgraph."""
import dis
import logging

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same
from framejit.trace import translator


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


def test_internal_error_falls_back_to_python(broken_binary_op, caplog):
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(add_mul)
    x, y = torch.randn(3), torch.randn(3)
    with caplog.at_level(logging.WARNING, logger="framejit"):
        assert same(f(x, y), add_mul(x, y))
        assert same(f(x, y), add_mul(x, y))
    assert cnt.frame_count == 0
    messages = [r.getMessage() for r in caplog.records if r.name == "framejit"]
    assert len(messages) == 1, "the failing frame is not retraced on every call"
    assert "internal error" in messages[0] and "boom in BINARY_OP" in messages[0] and "add_mul" in messages[0]


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

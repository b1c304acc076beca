"""framejit.compiler mirrors torch.compiler: each name is framejit's own function under torch.compiler's name, so
code written against torch.compiler runs on framejit by changing its import."""

import torch

import framejit
import framejit.compiler as fc
from framejit.testing import CompileCounter, same


def test_every_name_is_torch_compilers_and_framejits_own_object():
    import torch.compiler

    assert set(fc.__all__) <= set(torch.compiler.__all__)
    for name in fc.__all__:
        ours = getattr(framejit, name, None)
        assert getattr(fc, name) is (ours if ours is not None else framejit.is_compiling), name
    assert {"compile", "reset", "disable", "is_compiling", "set_stance", "substitute_in_graph"} <= set(fc.__all__)
    assert {"allow_in_graph", "assume_constant_result", "list_backends", "config"} <= set(fc.__all__)
    assert framejit.compiler is fc


def test_code_written_against_torch_compiler_runs_on_framejit():
    def fn(x):
        if fc.is_compiling() and fc.is_dynamo_compiling():
            return x.sin() * 2
        return x.sin()

    x = torch.randn(3)
    cnt = CompileCounter()
    compiled = fc.compile(fn, backend=cnt)
    assert same(compiled(x), x.sin() * 2)
    assert cnt.frame_count == 1
    with fc.set_stance("force_eager"):
        assert same(compiled(x), x.sin())
    fc.reset()
    assert same(fc.disable(fn)(x), x.sin())
    assert "eager" in fc.list_backends()
    assert fc.is_compiling() is False and fc.is_dynamo_compiling() is False

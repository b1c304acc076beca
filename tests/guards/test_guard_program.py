"""The guard as a C++ program (guard_program.py, _C/guard_program.cpp): its instructions checked when made, its
loads' semantics (attribute lookups past __getattr__, missing attributes of modules), its registers and life."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
from torch import nn

import framejit
from framejit import cache
from framejit._C._tensor_guard import make_guard_program
from framejit.guard_program import (
    ALL_DISTINCT,
    EQUALS,
    IS,
    LOAD_ATTR,
    LOAD_CONST,
    LOAD_ITEM,
    NO_ATTR,
    PY_CHECK,
    TYPE_IS,
)
from framejit.testing import CompileCounter


def _fn() -> None:
    pass


def test_a_program_reading_a_register_before_it_is_written_is_refused() -> None:
    with pytest.raises(ValueError, match="invalid instruction"):
        make_guard_program(2, 4, ((LOAD_ATTR, 3, 2, "x", ()),))  # r2 never written
    with pytest.raises(ValueError, match="invalid instruction"):
        make_guard_program(2, 3, ((LOAD_CONST, 2, -1, 1, ()), (LOAD_CONST, 2, -1, 2, ())))  # r2 written twice
    with pytest.raises(ValueError, match="invalid instruction"):
        make_guard_program(2, 3, ((99, -1, 1, None, ()),))  # no such op
    with pytest.raises(ValueError, match="invalid instruction"):
        make_guard_program(2, 3, ((ALL_DISTINCT, -1, -1, None, (1, 5)),))


def test_loads_and_checks_answer_as_python_does() -> None:
    class Config:
        def __init__(self) -> None:
            self.size = 4
            self.table = {"a": 1}

    program = make_guard_program(
        2,
        5,
        (
            (LOAD_ATTR, 2, 1, "size", ()),
            (TYPE_IS, -1, 2, int, ()),
            (EQUALS, -1, 2, 4, ()),
            (LOAD_ATTR, 3, 1, "table", ()),
            (LOAD_ITEM, 4, 3, "a", ()),
            (IS, -1, 4, 1, ()),
            (NO_ATTR, -1, 1, "missing", ()),
            (PY_CHECK, -1, -1, lambda size, a: size + a == 5, (2, 4)),
        ),
    )
    c = Config()
    assert program(_fn, c) is True
    c.size = 5
    assert program(_fn, c) is False
    c.size, c.missing = 4, 0
    assert program(_fn, c) is False
    del c.missing
    del c.table
    with pytest.raises(AttributeError):  # a failed load raises: the hook counts it as a miss
        program(_fn, c)
    with pytest.raises(TypeError, match="2 positional arguments"):
        program(_fn)


def test_an_attribute_past_a_classes_getattr_and_one_only_getattr_finds() -> None:
    lin = nn.Linear(2, 2)  # `weight` is found by nn.Module.__getattr__, `in_features` in the instance dict
    program = make_guard_program(
        2,
        4,
        (
            (LOAD_ATTR, 2, 1, "weight", ()),
            (IS, -1, 2, lin.weight, ()),
            (LOAD_ATTR, 3, 1, "in_features", ()),
            (EQUALS, -1, 3, 2, ()),
        ),
    )
    assert program(_fn, lin) is True
    lin.weight = nn.Parameter(torch.zeros(2, 2))
    assert program(_fn, lin) is False


def test_more_registers_than_the_inline_array_and_a_weak_reference() -> None:
    instructions = tuple((LOAD_CONST, 2 + i, -1, i, ()) for i in range(600))
    instructions += ((PY_CHECK, -1, -1, lambda *values: list(values) == list(range(600)), tuple(range(2, 602))),)
    program = make_guard_program(2, 602, instructions)
    assert program(_fn, None) is True
    ref = weakref.ref(program)
    del program
    gc.collect()
    assert ref() is None


def test_a_program_in_a_reference_cycle_is_collected() -> None:
    holder: dict = {}
    program = make_guard_program(1, 2, ((LOAD_CONST, 1, -1, holder, ()),))
    holder["program"] = program
    ref = weakref.ref(program)
    del program, holder
    gc.collect()
    assert ref() is None


class _Optional(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        return y + self.extra if hasattr(self, "extra") else y * 2


@pytest.mark.parametrize("add", ["buffer", "parameter", "submodule", "instance", "class"])
def test_a_module_attribute_found_missing_recompiles_once_it_appears(add: str) -> None:
    m = _Optional()
    counter = CompileCounter()
    compiled = framejit.compile(m, backend=counter)
    x = torch.randn(2, 3)
    torch.testing.assert_close(compiled(x), m(x))
    assert counter.frame_count == 1
    if add == "buffer":
        m.register_buffer("extra", torch.ones(3))
    elif add == "parameter":
        m.extra = nn.Parameter(torch.ones(3))
    elif add == "submodule":
        m.extra = nn.Identity()  # (y + module raises in both, as eager)
    elif add == "instance":
        m.__dict__["extra"] = 1.5
    else:
        _Optional.extra = 2.0
    try:
        if add == "submodule":
            with pytest.raises(TypeError):
                m(x)
            with pytest.raises(TypeError):
                compiled(x)
        else:
            torch.testing.assert_close(compiled(x), m(x))
            assert counter.frame_count == 2
    finally:
        if add == "class":
            del _Optional.extra


def test_the_listing_names_registers_and_checks() -> None:
    m = nn.Sequential(nn.Linear(2, 2))
    compiled = framejit.compile(m, backend="eager")
    compiled(torch.randn(1, 2))
    (frame,) = cache.compiled_frames(type(m).forward.__code__)
    listing = frame.check_fn_source
    assert "___check_tensors(" in listing and "___modules_without_hooks(" in listing
    assert any(line.startswith("type(r") for line in listing.splitlines())
    assert TYPE_IS == 10  # the listing's ops are guard_program.cpp's

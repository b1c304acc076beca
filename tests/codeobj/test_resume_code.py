"""framejit.codeobj.build_resume_code: continuations whose frames read as the original function's frame."""

from __future__ import annotations

import dis
import types

from framejit.codeobj import build_resume_code, resume_parameters


def _offset(fn, opname: str, argval: object) -> int:
    return next(i.offset for i in dis.get_instructions(fn) if i.opname == opname and i.argval == argval)


def _continuation(fn, offset: int, nulls: tuple[bool, ...], local_names: tuple[str, ...]):
    code = build_resume_code(fn.__code__, offset, nulls, local_names, "__resume_test")
    return types.FunctionType(code, fn.__globals__, code.co_name, None, fn.__closure__)


def namespace_after(x):
    y = x + 1
    return [y, sorted(locals())]


def test_the_stack_values_are_no_variables_of_the_continuations_frame():
    # resumed with `y` on the stack, taken as a parameter: locals() sees only the function's own variables
    resume = _continuation(namespace_after, _offset(namespace_after, "LOAD_GLOBAL", "sorted"), (False,), ("x", "y"))
    assert resume(1, 2, 2) == namespace_after(1) == [2, ["x", "y"]]


def cells_after(x):
    def inner():
        return c + x

    try:
        c  # noqa: B018, F821 - read before its assignment below: an empty cell
    except UnboundLocalError as e:
        first = str(e)
    c = 10
    return first, inner(), sorted(locals())


def test_cells_are_shared_and_read_as_the_functions_own():
    # the caller's cells come in as parameters and stay cells of the continuation's frame: an empty one raises
    # UnboundLocalError (not a free variable's NameError), a write is seen by closures made before, and
    # locals() reads through them
    offset = _offset(cells_after, "NOP", None)  # the try block's start
    params = resume_parameters(cells_after.__code__, ("inner",))
    assert params == ("x", "inner", "c")  # x is an argument (a cell): first, as zero-argument super() needs
    x_cell, c_cell = types.CellType(5), types.CellType()
    inner = types.FunctionType(cells_after.__code__.co_consts[1], globals(), "inner", None, (c_cell, x_cell))
    resume = _continuation(cells_after, offset, (), ("inner",))
    assert resume(x_cell, inner, c_cell) == cells_after(5)
    assert c_cell.cell_contents == 10

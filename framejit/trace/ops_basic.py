"""Opcode handlers: stack shuffling, locals, cells, globals, constants and attributes."""
from __future__ import annotations

from framejit.codeobj import Inst
from framejit.trace.cells import CellVariable
from framejit.trace.translator import LazyArg, Translator, handler
from framejit.variables.base import NULL, unsupported
from framejit.variables.builder import wrap_constant_result, wrap_value


@handler("NOP", "RESUME", "MAKE_CELL", "COPY_FREE_VARS", "EXTENDED_ARG", "CACHE")
def NOP(tx: Translator, inst: Inst) -> None:
    """Cells are made when the Translator starts; these need no work."""


@handler("POP_TOP")
def POP_TOP(tx: Translator, inst: Inst) -> None:
    tx.pop()


@handler("PUSH_NULL")
def PUSH_NULL(tx: Translator, inst: Inst) -> None:
    tx.push(NULL)


@handler("COPY")
def COPY(tx: Translator, inst: Inst) -> None:
    tx.push(tx.stack[-inst.arg])


@handler("SWAP")
def SWAP(tx: Translator, inst: Inst) -> None:
    s = tx.stack
    s[-1], s[-inst.arg] = s[-inst.arg], s[-1]


@handler("LOAD_CONST")
def LOAD_CONST(tx: Translator, inst: Inst) -> None:
    tx.push(wrap_constant_result(inst.argval))


@handler("LOAD_FAST")
def LOAD_FAST(tx: Translator, inst: Inst) -> None:
    if inst.argval not in tx.symbolic_locals:
        unsupported(f"local variable {inst.argval!r} referenced before assignment", "unbound")
    value = tx.symbolic_locals[inst.argval]
    if isinstance(value, LazyArg):
        value = tx.symbolic_locals[inst.argval] = value.realize(tx)
    tx.push(value)


@handler("STORE_FAST")
def STORE_FAST(tx: Translator, inst: Inst) -> None:
    tx.symbolic_locals[inst.argval] = tx.pop()


@handler("DELETE_FAST")
def DELETE_FAST(tx: Translator, inst: Inst) -> None:
    tx.symbolic_locals.pop(inst.argval, None)


@handler("LOAD_DEREF", "LOAD_CLASSDEREF")
def LOAD_DEREF(tx: Translator, inst: Inst) -> None:
    cell = tx.cells[inst.argval]
    value = cell.get()
    if isinstance(value, LazyArg):  # an argument captured by an inner function
        value = cell.value = value.realize(tx)
    tx.push(value)


@handler("STORE_DEREF")
def STORE_DEREF(tx: Translator, inst: Inst) -> None:
    tx.cells[inst.argval].set(tx.pop())


@handler("LOAD_CLOSURE")
def LOAD_CLOSURE(tx: Translator, inst: Inst) -> None:
    tx.push(CellVariable(tx.cells[inst.argval]))


@handler("LOAD_GLOBAL")
def LOAD_GLOBAL(tx: Translator, inst: Inst) -> None:
    if inst.arg & 1:
        tx.push(NULL)
    name = inst.argval
    pending = tx.output.side_effects.pending_global(tx.f_globals, name)
    if pending is not None:
        tx.push(pending)
    elif name in tx.f_globals:
        tx.push(wrap_value(tx, tx.f_globals[name], tx.global_source(name)))
    elif name in tx.f_builtins:
        globals_dict = tx.globals_dict_source()
        if globals_dict is not None:  # a global of that name defined later would shadow the builtin
            tx.output.guards.add(globals_dict, "NO_KEY", name)
        tx.push(wrap_value(tx, tx.f_builtins[name], None))
    else:
        unsupported(f"name {name!r} is not defined", "unbound")


@handler("STORE_GLOBAL")
def STORE_GLOBAL(tx: Translator, inst: Inst) -> None:
    if tx.f_globals is not tx.output.f_globals:
        unsupported("writing a global of another module", "side_effect")
    tx.output.side_effects.store_global(tx.f_globals, inst.argval, tx.pop())


@handler("LOAD_ATTR")
def LOAD_ATTR(tx: Translator, inst: Inst) -> None:
    tx.push(tx.pop().var_getattr(tx, inst.argval))


@handler("LOAD_METHOD")
def LOAD_METHOD(tx: Translator, inst: Inst) -> None:
    obj = tx.pop()
    tx.push(NULL)
    tx.push(obj.var_getattr(tx, inst.argval))


@handler("STORE_ATTR")
def STORE_ATTR(tx: Translator, inst: Inst) -> None:
    obj, value = tx.pop(), tx.pop()
    tx.store_attr(obj, inst.argval, value)


@handler("DELETE_ATTR")
def DELETE_ATTR(tx: Translator, inst: Inst) -> None:
    unsupported("del of an attribute", "side_effect")


@handler("IMPORT_NAME")
def IMPORT_NAME(tx: Translator, inst: Inst) -> None:
    import sys
    fromlist, level = tx.pop(), tx.pop()
    name = inst.argval
    if level.as_python_constant() != 0 or name not in sys.modules:
        unsupported(f"import of {name!r} (relative, or not imported yet)", "import")
    top = sys.modules[name.partition(".")[0]]
    tx.push(wrap_value(tx, sys.modules[name] if fromlist.as_python_constant() else top, None))


@handler("IMPORT_FROM")
def IMPORT_FROM(tx: Translator, inst: Inst) -> None:
    tx.push(tx.stack[-1].var_getattr(tx, inst.argval))


@handler("LOAD_ASSERTION_ERROR")
def LOAD_ASSERTION_ERROR(tx: Translator, inst: Inst) -> None:
    unsupported("assertion failed", "assert")


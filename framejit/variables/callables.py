"""Functions during tracing: user functions (inlined), torch functions (graph ops), methods, super()."""

from __future__ import annotations

import functools
import inspect
import sys
import types
import weakref
from typing import Any, Sequence

import torch

from framejit.contracts import Emitter, Tracer
from framejit.exc import BreakCode, raise_observed, unsupported
from framejit.sources import AttrSource, ConstSource, ItemSource
from framejit.variables.base import HEAPTYPE, KnownValueVariable, Variable, lookup_class_attr
from framejit.variables.constant import ConstantVariable, is_literal
from framejit.variables.containers import ListVariable, TupleVariable
from framejit.variables.mappings import DictVariable
from framejit.variables.tensor import TensorVariable


CO_VARARGS = inspect.CO_VARARGS
CO_VARKEYWORDS = inspect.CO_VARKEYWORDS


def bind_arguments(
    code: types.CodeType,
    defaults: Sequence[Variable],
    kwdefaults: dict[str, Variable],
    args: Sequence[Variable],
    kwargs: dict[str, Variable],
) -> dict[str, Variable]:
    """Map call arguments onto the parameters of `code`, as CPython would (errors become Unsupported)."""
    nparams, nkw = code.co_argcount, code.co_kwonlyargcount
    names = code.co_varnames
    positional, kwonly = names[:nparams], names[nparams : nparams + nkw]
    i = nparams + nkw
    varargs = names[i] if code.co_flags & CO_VARARGS else None
    varkw = names[i + (1 if varargs else 0)] if code.co_flags & CO_VARKEYWORDS else None
    bound: dict[str, Variable] = dict(zip(positional, args))
    if len(args) > nparams and varargs is None:
        unsupported(
            f"{code.co_name}() takes {nparams} positional arguments but {len(args)} were given", BreakCode.BAD_CALL
        )
    if varargs is not None:
        bound[varargs] = TupleVariable(list(args[nparams:]))
    extra: dict[str, Variable] = {}
    for key, value in kwargs.items():
        if key in positional[code.co_posonlyargcount :] or key in kwonly:
            if key in bound:
                unsupported(f"{code.co_name}() got multiple values for argument {key!r}", BreakCode.BAD_CALL)
            bound[key] = value
        elif varkw is not None:
            extra[key] = value
        else:
            unsupported(f"{code.co_name}() got an unexpected keyword argument {key!r}", BreakCode.BAD_CALL)
    if varkw is not None:
        bound[varkw] = DictVariable(extra)
    first_default = nparams - len(defaults)
    for j, name in enumerate(positional):
        if name not in bound:
            if j < first_default:
                unsupported(f"{code.co_name}() missing required argument {name!r}", BreakCode.BAD_CALL)
            bound[name] = defaults[j - first_default]
    for name in kwonly:
        if name not in bound:
            if name not in kwdefaults:
                unsupported(f"{code.co_name}() missing keyword-only argument {name!r}", BreakCode.BAD_CALL)
            bound[name] = kwdefaults[name]
    return bound


class UserFunctionVariable(Variable):
    """A Python function defined outside the trace; calling it inlines its bytecode."""

    def __init__(self, fn: types.FunctionType, source: Any = None) -> None:
        self.fn = fn
        self.source = source

    def truth(self, tx: Tracer) -> bool:  # a function is true (it has no __bool__ or __len__)
        return True

    def python_type(self) -> type:
        return types.FunctionType

    def is_python_constant(self) -> bool:
        return True

    def as_python_constant(self) -> Any:
        return self.fn

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        if name == "__code__":  # the function is guarded by its code already (CODE_MATCH)
            return tx.wrap(self.fn.__code__, None)
        return tx.wrap(getattr(self.fn, name), AttrSource(self.source, name) if self.source else None)

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        fn = self.fn

        def attr_source(attr: str, key: Any) -> Any:
            return ItemSource(AttrSource(self.source, attr), key) if self.source is not None else None

        defaults = [tx.wrap(v, attr_source("__defaults__", i)) for i, v in enumerate(fn.__defaults__ or ())]
        kwdefaults = {k: tx.wrap(v, attr_source("__kwdefaults__", k)) for k, v in (fn.__kwdefaults__ or {}).items()}
        bound = bind_arguments(fn.__code__, defaults, kwdefaults, args, kwargs)
        return tx.inline_call(
            fn.__code__, fn.__globals__, bound, closure=fn.__closure__, fn_source=self.source, fn_name=fn.__qualname__
        )

    def __repr__(self) -> str:
        return f"UserFunctionVariable({self.fn.__qualname__})"


class NestedFunctionVariable(Variable):
    """A function made by MAKE_FUNCTION during the trace (lambdas, inner defs, comprehensions)."""

    def __init__(
        self,
        code: types.CodeType,
        qualname: str,
        f_globals: dict,
        defaults: list[Variable],
        kwdefaults: dict[str, Variable],
        closure: list[Any] | None,
        annotations: Variable | None = None,
    ) -> None:
        self.code = code
        self.qualname = qualname
        self.f_globals = f_globals
        self.defaults = defaults
        self.kwdefaults = kwdefaults
        self.closure = closure  # list of framejit.trace.cells.Cell
        self.annotations = annotations  # MAKE_FUNCTION's tuple (name, hint, name, hint, ...): kept for a rebuild
        self.renamed: dict[str, Variable] = {}  # __name__, __module__... written in the trace (functools.wraps)
        self.func_dict = DictVariable({})  # its __dict__: other attributes written in the trace (__wrapped__)

    def truth(self, tx: Tracer) -> bool:  # a function is true (it has no __bool__ or __len__)
        return True

    def python_type(self) -> type:
        return types.FunctionType

    def children(self) -> list[Variable]:
        cells = [c.value for c in self.closure or () if c.value is not None]
        annotations = [self.annotations] if self.annotations is not None else []
        return [*self.defaults, *self.kwdefaults.values(), *cells, *annotations]

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        bound = bind_arguments(self.code, self.defaults, self.kwdefaults, args, kwargs)
        return tx.inline_call(
            self.code, self.f_globals, bound, closure=self.closure, fn_source=None, fn_name=self.qualname
        )

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        if name in self.renamed:
            return self.renamed[name]
        if name == "__dict__":
            return self.func_dict
        if name in self.func_dict.items:
            return self.func_dict.items[name]
        if name in ("__name__", "__qualname__"):
            return ConstantVariable(self.qualname.rsplit(".", 1)[-1] if name == "__name__" else self.qualname)
        if name == "__module__":
            return ConstantVariable(self.f_globals.get("__name__"))
        if name == "__doc__":  # the first constant when it is a string, as MAKE_FUNCTION sets it
            consts = self.code.co_consts
            return ConstantVariable(consts[0] if consts and isinstance(consts[0], str) else None)
        if name == "__code__":
            return tx.wrap(self.code, None)
        if name == "__defaults__":
            return TupleVariable(self.defaults) if self.defaults else ConstantVariable(None)
        if name == "__kwdefaults__":
            return DictVariable(dict(self.kwdefaults)) if self.kwdefaults else ConstantVariable(None)
        if name == "__annotations__":
            return self._annotations(tx)
        if not hasattr(types.FunctionType, name):  # (a function's other attributes live in its __dict__)
            raise_observed(AttributeError(f"'function' object has no attribute {name!r}"), BreakCode.MISSING_ATTR)
        return super().var_getattr(tx, name)

    def set_attr(self, name: str, value: Variable) -> None:
        """fn.name = value, for a function made in the trace: held until the function is rebuilt."""
        if name in _FUNCTION_DUNDERS:
            self.renamed[name] = value
        elif hasattr(types.FunctionType, name):
            unsupported(f"setting {name!r} on a function made in the trace", BreakCode.SIDE_EFFECT)
        else:
            self.func_dict.items[name] = value

    def _annotations(self, tx: Tracer) -> Variable:
        if "__annotations__" not in self.renamed:  # one dict, made once: reading it twice gives the same one
            pairs = self.annotations.unpack(tx) if self.annotations is not None else []
            names = [k.as_python_constant() for k in pairs[::2]]
            self.renamed["__annotations__"] = DictVariable(dict(zip(names, pairs[1::2])))
        return self.renamed["__annotations__"]

    def rebuild(self, cg: Emitter) -> None:
        """MAKE_FUNCTION for a function made during the trace, closing over the frame's own cells."""
        flags = 0
        if self.defaults:
            for item in self.defaults:
                cg.load(item)
            cg.emit("BUILD_TUPLE", len(self.defaults))
            flags |= 0x01
        if self.kwdefaults:
            cg.build_fresh(DictVariable(self.kwdefaults))
            flags |= 0x02
        if self.annotations is not None:
            cg.load(self.annotations)
            flags |= 0x04
        if self.closure:
            for cell in self.closure:
                name = cg.frame_cell_name(cell)
                if name is not None:
                    cg.emit("LOAD_CLOSURE", name)
                else:  # a cell of an inlined function: a new cell, one per traced cell, with its final value
                    if cell.rebuilt is None:
                        cell.rebuilt = NewCellVariable(cell)
                    cg.load(cell.rebuilt)
            cg.emit("BUILD_TUPLE", len(self.closure))
            flags |= 0x08
        cg.emit_const(self.code)
        cg.emit("MAKE_FUNCTION", flags)
        for name, value in self.renamed.items():  # fn.name = value, fn staying on the stack
            cg.load(value)
            cg.emit("COPY", 2)
            cg.emit("STORE_ATTR", name)
        if self.func_dict.items:  # fn.__dict__.update(d)
            cg.emit("COPY", 1)
            cg.emit("LOAD_ATTR", "__dict__")
            cg.emit("LOAD_METHOD", "update")
            cg.load(self.func_dict)
            cg.call(1)
            cg.emit("POP_TOP")

    def __repr__(self) -> str:
        return f"NestedFunctionVariable({self.qualname})"


# a function's own attributes that functools.update_wrapper copies (the rest of what it copies is __dict__)
_FUNCTION_DUNDERS = frozenset({"__name__", "__qualname__", "__module__", "__doc__", "__annotations__"})


class NewCellVariable(Variable):
    """A closure cell of a function inlined during the trace, as a function made there and returned needs it:
    made after the graph with the cell's last value (one cell object however many functions share it)."""

    rebuilt_once = True

    def __init__(self, cell: Any) -> None:
        self.cell = cell  # a framejit.trace.cells.Cell

    def python_type(self) -> type:
        return types.CellType

    def children(self) -> list[Variable]:
        return [self.cell.value] if self.cell.value is not None else []

    def rebuild(self, cg: Emitter) -> None:
        cg.emit("PUSH_NULL")
        cg.emit_const(types.CellType)
        if self.cell.value is not None:
            cg.load(self.cell.value)
        cg.call(1 if self.cell.value is not None else 0)


class UserMethodVariable(Variable):
    """A function bound to a traced self (a module, a user object)."""

    def __init__(self, fn: Variable, obj: Variable, source: Any = None) -> None:
        self.fn = fn
        self.obj = obj
        self.source = source

    def python_type(self) -> type:
        return types.MethodType

    def truth(self, tx: Tracer) -> bool:
        return True

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        return self.fn.call(tx, [self.obj, *args], kwargs)

    def children(self) -> list[Variable]:
        return [self.fn, self.obj]

    def rebuild(self, cg: Emitter) -> None:
        cg.emit("PUSH_NULL")
        cg.emit_const(types.MethodType)
        cg.load(self.fn)
        cg.load(self.obj)
        cg.call(2)

    def __repr__(self) -> str:
        return f"UserMethodVariable({self.fn} of {self.obj})"


class SuperVariable(Variable):
    """super(cls, obj): attribute lookup starting after cls in type(obj).__mro__."""

    def __init__(self, cls: type, obj: Variable) -> None:
        self.cls = cls
        self.obj = obj

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        from framejit.variables.user_object import class_attribute

        owner = self.obj.as_python_constant() if issubclass(self.obj.python_type(), type) else None
        klass, attr = lookup_class_attr(owner or self.obj.python_type(), name, after=self.cls)
        if klass is None:
            unsupported(f"super().{name} not found", BreakCode.MISSING_ATTR)
        source = ItemSource(AttrSource(ConstSource(klass), "__dict__"), name)
        if owner is None:
            return class_attribute(tx, self.obj, attr, source)
        # super(C, cls) in a classmethod: the lookup is on cls's own MRO and a classmethod binds to cls
        if isinstance(attr, classmethod):
            return UserMethodVariable(tx.wrap(attr.__func__, AttrSource(source, "__func__")), self.obj)
        if isinstance(attr, staticmethod):
            return tx.wrap(attr.__func__, AttrSource(source, "__func__"))
        return tx.wrap(attr, source)


class TorchVariable(KnownValueVariable):
    """A callable from torch (torch.*, torch.nn.functional.*, Tensor methods) or allow_in_graph: a graph op."""

    @property
    def fn(self) -> Any:
        return self.value

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        from framejit.variables.torch_special import call_torch_function

        return call_torch_function(tx, self.fn, list(args), kwargs)

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        return tx.wrap(getattr(self.fn, name), AttrSource(self.source, name) if self.source else None)

    def __repr__(self) -> str:
        return f"TorchVariable({getattr(self.fn, '__name__', self.fn)})"


class PartialVariable(Variable):
    """`functools.partial(fn, *args, **keywords)` made during the trace: calling it calls fn with the arguments
    joined, as partial does; it is made for real after the graph where the program keeps it."""

    rebuilt_once = True  # an object with an identity (and a __dict__)

    def __init__(self, fn: Variable, args: Sequence[Variable], keywords: dict[str, Variable]) -> None:
        if isinstance(fn, PartialVariable):  # partial(partial(f, a), b) is partial(f, a, b), as in functools
            fn, args, keywords = fn.fn, [*fn.args, *args], {**fn.keywords, **keywords}
        self.fn, self.args, self.keywords = fn, list(args), dict(keywords)

    def truth(self, tx: Tracer) -> bool:
        return True

    def python_type(self) -> type:
        return functools.partial

    def children(self) -> list[Variable]:
        return [self.fn, *self.args, *self.keywords.values()]

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        return self.fn.call(tx, [*self.args, *args], {**self.keywords, **kwargs})

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        if name == "func":
            return self.fn
        if name == "args":
            return TupleVariable(self.args)
        if name == "keywords":
            return DictVariable({k: v for k, v in self.keywords.items()})
        return super().var_getattr(tx, name)

    def rebuild(self, cg: Emitter) -> None:
        cg.emit("PUSH_NULL")
        cg.emit_const(functools.partial)
        for item in (self.fn, *self.args, *self.keywords.values()):
            cg.load(item)
        cg.call(1 + len(self.args) + len(self.keywords), tuple(self.keywords))

    def __repr__(self) -> str:
        return f"PartialVariable({self.fn})"


def call_python_object(tx: Tracer, value: Any, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
    """Calling an opaque object (a class, a C function outside torch): only fold pure, constant calls."""
    if value is functools.partial and args:
        return PartialVariable(args[0], args[1:], kwargs)
    if isinstance(value, type) and issubclass(value, tuple) and hasattr(value, "_fields"):
        return _make_namedtuple(value, args, kwargs)
    if value is object.__init__ and len(args) == 1 and not kwargs:  # `super().__init__()` reaching object
        return ConstantVariable(None)
    if value is weakref.ref and len(args) == 1 and not kwargs and args[0].source is not None:
        from framejit.variables.constant import WeakrefVariable

        return WeakrefVariable(args[0])
    if (
        isinstance(value, types.BuiltinMethodType)
        and isinstance(value.__self__, type)
        and not args
        and not kwargs
        and value.__name__ == "__subclasses__"
    ):  # cls.__subclasses__(): guarded on the answer (a class may be added)
        subclasses = value()
        tx.output.guards.add_query(type.__subclasses__, (value.__self__,), subclasses)
        return ListVariable([tx.wrap(c, ConstSource(c)) for c in subclasses])  # (guarded by the query)
    if is_numpy_number_function(value) and isinstance(value, type) and len(args) == 1 and not kwargs:
        from framejit.variables.numpy_arrays import NumpyArrayVariable, scalar_type_call

        if isinstance(args[0], NumpyArrayVariable):  # np.float32(a.sum()): a cast
            return scalar_type_call(tx, value, args[0])
    all_const = all(a.is_python_constant() for a in [*args, *kwargs.values()])
    if all_const and (
        value in (torch.Size, torch.device, torch.finfo, torch.iinfo, torch.dtype)
        or _is_numpy_dtype_class(value)
        or getattr(value, "__module__", None) == "math"
        or is_numpy_number_function(value)
    ):
        result = value(
            *[a.as_python_constant() for a in args], **{k: v.as_python_constant() for k, v in kwargs.items()}
        )
        if is_numpy_number_function(value) and not is_literal(result):  # an array: not a constant the trace can hold
            unsupported(f"numpy.{value.__name__} giving an array", BreakCode.OPAQUE_CALL)  # (not a number)
        return tx.wrap_constant(result)
    if args:
        from framejit.variables.container_subclasses import unbound_container_method

        method = unbound_container_method(tx, value, args[0])
        if method is not None:
            return method.call(tx, args[1:], kwargs)
    name = getattr(value, "__qualname__", None) or repr(value)
    if isinstance(value, type) and value.__flags__ & HEAPTYPE:  # a user class the trace cannot make: say why
        from framejit.variables.user_object import why_not_constructible

        why = why_not_constructible(value)
        if why is not None:
            unsupported(f"making a {name} in the trace: {why}", BreakCode.OPAQUE_CALL)
    unsupported(f"call to {name}, which framejit cannot trace (not torch, not user Python code)", BreakCode.OPAQUE_CALL)


def _is_numpy_dtype_class(value: Any) -> bool:
    """np.dtype, np.finfo, np.iinfo: of constants, immutable descriptions of a dtype."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and any(value is c for c in (numpy.dtype, numpy.finfo, numpy.iinfo))


def is_numpy_number_function(value: Any) -> bool:
    """np.sqrt and its kind, and the scalar types (np.float32): of numbers, pure functions giving a number."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and (
        isinstance(value, numpy.ufunc) or isinstance(value, type) and issubclass(value, numpy.generic)
    )


def _make_namedtuple(cls: type, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
    defaults = {k: ConstantVariable(v) for k, v in getattr(cls, "_field_defaults", {}).items()}
    values = dict(zip(cls._fields, args))
    for key, value in kwargs.items():
        if key not in cls._fields or key in values:
            unsupported(f"{cls.__name__}() got a bad keyword argument {key!r}", BreakCode.BAD_CALL)
        values[key] = value
    missing = [f for f in cls._fields if f not in values and f not in defaults]
    if missing or len(args) > len(cls._fields):
        unsupported(f"{cls.__name__}() called with the wrong arguments", BreakCode.BAD_CALL)
    return TupleVariable([values.get(f, defaults.get(f)) for f in cls._fields], py_type=cls)


class DisallowedVariable(Variable):
    """A function the user (or framejit.disable) keeps out of graphs."""

    def __init__(self, fn: Any, reason: str = "disallow_in_graph") -> None:
        self.fn = fn
        self.reason = reason

    def is_python_constant(self) -> bool:
        return True

    def as_python_constant(self) -> Any:
        return self.fn

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        name = getattr(self.fn, "__qualname__", repr(self.fn))
        unsupported(f"call to {name}, marked {self.reason}", BreakCode.DISALLOWED)


class GraphBreakRequestVariable(DisallowedVariable):
    """framejit.graph_break / TorchDynamo's graph_break: a call is a graph break whose reason names it (and its
    message); the call then runs as Python, where it does nothing."""

    def __init__(self, fn: Any, name: str) -> None:
        super().__init__(fn)
        self.name = name

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        msg = next(iter([*args, *kwargs.values()]), None)
        text = msg.as_python_constant() if msg is not None and msg.is_python_constant() else ""
        unsupported(f"graph break requested: {self.name} called{f' ({text})' if text else ''}", BreakCode.USER_BREAK)


class RefusalVariable(DisallowedVariable):
    """A polyfill's `refuse(reason)` (policy.mark_refusal): a graph break with that reason; the program's call that
    the polyfill stands for then runs as Python."""

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        reason = next(iter([*args, *kwargs.values()]), None)
        text = reason.as_python_constant() if reason is not None and reason.is_python_constant() else str(self.fn)
        unsupported(text, BreakCode.DISTRIBUTED)


class SubstitutedVariable(Variable):
    """A function with a polyfill (framejit.substitute_in_graph): a call inlines the polyfill, or, where it may be
    folded and every argument is a constant, calls the original now."""

    def __init__(self, fn: Any, substitute: Any) -> None:
        self.fn = fn
        self.substitute = substitute

    def is_python_constant(self) -> bool:
        return True

    def as_python_constant(self) -> Any:
        return self.fn

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        values = [*args, *kwargs.values()]
        if self.substitute.fold and all(v.is_python_constant() for v in values):
            consts = [a.as_python_constant() for a in args]
            try:
                result = self.substitute.original(*consts, **{k: v.as_python_constant() for k, v in kwargs.items()})
            except Exception as e:  # raised where the code called it, as eager does
                raise_observed(e)
            return _constant(tx, result)
        polyfill = self.substitute.polyfill
        return tx.wrap(polyfill, ConstSource(polyfill)).call(tx, args, kwargs)


class ConstantResultVariable(Variable):
    """A function under assume_constant_result: called now, its result becomes a constant. With `answer`, the
    call is not made and `answer` is the result (torch.compiler.is_compiling() while framejit traces)."""

    _NOT_FIXED = object()

    def __init__(self, fn: Any, answer: Any = _NOT_FIXED) -> None:
        self.fn = fn
        self.answer = answer

    def is_python_constant(self) -> bool:
        return True

    def as_python_constant(self) -> Any:
        return self.fn

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if self.answer is not self._NOT_FIXED:
            return tx.wrap_constant(self.answer)
        # called with the real values of this call (tensors the graph computes: the graph so far run on the
        # real inputs), as TorchDynamo does; a tensor result is held by the graph as a constant
        result = self.fn(*[_real_value(tx, a) for a in args], **{k: _real_value(tx, v) for k, v in kwargs.items()})
        return _constant(tx, result)


def _real_value(tx: Tracer, var: Variable) -> Any:
    if var.is_python_constant():
        return var.as_python_constant()
    if isinstance(var, TensorVariable):
        return tx.output.real_value(var.node)
    if isinstance(var, (TupleVariable, ListVariable)):
        return var.python_type()(_real_value(tx, v) for v in var.items)
    for real in ("module", "value"):  # modules and objects from outside the frame (they have a source)
        if var.source is not None and hasattr(var, real):
            return getattr(var, real)
    unsupported(
        f"an assume_constant_result function called with {var}, whose value is known only when the graph runs",
        BreakCode.DISALLOWED,
    )


def _constant(tx: Tracer, value: Any) -> Variable:
    if isinstance(value, torch.Tensor):
        return tx.output.add_constant_tensor(tx, value)
    if type(value) in (tuple, list):
        items = [_constant(tx, v) for v in value]
        return TupleVariable(items) if type(value) is tuple else ListVariable(items)
    if type(value) is dict:
        return DictVariable({k: _constant(tx, v) for k, v in value.items()})
    return tx.wrap_constant(value)

"""Instances of user classes read during tracing: attribute reads are guarded, writes replayed."""

from __future__ import annotations

import collections
import collections.abc
import functools
import os
import types
from typing import Any, Iterator, Sequence

from framejit.codeobj import exception_table
from framejit.contracts import Emitter, GuardKind, Tracer
from framejit.exc import BreakCode, Unsupported, raise_observed, unsupported
from framejit.sources import AttrSource, GenericAttrSource, ItemSource, Source
from framejit.variables.base import HEAPTYPE, Variable, lookup_class_attr
from framejit.variables.constant import ConstantVariable
from framejit.variables.containers import BoundMethod, IteratorVariable, ListVariable, _born
from framejit.variables.container_subclasses import BASES, base_container_method
from framejit.variables.hash_keys import key_variable
from framejit.variables.mappings import DictVariable, dict_iterator
from framejit.variables.sets import SetVariable, set_keys

# builtin types whose __getattribute__ is the generic lookup (PyObject_GenericGetAttr), as object's is
_GENERIC_GETATTRIBUTE = frozenset(
    vars(t)["__getattribute__"]
    for t in (object, dict, list, tuple, set, frozenset, int, float, str, bytes, collections.defaultdict)
)


def bound_class_attribute(tx: Tracer, obj: Variable, attr: Any, source: Any) -> Variable | None:
    """obj.<name> where <name> is a function, property, staticmethod or classmethod found on obj's class as
    `attr` (None for anything else). `source` names it on the class, so that a method replaced later fails a
    guard; without one (an object guarded by identity) nothing more is guarded."""
    from framejit.variables.callables import UserMethodVariable

    def on_class(part: str) -> Any:
        return AttrSource(source, part) if source is not None else None

    if isinstance(attr, types.FunctionType):
        return UserMethodVariable(tx.wrap(attr, source), obj)
    if isinstance(attr, property) and isinstance(attr.fget, types.FunctionType):
        return tx.wrap(attr.fget, on_class("fget")).call(tx, [obj], {})
    if isinstance(attr, staticmethod):
        return tx.wrap(attr.__func__, source)
    if isinstance(attr, classmethod):
        cls_var = (
            obj.class_var(tx) if source is not None and hasattr(obj, "class_var") else tx.wrap(obj.python_type(), None)
        )
        return UserMethodVariable(tx.wrap(attr.__func__, on_class("__func__")), cls_var)
    if isinstance(attr, (types.MethodDescriptorType, types.WrapperDescriptorType)) and attr.__objclass__ in BASES:
        method = base_container_method(tx, obj, attr.__name__)
        if method is not None:
            return method
    if isinstance(attr, functools._lru_cache_wrapper) and isinstance(obj, UserObjectVariable):
        return MemoisedMethod(attr, obj, source)  # an lru_cache'd method (logger.warning_once)
    if isinstance(attr, (types.WrapperDescriptorType, types.MethodDescriptorType)):  # object.__getattribute__...
        return UserMethodVariable(tx.wrap(attr, source), obj)
    return None


def class_attribute(tx: Tracer, obj: Variable, attr: Any, source: Any) -> Variable:
    """obj.<name> where <name> is found on obj's class as `attr`: a method bound to obj, or a plain value."""
    bound = bound_class_attribute(tx, obj, attr, source)
    if bound is not None:
        return bound
    if not hasattr(type(attr), "__get__"):
        return tx.wrap(attr, source)
    unsupported(f"attribute implemented by a {type(attr).__name__} descriptor", BreakCode.GETATTR)


def has_custom_lookup(cls: type) -> bool:
    """Whether reading an attribute of a `cls` instance runs a __getattribute__ written in Python. framejit then
    inspects such objects only through their type and object's own lookup: isinstance(), hasattr() and getattr()
    on them would run the user's code at compile time."""
    return type.__getattribute__(cls, "__getattribute__") is not object.__getattribute__ and isinstance(
        lookup_class_attr(cls, "__getattribute__")[1], types.FunctionType
    )


def instance_dict(value: Any) -> dict:
    """value.__dict__ as object's lookup finds it ({} for objects without one), never running user code."""
    try:
        found = object.__getattribute__(value, "__dict__")
    except AttributeError:
        return {}
    return found if type(found) is dict else {}


def python_class_method(tx: Tracer, obj: Variable, name: str) -> Variable | None:
    """obj.<name> bound, when obj is a user object whose class defines <name> as a Python function (a dunder an
    operator or builtin calls); else None."""
    if not isinstance(obj, (UserObjectVariable, NewObjectVariable)):
        return None
    attr = lookup_class_attr(obj.python_type(), name)[1]
    return class_attribute(tx, obj, attr, obj.class_source(name)) if isinstance(attr, types.FunctionType) else None


_BASE_ITERS = (list.__iter__, dict.__iter__, set.__iter__, frozenset.__iter__)


def iterate_user_object(tx: Tracer, obj: Variable) -> Variable | None:
    """iter(obj) for a user object: its Python __iter__ traced (it must give an iterator the trace knows), or, for a
    collections.abc.Sequence keeping the mixin's __iter__ (a generator walking obj[0], obj[1]... until IndexError),
    the items obj[i] for i in range(len(obj)), which the Sequence contract makes the same. None if neither."""
    if not isinstance(obj, (UserObjectVariable, NewObjectVariable)):
        return None
    cls = obj.python_type()
    if lookup_class_attr(cls, "__iter__")[1] in _BASE_ITERS:  # a list, dict or set subclass
        contents = obj.base_contents(tx)
        return dict_iterator(tx, contents) or IteratorVariable(contents.unpack(tx))
    if (
        issubclass(cls, collections.abc.Sequence)
        and lookup_class_attr(cls, "__iter__")[1] is collections.abc.Sequence.__iter__
    ):
        length = python_class_method(tx, obj, "__len__")
        getitem = python_class_method(tx, obj, "__getitem__")
        if length is None or getitem is None:
            return None
        n = length.call(tx, [], {}).as_python_constant()
        return IteratorVariable([getitem.call(tx, [ConstantVariable(i)], {}) for i in range(n)])
    method = python_class_method(tx, obj, "__iter__")
    return method.call(tx, [], {}) if method is not None else None


def python_getattr(tx: Tracer, obj: Variable, name: str) -> Variable:
    """obj.name as Python does it: type(obj).__getattribute__, then __getattr__ if that finds nothing. A
    __getattribute__ or __getattr__ written in Python is traced like any method; its super().__getattribute__
    is the kind's generic_getattr."""
    cls = obj.python_type()
    getattribute = lookup_class_attr(cls, "__getattribute__")[1]
    try:
        if isinstance(getattribute, types.FunctionType):
            return _call_lookup_method(tx, obj, "__getattribute__", name)
        if getattribute in _GENERIC_GETATTRIBUTE:
            return obj.generic_getattr(tx, name)
        return obj.native_getattr(tx, name)
    except Unsupported as e:
        if e.code != BreakCode.MISSING_ATTR or not isinstance(
            lookup_class_attr(cls, "__getattr__")[1], types.FunctionType
        ):
            raise
    return _call_lookup_method(tx, obj, "__getattr__", name)


def _call_lookup_method(tx: Tracer, obj: Variable, method: str, name: str) -> Variable:
    """type(obj).<method>(obj, name), traced. A missing attribute it reports is trusted only when the method
    cannot catch it itself (it has no try block): the trace does not follow exceptions."""
    fn = lookup_class_attr(obj.python_type(), method)[1]
    bound = class_attribute(tx, obj, fn, obj.class_source(method))
    try:
        return bound.call(tx, [ConstantVariable(name)], {})
    except Unsupported as e:
        if e.code == BreakCode.MISSING_ATTR and exception_table(fn.__code__):
            unsupported(
                f"{obj.python_type().__name__}.{method} may catch the AttributeError of {name!r}", BreakCode.GETATTR
            )
        raise


def delete_attribute(tx: Tracer, obj: Variable, name: str) -> None:
    """del obj.name on an object made in the trace: its class's Python __delattr__ traced, object's forgets the
    write (the object is made after the graph, so there is nothing to undo). Elsewhere a graph break."""
    if not isinstance(obj, NewObjectVariable):
        unsupported(f"del of attribute {name!r} of {obj}", BreakCode.SIDE_EFFECT)
    custom = python_class_method(tx, obj, "__delattr__")
    if custom is not None:
        custom.call(tx, [ConstantVariable(name)], {})
    elif not tx.output.side_effects.delete_attr(obj, name):
        unsupported(f"{obj.cls.__name__!r} object has no attribute {name!r} to delete", BreakCode.MISSING_ATTR)


def user_truth(tx: Tracer, obj: Variable) -> bool:
    """bool(obj) as Python decides it: the class's __bool__, else its __len__ (a list or dict subclass: its
    items), else True. The method is traced and must answer a constant."""
    cls = obj.python_type()
    for name in ("__bool__", "__len__"):
        if not lookup_class_attr(cls, name)[0]:
            continue
        method = python_class_method(tx, obj, name)
        if method is None and issubclass(cls, BASES):
            return obj.base_contents(tx).truth(tx)
        answer = method.call(tx, [], {}) if method is not None else None
        if answer is None or not answer.is_python_constant():
            unsupported(f"bool() of a {cls.__name__} whose {name} is not known at trace time", BreakCode.TRUTH)
        return bool(answer.as_python_constant())
    return True


def call_memoised(
    tx: Tracer, fn: Any, args: Sequence[Variable], kwargs: dict[str, Variable], source: Source | None = None
) -> Variable:
    """An lru_cache'd function called now. With arguments known at trace time (constants, or objects from outside
    held by identity, guarded so) it answers what its cache holds, computing (and caching) it now if eager would,
    as a constant. With any other argument (a symbolic size, a tensor) the function it wraps (`__wrapped__`) is
    traced instead, as TorchDynamo does: its cache would be keyed by values the trace does not have."""

    def known(arg: Variable) -> bool:
        return arg.is_python_constant() or isinstance(arg, UserObjectVariable) and arg.source is not None

    if not all(known(a) for a in [*args, *kwargs.values()]):
        wrapped = getattr(fn, "__wrapped__", None)
        if not isinstance(wrapped, types.FunctionType):
            unknown = next(a for a in [*args, *kwargs.values()] if not known(a))
            unsupported(f"an lru_cache'd function that wraps no Python function called with {unknown}", BreakCode.CALL)
        return tx.wrap(wrapped, None if source is None else AttrSource(source, "__wrapped__")).call(tx, args, kwargs)

    def real(arg: Variable) -> Any:
        if arg.is_python_constant():
            return arg.as_python_constant()
        assert isinstance(arg, UserObjectVariable) and arg.source is not None  # (known)
        tx.output.guards.add(arg.source, GuardKind.ID_MATCH, arg.value)
        return arg.value

    return tx.wrap_constant(fn(*map(real, args), **{k: real(v) for k, v in kwargs.items()}))


class MemoisedMethod(Variable):
    """An lru_cache'd function found on an object's class, bound to it (call_memoised)."""

    def __init__(self, fn: Any, obj: Variable, source: Source | None = None) -> None:
        self.fn, self.obj, self.source = fn, obj, source

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        return call_memoised(tx, self.fn, [self.obj, *args], kwargs, self.source)


def _user_iterator(tx: Tracer, obj: Variable) -> Variable:
    iterator = iterate_user_object(tx, obj)
    if iterator is None:
        unsupported(f"iterating over {obj}", BreakCode.ITER)
    return iterator


class UserObjectVariable(Variable):
    """An object of a user-defined class that exists outside the frame (it has a source)."""

    def __init__(self, value: Any, source: Any) -> None:
        self.value = value
        self.source = source
        self._contents: Any = None  # a dict/list/set subclass's items

    def python_type(self) -> type:
        return type(self.value)

    def unpack(self, tx: Tracer) -> list[Variable]:
        return _user_iterator(tx, self).unpack(tx)

    def each_item(self, tx: Tracer) -> Iterator[Variable]:
        return _user_iterator(tx, self).each_item(tx)

    def truth(self, tx: Tracer) -> bool:
        return user_truth(tx, self)

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        return python_getattr(tx, self, name)

    def guard_missing_attr(self, tx: Tracer, name: str) -> None:
        """With a __getattribute__ written in Python, checked without running it: not in the instance dict (the
        class is guarded)."""
        if has_custom_lookup(self.python_type()):
            tx.output.guards.add(self.attr_source("__dict__"), GuardKind.NO_KEY, name)
        else:
            super().guard_missing_attr(tx, name)

    def native_getattr(self, tx: Tracer, name: str) -> Variable:
        """A type written in C with its own lookup (code objects...): its getters only read."""
        cls = type(self.value)
        if cls.__flags__ & HEAPTYPE:
            unsupported(f"{cls.__name__} has a __getattribute__ that is not Python code", BreakCode.GETATTR)
        return tx.wrap(getattr(self.value, name), AttrSource(self.source, name))

    def attr_source(self, name: str) -> Source:
        """Where obj.name is read from in guards and reloads: past a __getattribute__ of the class's own."""
        if lookup_class_attr(type(self.value), "__getattribute__")[1] in _GENERIC_GETATTRIBUTE:
            return AttrSource(self.source, name)
        return GenericAttrSource(self.source, name)

    def class_source(self, name: str) -> AttrSource:
        return AttrSource(self.attr_source("__class__"), name)

    def class_var(self, tx: Tracer) -> Variable:
        return tx.wrap(type(self.value), self.attr_source("__class__"))

    def base_contents(self, tx: Tracer) -> Any:
        """What an instance of a dict, list or set subclass holds as a dict, list or set."""
        if isinstance(self.value, (set, frozenset)):
            return self.set_contents(tx)
        return self.dict_contents(tx) if isinstance(self.value, dict) else self.list_contents(tx)

    def dict_contents(self, tx: Tracer) -> DictVariable:
        """What an instance of a dict subclass holds as a dict, read (and guarded) through its source."""
        if self._contents is None:
            self._contents = DictVariable.read(tx, self.value, self.source)
            self._contents.owner = self
        return self._contents

    def set_contents(self, tx: Tracer) -> Any:
        """What an instance of a set or frozenset subclass holds, read through the base type's iteration (guarded
        by its type and items, as SetVariable.read reads a set)."""
        if self._contents is None:
            self._contents = SetVariable.read(tx, self.value, self.source)
            self._contents.owner = self
        return self._contents

    def list_contents(self, tx: Tracer) -> ListVariable:
        """What an instance of a list subclass holds as a list (read through list's own indexing, guarded by
        length). Only for subclasses that keep list's __getitem__ and __len__: a guard must not run user code."""
        cls = type(self.value)
        if (
            lookup_class_attr(cls, "__getitem__")[1] is not list.__getitem__
            or lookup_class_attr(cls, "__len__")[1] is not list.__len__
        ):
            unsupported(f"{cls.__name__} overrides list's indexing", BreakCode.CONTAINER)
        if self._contents is None:
            tx.output.guards.add(self.source, GuardKind.LEN_MATCH, self.value)
            self._contents = ListVariable(
                [tx.wrap(v, ItemSource(self.source, i)) for i, v in enumerate(self.value)], self.source
            )
        return self._contents

    def generic_getattr(self, tx: Tracer, name: str) -> Variable:
        """object.__getattribute__(obj, name): data descriptors of the class, the instance dict, then the class."""
        pending = tx.output.side_effects.pending_attr(self, name)
        if pending is not None:  # written by the trace (a data descriptor would have refused the write)
            return pending
        cls = type(self.value)
        found, attr = lookup_class_attr(cls, name)
        if found and hasattr(type(attr), "__set__") and not isinstance(attr, property):
            if isinstance(attr, (types.MemberDescriptorType, types.GetSetDescriptorType)):
                return tx.wrap(attr.__get__(self.value, cls), self.attr_source(name))  # a slot, a C getter
            unsupported(f"attribute {name!r} implemented by a {type(attr).__name__} descriptor", BreakCode.GETATTR)
        inst = instance_dict(self.value)
        if name in inst and not (found and isinstance(attr, property)):
            return tx.wrap(inst[name], self.attr_source(name))
        if found:
            if isinstance(inst, dict):  # an instance attribute set later would shadow the class's
                tx.output.guards.add(self.attr_source("__dict__"), GuardKind.NO_KEY, name)
            return class_attribute(tx, self, attr, self.class_source(name))
        unsupported(f"{cls.__name__!r} object has no attribute {name!r}", BreakCode.MISSING_ATTR)

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        from framejit.variables.callables import UserFunctionVariable

        cls = type(self.value)
        found, call = lookup_class_attr(cls, "__call__")
        if found and isinstance(call, types.FunctionType):
            return UserFunctionVariable(call).call(tx, [self, *args], kwargs)
        if issubclass(cls, functools.partial):  # partial(fn, *a, **k)(*args, **kwargs): fn(*a, *args, **k, **kwargs)
            fn = tx.wrap(self.value.func, AttrSource(self.source, "func"))
            bound = tx.wrap(self.value.args, AttrSource(self.source, "args")).unpack(tx)
            keywords = tx.wrap(self.value.keywords, AttrSource(self.source, "keywords"))
            return fn.call(tx, [*bound, *args], {**keywords.items, **kwargs})
        if cls is functools._lru_cache_wrapper:
            return call_memoised(tx, self.value, args, kwargs, self.source)
        unsupported(f"calling a {cls.__name__} object", BreakCode.CALL)

    def __repr__(self) -> str:
        return f"UserObjectVariable({type(self.value).__name__})"


def constructible(cls: Any) -> bool:
    """A user class whose instances the trace can make (why_not_constructible says None)."""
    return isinstance(cls, type) and cls.__module__ != "builtins" and why_not_constructible(cls) is None


def why_not_constructible(cls: type) -> str | None:
    """Why the trace cannot make instances of `cls`, or None: it makes those made by type's __call__ (a metaclass
    may add other things), object's, dict's, list's, set's or frozenset's __new__ (a subclass of one: an object
    that is also that container), the generic __getattribute__ or a Python one, a Python (or the base's) __init__
    and __setattr__. Its __slots__ are attributes like others: the writes are replayed through the slots."""
    if type(cls).__call__ is not type.__call__:
        return f"its metaclass {type(cls).__name__} has a __call__ that is not Python code"
    if cls.__new__ not in (object.__new__, dict.__new__, list.__new__, set.__new__, frozenset.__new__):
        return "it has a __new__ of its own (the object is made after the graph by its base's __new__)"
    checks = (
        ("__getattribute__", lambda m: m in _GENERIC_GETATTRIBUTE),
        ("__setattr__", lambda m: m is object.__setattr__),
        ("__init__", lambda m: m in _BASE_INITS),
    )
    for name, builtin_ok in checks:
        method = lookup_class_attr(cls, name)[1]
        if not (builtin_ok(method) or isinstance(method, types.FunctionType)):
            return f"its {name} is {type(method).__name__} code framejit cannot trace (not Python)"
    return None


_BASE_INITS = (object.__init__, dict.__init__, collections.OrderedDict.__init__, list.__init__, set.__init__)


def construct(tx: Tracer, cls_var: Variable, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
    """cls(*args, **kwargs) for a constructible class: a NewObjectVariable, its __init__ inlined."""
    cls = cls_var.as_python_constant()
    obj = NewObjectVariable(cls, cls_var)
    init = lookup_class_attr(cls, "__init__")[1]
    if issubclass(cls, frozenset):  # frozenset.__new__ takes the items (one iterable); then any __init__ runs
        if len(args) > 1:
            unsupported(f"{cls.__name__}() takes at most one positional argument", BreakCode.BAD_CALL)
        if args:
            obj.set_part.keys = set(set_keys(tx, args[0]))
        if init is object.__init__:
            return obj
    if init in _BASE_INITS:
        if obj.base_part is not None and (args or kwargs):  # list's, dict's or set's own __init__
            method = "update" if obj.dict_part is not None else "extend" if obj.list_part is not None else "__init__"
            obj.base_part.call_method(tx, method, args, kwargs)
        elif args or kwargs:
            unsupported(f"{cls.__name__}() with arguments and no __init__ of its own", BreakCode.CALL)
    else:
        init_source = AttrSource(cls_var.source, "__init__") if cls_var.source is not None else None
        tx.wrap(init, init_source).call(tx, [obj, *args], kwargs)
    return obj


class NewObjectVariable(Variable):
    """An instance of a plain user class made during the trace (a dataclass output, a small record).

    Its attributes are writes in the side effects; after the graph it is made with object.__new__ and the
    writes are replayed onto it. Class attributes and methods are read (and guarded) through its class."""

    rebuilt_once = True
    dropped = False  # found unreachable after the trace (SideEffects.drop_unreachable_objects): its writes are gone

    def __init__(self, cls: type, cls_var: Variable) -> None:
        self.cls = cls
        self.cls_var = cls_var  # the class as the trace read it (with a source): guards name it
        self.born = _born()  # its attribute writes are writes to state made in the trace
        # an instance of a dict subclass is also a dict: its items, set through dict's own methods
        self.dict_part = DictVariable({}, None, dict) if issubclass(cls, dict) else None
        self.list_part = ListVariable([]) if issubclass(cls, list) else None  # likewise for a list subclass
        self.set_part = _new_set_part(cls)  # and for a set or frozenset subclass
        if self.base_part is not None:
            self.base_part.owner = self

    @property
    def base_part(self) -> Any:
        return next((p for p in (self.dict_part, self.list_part, self.set_part) if p is not None), None)

    def base_contents(self, tx: Tracer) -> Any:
        """What it holds as a dict, list or set (an instance of such a subclass), as the trace made it."""
        return self.base_part

    def python_type(self) -> type:
        return self.cls

    def unpack(self, tx: Tracer) -> list[Variable]:
        return _user_iterator(tx, self).unpack(tx)

    def each_item(self, tx: Tracer) -> Iterator[Variable]:
        return _user_iterator(tx, self).each_item(tx)

    def truth(self, tx: Tracer) -> bool:
        return user_truth(tx, self)

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        return python_getattr(tx, self, name)

    def native_getattr(self, tx: Tracer, name: str) -> Variable:
        unsupported(f"{self.cls.__name__} has a __getattribute__ that is not Python code", BreakCode.GETATTR)

    def generic_getattr(self, tx: Tracer, name: str) -> Variable:
        """object.__getattribute__: what the trace wrote on it, its __dict__ and __class__, then the class."""
        pending = tx.output.side_effects.pending_attr(self, name)
        if pending is not None:
            return pending
        if name == "__class__":
            return self.cls_var
        if name == "__dict__" and self.cls.__dictoffset__:  # the attributes written so far, but slots (a snapshot)
            names = [n for n in self.attribute_names(tx) if not is_slot(self.cls, n)]
            pending_attr = tx.output.side_effects.pending_attr
            return DictVariable({n: pending_attr(self, n) for n in names}, None, dict, read_only=True)
        found, attr = lookup_class_attr(self.cls, name)
        if (not found and not self.cls.__dictoffset__) or is_slot(self.cls, name):  # no __dict__, or a slot unset
            raise_observed(AttributeError(f"{self.cls.__name__!r} object has no attribute {name!r}"), _MISSING)
        if not found:
            unsupported(f"{self.cls.__name__}.{name} on an object made in the trace", BreakCode.MISSING_ATTR)
        return class_attribute(tx, self, attr, self.class_source(name))

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        method = python_class_method(tx, self, "__call__")  # an nn.Module made in the trace, a callable record
        if method is None:
            unsupported(f"calling a {self.cls.__name__} made in the trace", BreakCode.CALL)
        return method.call(tx, list(args), kwargs)

    def attribute_names(self, tx: Tracer) -> list[str]:
        return [name for name in tx.output.side_effects.attribute_names(self)]

    def children(self) -> list[Variable]:
        return [self.base_part] if self.base_part is not None else []

    def rebuild(self, cg: Emitter) -> None:  # its attributes are set by the side-effect replay
        if self.dropped:
            raise AssertionError(
                f"a {self.cls.__name__} made in the trace was found unreachable, yet is rebuilt "
                f"(a Variable holding it does not list it in children())"
            )
        cg.emit("PUSH_NULL")
        cg.emit_const(self.cls.__new__)  # object's, dict's, list's or set's: none runs __init__
        cg.load(self.cls_var)
        if self.set_part is not None and self.set_part.py_type is frozenset:  # frozenset.__new__(cls, items)
            cg.load(self.set_part)
        cg.call(2 if self.set_part is not None and self.set_part.py_type is frozenset else 1)
        if self.set_part is not None and self.set_part.py_type is set:  # set.update(obj, items): set's own
            _fill_with_base_method(cg, set.update, self.set_part)
        if self.list_part is not None:  # list.extend(obj, items): list's own, as the trace already ran the class's
            _fill_with_base_method(cg, list.extend, self.list_part)
        if self.dict_part is None:
            return
        # its items, set as the base dict type sets them (the class's own __setitem__ ran during the trace)
        setitem = next(
            vars(k)["__setitem__"] for k in self.cls.__mro__ if not k.__flags__ & HEAPTYPE and "__setitem__" in vars(k)
        )
        for key, value in self.dict_part.items.items():
            cg.emit("COPY", 1)
            cg.emit("PUSH_NULL")
            cg.emit("SWAP", 2)
            cg.emit_const(setitem)
            cg.emit("SWAP", 2)
            cg.load(key_variable(key))
            cg.load(value)
            cg.call(3)
            cg.emit("POP_TOP")

    def class_source(self, name: str) -> AttrSource | None:
        # (a class made in the trace has no source: what it holds was made there, nothing to guard)
        return AttrSource(self.cls_var.source, name) if self.cls_var.source is not None else None

    def class_var(self, tx: Tracer) -> Variable:
        return self.cls_var

    def __repr__(self) -> str:
        return f"NewObjectVariable({self.cls.__name__})"


_MISSING = BreakCode.MISSING_ATTR


def is_slot(cls: type, name: str) -> bool:
    """Whether `name` of a `cls` instance is one of its classes' __slots__ (found first as a member descriptor)."""
    attr = lookup_class_attr(cls, name)[1]
    return isinstance(attr, types.MemberDescriptorType) and attr.__objclass__ in cls.__mro__


def _new_set_part(cls: type) -> SetVariable | None:
    if issubclass(cls, (set, frozenset)):
        return SetVariable([], None, frozenset if issubclass(cls, frozenset) else set)
    return None


class EnvironVariable(Variable):
    """os.environ: reading a variable is a query of global state, folded to its answer and guarded on it (the
    entry holds only while os.environ.get(name) still answers the same)."""

    answers_contains = True

    def __init__(self, source: Any) -> None:
        self.source = source

    def python_type(self) -> type:
        return type(os.environ)

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        if name in ("get", "__getitem__", "__contains__"):
            return BoundMethod(self, name)
        unsupported(f"os.environ.{name}", BreakCode.GETATTR)

    def call_method(self, tx: Tracer, name: str, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name not in ("get", "__getitem__", "__contains__") or kwargs or not args[0].is_python_constant():
            unsupported(f"os.environ.{name} with these arguments", BreakCode.CALL)
        key = args[0].as_python_constant()
        value = os.environ.get(key)
        tx.output.guards.add_query(os.environ.get, (key,), value)
        if name == "__contains__":
            return ConstantVariable(value is not None)
        if value is not None:
            return ConstantVariable(value)
        if name == "get":
            return args[1] if len(args) > 1 else ConstantVariable(None)
        raise_observed(KeyError(key), BreakCode.DICT_KEY)


def _fill_with_base_method(cg: Emitter, method: Any, items: Variable) -> None:
    """`method(obj, items)` (a base type's own, unbound) on the object at the top of the stack, which stays there."""
    cg.emit("COPY", 1)
    cg.emit("PUSH_NULL")
    cg.emit("SWAP", 2)
    cg.emit_const(method)
    cg.emit("SWAP", 2)
    cg.load(items)
    cg.call(2)
    cg.emit("POP_TOP")

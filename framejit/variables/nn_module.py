"""nn.Modules during tracing: forward is inlined, parameters and buffers become graph inputs."""

from __future__ import annotations

import inspect
import types
from typing import Any, Sequence

import torch
from torch import nn

from framejit.contracts import MODULE_HOOK_DICTS, GuardKind, Tracer
from framejit.exc import BreakCode, unsupported
from framejit.sources import AttrSource, ConstSource, ItemSource, ModuleGlobalsSource
from framejit.variables.base import Variable, lookup_class_attr
from framejit.variables.constant import ConstantVariable
from framejit.variables.containers import BoundMethod, IteratorVariable, TupleVariable
from framejit.variables.mappings import DictVariable
from framejit.variables.user_object import bound_class_attribute


_LISTING_METHODS = frozenset(
    {
        "children",
        "parameters",
        "named_parameters",
        "buffers",
        "named_children",
        "named_buffers",
        "modules",
        "named_modules",
    }
)
# per-hook options of forward (pre-)hooks: which take kwargs (traced), which always run (not traced: they run
# even when forward raises)
_ALWAYS_CALLED = "_forward_hooks_always_called"
_FORWARD_HOOK_OPTIONS = ("_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs", _ALWAYS_CALLED)


_GLOBAL_HOOK_DICTS = (
    "_global_forward_hooks",
    "_global_forward_pre_hooks",
    "_global_backward_hooks",
    "_global_backward_pre_hooks",
)


def _is_none(value: Variable) -> bool:
    return isinstance(value, ConstantVariable) and value.value is None


def is_stateless(module: nn.Module) -> bool:
    """No parameters, buffers or children (a loss, an activation, often made anew in every forward): guarded by
    its type and the attributes the trace reads, so that a fresh instance reuses the graph."""
    return not (
        module._modules or any(v is not None for v in (*module._parameters.values(), *module._buffers.values()))
    )


class NNModuleVariable(Variable):
    def __init__(self, module: nn.Module, source: Any) -> None:
        self.module = module
        self.source = source

    def python_type(self) -> type:
        return type(self.module)

    def is_python_constant(self) -> bool:
        return False

    def truth(self, tx: Tracer) -> bool:
        """A module is true, unless its class defines a length (containers: their guarded child count)."""
        cls = type(self.module)
        if lookup_class_attr(cls, "__bool__")[0] is not None:
            unsupported(f"bool() of a {cls.__name__} (it defines __bool__)", BreakCode.TRUTH)
        if lookup_class_attr(cls, "__len__")[0] is None:
            return True
        return bool(self.call_method(tx, "__len__", [], {}).as_python_constant())

    def _attr_source(self, name: str) -> Any:
        return AttrSource(self.source, name) if self.source is not None else None

    def _child(self, tx: Tracer, dict_name: str, key: str) -> Variable:
        value = getattr(self.module, dict_name)[key]
        return tx.wrap(value, ItemSource(self._attr_source(dict_name), key) if self.source is not None else None)

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        pending = tx.output.side_effects.pending_attr(self, name)
        if pending is not None:
            return pending
        mod = self.module
        inst = mod.__dict__
        if name in _LISTING_METHODS and getattr(type(mod), name) is getattr(nn.Module, name):
            return BoundMethod(self, name)
        # Python's order: a data descriptor of the class (a property), the instance dict, any other class
        # attribute (a method named like a submodule wins), then nn.Module.__getattr__'s parameters, buffers and
        # submodules
        klass, attr = lookup_class_attr(type(mod), name)
        data_descriptor = klass is not None and (hasattr(type(attr), "__set__") or hasattr(type(attr), "__delete__"))
        if name in inst and not data_descriptor:
            return self._wrap_attr(tx, name, inst[name])
        if klass is None:
            for dict_name in ("_parameters", "_buffers", "_modules"):
                if name in inst.get(dict_name, ()):
                    return self._child(tx, dict_name, name)
            unsupported(f"{type(mod).__name__} has no attribute {name!r}", BreakCode.MISSING_ATTR)
        # the module is guarded by identity (or type, when stateless): its class's methods need no guard
        bound = bound_class_attribute(tx, self, attr, None)
        return bound if bound is not None else self._wrap_attr(tx, name, getattr(mod, name))

    def guard_missing_attr(self, tx: Tracer, name: str) -> None:
        """Guarded where var_getattr looked (the instance dict, the parameter, buffer and submodule dicts, each
        class's dict): a few C checks, where hasattr() would run nn.Module.__getattr__ to raise. A class with a
        lookup of its own is guarded by hasattr()."""
        cls = type(self.module)
        if (
            self.source is None
            or lookup_class_attr(cls, "__getattr__")[1] is not nn.Module.__getattr__
            or lookup_class_attr(cls, "__getattribute__")[1] is not object.__getattribute__
        ):
            super().guard_missing_attr(tx, name)
            return
        for dict_name in ("__dict__", "_parameters", "_buffers", "_modules"):
            tx.output.guards.add(self._attr_source(dict_name), GuardKind.NO_KEY, name)
        for klass in cls.__mro__:
            tx.output.guards.add(AttrSource(ConstSource(klass), "__dict__"), GuardKind.NO_KEY, name)

    def _wrap_attr(self, tx: Tracer, name: str, value: Any) -> Variable:
        source = self._attr_source(name)
        if type(value) is int:  # a module's int stays static where ints vary (dynamic=True), as in TorchDynamo,
            if source is not None:  # until it changes between compiles (a step counter the module keeps)
                symbolic = tx.output.add_int_input(source, value, automatic_only=True)
                if symbolic is not None:
                    return symbolic
                tx.output.guards.add(source, GuardKind.EQUALS, value)
            return ConstantVariable(value, source)
        return tx.wrap(value, source)

    def _check_hooks(self, tx: Tracer) -> tuple[list[tuple[Variable, bool]], list[tuple[Variable, bool]]]:
        """The module's forward pre-hooks and forward hooks, each with whether it takes the keyword arguments, to
        trace around its forward; other hooks (backward ones, `always_call` ones, which run even when forward
        raises) are not traced: the call runs as Python. Hooks registered after compiling are guarded: global ones
        by their dicts' keys, a module's own by one NO_HOOKS check per module called (a few attribute loads;
        TorchDynamo by default does not guard these), which also checks that no `forward` was set on the instance
        since, and its forward (pre-)hooks by the keys of their dicts (each hook then by its code, as any function
        read)."""
        module_dicts = vars(nn.modules.module)
        for name in _GLOBAL_HOOK_DICTS:
            tx.output.guards.add(
                ItemSource(ModuleGlobalsSource(nn.modules.module.__name__), name),
                GuardKind.DICT_KEYS,
                module_dicts[name],
            )
        mod = self.module
        traced = ("_forward_pre_hooks", "_forward_hooks")
        plain = (
            any(getattr(mod, d, None) for d in traced)
            and self.source is not None
            and not any(getattr(mod, d, None) for d in (*MODULE_HOOK_DICTS[2:], _ALWAYS_CALLED))
        )
        checked = MODULE_HOOK_DICTS[2:] if plain else MODULE_HOOK_DICTS
        global_hooks = [n.removeprefix("_global_") for n in _GLOBAL_HOOK_DICTS if module_dicts[n]]
        if global_hooks:
            unsupported(
                f"calling module {type(mod).__name__} while global module hooks are registered "
                f"({', '.join(global_hooks)}: register_module_* hooks, which framejit does not trace)",
                BreakCode.MODULE_HOOKS,
            )
        if any(getattr(mod, d, None) for d in checked):
            unsupported(f"module {type(mod).__name__} has hooks", BreakCode.MODULE_HOOKS)
        if self.source is not None and all(hasattr(mod, d) for d in MODULE_HOOK_DICTS):
            tx.output.guards.add(self.source, GuardKind.NO_HOOKS, (checked, "forward" not in vars(mod)))
        if not plain:
            return [], []
        for name in (*traced, *_FORWARD_HOOK_OPTIONS):  # which hooks, and which take kwargs
            tx.output.guards.add(AttrSource(self.source, name), GuardKind.DICT_KEYS, getattr(mod, name))
        pre, post = (
            [
                (tx.wrap(hook, ItemSource(AttrSource(self.source, d), key)), key in getattr(mod, kw))
                for key, hook in getattr(mod, d).items()
            ]
            for d, kw in zip(traced, ("_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs"))
        )
        return pre, post

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        pre_hooks, hooks = self._check_hooks(tx)
        for hook, with_kwargs in pre_hooks:  # as nn.Module._call_impl runs them, before forward
            if with_kwargs:  # hook(module, args, kwargs): None, or (new args, new kwargs)
                replaced = hook.call(tx, [self, TupleVariable(list(args)), DictVariable(kwargs)], {})
                if not _is_none(replaced):
                    pair = replaced.unpack(tx) if issubclass(replaced.python_type(), tuple) else []
                    if (
                        len(pair) != 2
                        or not isinstance(pair[1], DictVariable)
                        or not all(isinstance(k, str) for k in pair[1].items)
                    ):
                        unsupported(
                            "a forward pre-hook with kwargs returned other than (args, kwargs) (eager raises)",
                            BreakCode.MODULE_HOOKS,
                        )
                    args, kwargs = pair[0].unpack(tx), dict(pair[1].items)
            else:  # hook(module, args): None, or new args (one value or a tuple)
                replaced = hook.call(tx, [self, TupleVariable(list(args))], {})
                if not _is_none(replaced):
                    args = replaced.unpack(tx) if issubclass(replaced.python_type(), tuple) else [replaced]
        result = self._call_forward(tx, args, kwargs)
        for hook, with_kwargs in hooks:  # hook(module, args, [kwargs,] output): a non-None result replaces output
            extra = [DictVariable(kwargs)] if with_kwargs else []
            replaced = hook.call(tx, [self, TupleVariable(list(args)), *extra, result], {})
            if not _is_none(replaced):
                result = replaced
        return result

    def _call_forward(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        from framejit.variables.callables import UserFunctionVariable

        if "forward" in self.module.__dict__:
            return self.var_getattr(tx, "forward").call(tx, args, kwargs)
        forward = type(self.module).forward
        if forward is nn.Module.forward:
            unsupported(f"{type(self.module).__name__} has no forward()", BreakCode.MODULE_CALL)
        if isinstance(self.module, nn.Sequential) and forward is nn.Sequential.forward and not kwargs:
            (value,) = args
            for child in self.child_modules(tx):
                value = child.call(tx, [value], {})
            return value
        if not isinstance(forward, types.FunctionType):
            unsupported(f"{type(self.module).__name__}.forward is not a Python function", BreakCode.MODULE_CALL)
        if isinstance(lookup_class_attr(type(self.module), "forward")[1], staticmethod):  # called without self
            return UserFunctionVariable(forward).call(tx, args, kwargs)
        return UserFunctionVariable(forward).call(tx, [self, *args], kwargs)

    def child_modules(self, tx: Tracer) -> list[Variable]:
        tx.output.guards.add(AttrSource(self.source, "_modules"), GuardKind.DICT_KEYS, self.module._modules)
        return [self._child(tx, "_modules", k) for k in self.module._modules]

    def submodules(self, tx: Tracer) -> list[tuple[str, NNModuleVariable]]:
        """(qualified name, module) for this module and every module below it, each once, in the order of
        `nn.Module.named_modules()`; guarded on the keys of every `_modules` dict walked."""
        seen: set[int] = set()
        out: list[tuple[str, NNModuleVariable]] = []

        def walk(var: NNModuleVariable, prefix: str) -> None:
            if id(var.module) in seen:
                return
            seen.add(id(var.module))
            out.append((prefix, var))
            for key, child in zip(var.module._modules, var.child_modules(tx)):
                if isinstance(child, NNModuleVariable):  # a None child is skipped, as by named_modules()
                    walk(child, f"{prefix}.{key}" if prefix else key)

        walk(self, "")
        return out

    def unpack(self, tx: Tracer) -> list[Variable]:
        if isinstance(self.module, (nn.Sequential, nn.ModuleList)):
            return self.child_modules(tx)
        if isinstance(self.module, nn.ModuleDict):
            return [ConstantVariable(k) for k in self.module._modules]
        if isinstance(self.module, (nn.ParameterList,)):
            return [self._child(tx, "_parameters", k) for k in self.module._parameters]
        unsupported(f"iterating over {type(self.module).__name__}", BreakCode.ITER)

    def getitem(self, tx: Tracer, key: Variable) -> Variable:
        k = key.as_python_constant()
        mod = self.module
        if isinstance(mod, nn.ModuleDict):
            return self._child(tx, "_modules", k)
        if isinstance(mod, (nn.Sequential, nn.ModuleList)):
            keys = list(mod._modules)
            if isinstance(k, slice):
                if isinstance(mod, nn.Sequential):
                    unsupported("slicing an nn.Sequential (builds a new module)", BreakCode.MODULE_CALL)
                return TupleVariable([self._child(tx, "_modules", n) for n in keys[k]])
            return self._child(tx, "_modules", keys[k])
        if isinstance(mod, nn.ParameterList):
            return self._child(tx, "_parameters", list(mod._parameters)[k])
        unsupported(f"indexing {type(mod).__name__}", BreakCode.GETITEM)

    def call_method(self, tx: Tracer, name: str, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        mod = self.module
        if name == "__len__" and isinstance(mod, (nn.Sequential, nn.ModuleList, nn.ModuleDict, nn.ParameterList)):
            return ConstantVariable(len(mod))
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "__contains__" and isinstance(mod, nn.ModuleDict):
            return ConstantVariable(args[0].as_python_constant() in mod._modules)
        if isinstance(mod, nn.ModuleDict) and name in ("keys", "values", "items"):
            keys = list(mod._modules)
            if name == "keys":
                return TupleVariable([ConstantVariable(k) for k in keys])
            children = [self._child(tx, "_modules", k) for k in keys]
            if name == "values":
                return TupleVariable(children)
            return TupleVariable([TupleVariable([ConstantVariable(k), c]) for k, c in zip(keys, children)])
        if name in _LISTING_METHODS:  # generators in Python: next(self.parameters()) is common
            return IteratorVariable(self._module_listing(tx, name, args, kwargs))
        if name in (
            "register_buffer",
            "register_parameter",
            "add_module",
            "apply",
            "to",
            "cuda",
            "cpu",
            "train",
            "eval",
            "requires_grad_",
            "zero_grad",
        ):
            unsupported(f"nn.Module.{name}() changes the module inside a compiled region", BreakCode.MODULE_MUTATION)
        return self.var_getattr(tx, name).call(tx, args, kwargs)

    def _module_listing(
        self, tx: Tracer, name: str, args: Sequence[Variable], kwargs: dict[str, Variable]
    ) -> list[Variable]:
        """What children(), parameters(), named_modules()... yield, as nn.Module yields it (each module and
        each parameter or buffer once)."""

        def named(pairs: Any) -> list[Variable]:
            return (
                [TupleVariable([ConstantVariable(k), v]) for k, v in pairs]
                if name.startswith("named")
                else [v for _, v in pairs]
            )

        if name in ("children", "named_children", "modules", "named_modules"):
            if args or kwargs:
                unsupported(f"nn.Module.{name}() with arguments", BreakCode.MODULE_CALL)
            if name in ("children", "named_children"):
                return named(zip(self.module._modules, self.child_modules(tx)))
            return named(self.submodules(tx))
        # parameters(recurse=True), named_parameters(prefix="", recurse=True, remove_duplicate=True), buffers...
        if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            unsupported(f"nn.Module.{name}() with arguments known only at run time", BreakCode.MODULE_CALL)
        options = (
            inspect.signature(getattr(nn.Module, name))
            .bind(
                self.module,
                *[a.as_python_constant() for a in args],
                **{k: v.as_python_constant() for k, v in kwargs.items()},
            )
            .arguments
        )
        start = options.get("prefix", "")
        dict_name = "_parameters" if "parameters" in name else "_buffers"
        owners = self.submodules(tx) if options.get("recurse", True) else [("", self)]
        seen: set[int] = set()
        found = []
        for prefix, owner in owners:
            if owner.source is not None:  # another module of the type may hold other names
                tx.output.guards.add(
                    AttrSource(owner.source, dict_name), GuardKind.DICT_KEYS, getattr(owner.module, dict_name)
                )
            for key, value in getattr(owner.module, dict_name).items():
                if value is None or (options.get("remove_duplicate", True) and id(value) in seen):
                    continue  # a tied weight is listed once
                seen.add(id(value))
                path = ".".join(p for p in (start, prefix, key) if p)
                found.append((path, owner._child(tx, dict_name, key)))
        return named(found)

    def __repr__(self) -> str:
        return f"NNModuleVariable({type(self.module).__name__})"


def is_torch_nn_class(cls: type) -> bool:
    """A module class of torch.nn itself, whose constructor only sets its own attributes."""
    return issubclass(cls, nn.Module) and cls.__module__.startswith("torch.nn.")


class NewModuleVariable(NNModuleVariable):
    """A torch.nn module without parameters, buffers or children made in the trace from constants
    (`loss_fct = CrossEntropyLoss()` in a forward): made now, at trace time, since its constructor only sets its own
    attributes; what is read from it is a constant. If it outlives the graph it is made again after the graph
    with the same arguments, so each call gets a fresh one, as in eager."""

    rebuilt_once = True

    def __init__(self, module: nn.Module, args: tuple, kwargs: dict[str, Any]) -> None:
        super().__init__(module, None)
        self.args, self.kwargs = args, kwargs

    @classmethod
    def make(cls, module_class: type, args: Sequence[Variable], kwargs: dict[str, Variable]) -> "NewModuleVariable":
        if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            unsupported(
                f"{module_class.__name__}() made in the trace from values known only at run time",
                BreakCode.MODULE_MUTATION,
            )
        values = tuple(a.as_python_constant() for a in args)
        named = {k: v.as_python_constant() for k, v in kwargs.items()}
        with torch.random.fork_rng(devices=[]):  # one with parameters would draw them: leave no trace of it
            module = module_class(*values, **named)
        if not is_stateless(module):
            unsupported(
                f"{module_class.__name__}() made in the trace has parameters or buffers (new ones each call)",
                BreakCode.MODULE_MUTATION,
            )
        return cls(module, values, named)

    def rebuild(self, cg: Any) -> None:
        cg.emit("PUSH_NULL")
        cg.emit_const(type(self.module))
        for value in (*self.args, *self.kwargs.values()):
            cg.emit_const(value)
        cg.call(len(self.args) + len(self.kwargs), tuple(self.kwargs))

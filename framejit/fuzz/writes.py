"""Which arguments of a generated program may be written in place: a conservative static analysis of the whole
module's source, used to pass an expanded tensor (stride 0, whose elements share memory) only to an argument
nothing ever writes, since writing one raises or writes every element that shares the memory.
"""

from __future__ import annotations

import ast
import builtins
from typing import Iterable

import torch

# methods and torch functions whose result may be (a view of) their tensor operand, or the operand itself
_VIEWS = frozenset(
    """view view_as reshape reshape_as flatten unflatten transpose t permute unsqueeze squeeze expand
expand_as detach contiguous to float double half bfloat16 long int bool type type_as narrow select unbind split
chunk movedim moveaxis swapaxes swapdims as_strided diagonal real imag values items keys get pop setdefault copy
unfold view_as_real view_as_complex broadcast_to broadcast_tensors atleast_1d atleast_2d atleast_3d squeeze_copy
__getitem__ requires_grad_ align_as refine_names rename""".split()
)
# builtins whose result holds their arguments (or elements of them)
_PASS_THROUGH = frozenset(
    "list tuple sorted reversed enumerate zip sum min max getattr iter next dict filter map set frozenset vars".split()
)
# attributes that never hold a tensor of the program's arguments
_PLAIN_ATTRS = frozenset(
    "shape dtype ndim device requires_grad is_leaf grad_fn n hits flag calls scale training is_cuda layout".split()
)
# container methods that store their arguments in the receiver
_STORES = frozenset("append insert extend update setdefault add".split())


def _is_inplace_name(name: str) -> bool:
    return name.endswith("_") and not name.endswith("__") and name != "requires_grad_"


def _dotted(node: ast.AST) -> str | None:
    """`a`, `a.b`, `a.b.c` for names and attribute chains, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _tensor_method(name: str) -> bool:
    return hasattr(torch.Tensor, name)


def _is_torch(node: ast.AST) -> bool:
    """Whether a callee is under `torch.` (torch.relu_, torch.nn.functional.relu)."""
    name = _dotted(node)
    return bool(name) and name.split(".")[0] == "torch"


class _Analysis:
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.functions: dict[str, list[list[str]]] = {}  # name -> parameter lists of defs and lambdas so named
        self.all_params: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.Lambda)):
                params = [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]
                params += [a.arg for a in (node.args.vararg, node.args.kwarg) if a is not None]
                params = [p for p in params if p != "self"]  # a method's instance is not one of the arguments
                self.all_params.update(params)
                if isinstance(node, ast.FunctionDef):
                    self.functions.setdefault(node.name, []).append(params)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.functions.setdefault(target.id, []).append([a.arg for a in node.value.args.args])
        self.returns = [n.value for n in ast.walk(tree) if isinstance(n, ast.Return) and n.value is not None]
        self.returns += [n.body for n in ast.walk(tree) if isinstance(n, ast.Lambda)]

    # -- may a value alias the root? --------------------------------------------------------------------------
    def alias(self, node: ast.AST | None, names: set[str]) -> bool:
        if node is None:
            return False
        if isinstance(node, ast.Name):
            return node.id in names
        if isinstance(node, ast.Attribute):
            if node.attr in _PLAIN_ATTRS:
                return False
            return _dotted(node) in names or self.alias(node.value, names)
        if isinstance(node, (ast.Subscript, ast.Starred)):
            return self.alias(node.value, names)
        if isinstance(node, ast.NamedExpr):
            return self.alias(node.value, names)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return any(self.alias(e, names) for e in node.elts)
        if isinstance(node, ast.Dict):
            return any(self.alias(v, names) for v in node.values)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            return self.alias(node.elt, names)
        if isinstance(node, ast.DictComp):
            return self.alias(node.value, names)
        if isinstance(node, ast.IfExp):
            return self.alias(node.body, names) or self.alias(node.orelse, names)
        if isinstance(node, ast.BoolOp):
            return any(self.alias(v, names) for v in node.values)
        if isinstance(node, ast.BinOp):  # tensor arithmetic makes a new tensor; list concatenation keeps items
            displays = (ast.List, ast.Tuple, ast.ListComp)
            return any(isinstance(s, displays) for s in (node.left, node.right)) and (
                self.alias(node.left, names) or self.alias(node.right, names)
            )
        if isinstance(node, ast.Call):
            return self._call_aliases(node, names)
        return False

    def _args(self, call: ast.Call) -> list[ast.AST]:
        return list(call.args) + [k.value for k in call.keywords]

    def _call_aliases(self, call: ast.Call, names: set[str]) -> bool:
        func = call.func
        args_alias = any(self.alias(a, names) for a in self._args(call))
        if isinstance(func, ast.Attribute) and not _is_torch(func):  # a method of a value
            if func.attr in _VIEWS or _is_inplace_name(func.attr):
                return self.alias(func.value, names) or (func.attr in ("get", "pop", "setdefault") and args_alias)
            if _tensor_method(func.attr):
                return False  # a tensor method that makes a new tensor or a number
            return args_alias or self.alias(func.value, names)  # a user object's: may return what it is given
        if _is_torch(func):
            last = _dotted(func).rsplit(".", 1)[-1]
            return (last in _VIEWS or _is_inplace_name(last)) and args_alias
        if (
            isinstance(func, ast.Name)
            and func.id == "getattr"
            and len(call.args) >= 2
            and isinstance(call.args[1], ast.Constant)
            and _dotted(call.args[0])
        ):
            return args_alias or f"{_dotted(call.args[0])}.{call.args[1].value}" in names  # as `o.name`
        if isinstance(func, ast.Name) and func.id in _PASS_THROUGH:
            return args_alias
        if isinstance(func, ast.Name) and hasattr(builtins, func.id):
            return False  # float, int, len, bool, round, print, isinstance, range, abs ...
        # anything else (helpers, closures, modules, factories): it may return what it is given or what it holds
        return args_alias or self.alias(func, names) or any(self.alias(r, names) for r in self.returns)

    # -- bindings ---------------------------------------------------------------------------------------------
    def _bind_targets(self, target: ast.AST, names: set[str]) -> None:
        """A target assigned an alias: names become aliases; an item or attribute store makes its base hold one."""
        if isinstance(target, ast.Name):
            names.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for e in target.elts:
                self._bind_targets(e, names)
        elif isinstance(target, ast.Starred):
            self._bind_targets(target.value, names)
        elif isinstance(target, ast.Attribute):
            dotted = _dotted(target)
            if dotted:
                names.add(dotted)
            else:
                self._bind_targets(target.value, names)
        elif isinstance(target, ast.Subscript):
            base = _dotted(target.value)
            if base:
                names.add(base)
            else:
                self._bind_targets(target.value, names)

    def _bind_params(self, call: ast.Call, names: set[str]) -> None:
        if not any(self.alias(a, names) for a in self._args(call)):
            return
        func = call.func
        if isinstance(func, ast.Name) and func.id in self.functions:
            for params in self.functions[func.id]:
                names.update(params)
        elif isinstance(func, ast.Name) and hasattr(builtins, func.id) or _is_torch(func):
            return
        elif isinstance(func, ast.Attribute) and (
            func.attr in _VIEWS or func.attr in _STORES or _tensor_method(func.attr)
        ):
            return
        else:  # a callee not known by name (a module, a closure a factory made): any function may run
            names.update(self.all_params)

    def step(self, names: set[str]) -> None:
        """One pass over the module binding whatever an alias flows into."""
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign) and self.alias(node.value, names):
                for target in node.targets:
                    self._bind_targets(target, names)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and self.alias(node.value, names):
                self._bind_targets(node.target, names)
            elif isinstance(node, ast.NamedExpr) and self.alias(node.value, names):
                self._bind_targets(node.target, names)
            elif isinstance(node, (ast.For, ast.comprehension)) and self.alias(node.iter, names):
                self._bind_targets(node.target, names)
            elif (
                isinstance(node, ast.withitem)
                and node.optional_vars is not None
                and self.alias(node.context_expr, names)
            ):
                self._bind_targets(node.optional_vars, names)
            elif isinstance(node, ast.Call):
                self._bind_params(node, names)
                func = node.func
                if (
                    isinstance(func, ast.Attribute)
                    and func.attr in _STORES
                    and any(self.alias(a, names) for a in self._args(node))
                ):
                    self._bind_targets(ast.Subscript(value=func.value, slice=ast.Constant(0)), names)
                if (
                    isinstance(func, ast.Name)
                    and func.id == "setattr"
                    and len(node.args) == 3
                    and self.alias(node.args[2], names)
                ):
                    self._bind_targets(ast.Subscript(value=node.args[0], slice=ast.Constant(0)), names)

    # -- writes -----------------------------------------------------------------------------------------------
    def writes(self, names: set[str]) -> bool:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call):
                func = node.func
                if (
                    isinstance(func, ast.Attribute)
                    and not _is_torch(func)
                    and _is_inplace_name(func.attr)
                    and self.alias(func.value, names)
                ):
                    return True
                if (
                    _is_torch(func)
                    and _is_inplace_name(_dotted(func).rsplit(".", 1)[-1])
                    and node.args
                    and self.alias(node.args[0], names)
                ):
                    return True
                for k in node.keywords:
                    if k.arg == "out" and self.alias(k.value, names):
                        return True
                    if (
                        k.arg == "inplace"
                        and not (isinstance(k.value, ast.Constant) and not k.value.value)
                        and any(self.alias(a, names) for a in node.args)
                    ):
                        return True
            elif isinstance(node, ast.Assign):
                if any(isinstance(t, ast.Subscript) and self.alias(t.value, names) for t in _flat(node.targets)):
                    return True
            elif isinstance(node, ast.AugAssign):
                t = node.target
                if isinstance(t, ast.Name) and t.id in names:
                    return True
                if isinstance(t, ast.Subscript) and self.alias(t.value, names):
                    return True
                if isinstance(t, ast.Attribute) and t.attr not in _PLAIN_ATTRS and self.alias(t, names):
                    return True
        return False


def _flat(targets: Iterable[ast.AST]) -> Iterable[ast.AST]:
    for t in targets:
        if isinstance(t, (ast.Tuple, ast.List)):
            yield from _flat(t.elts)
        elif isinstance(t, ast.Starred):
            yield from _flat([t.value])
        else:
            yield t


def written_arguments(source: str, function: str = "program") -> set[str]:
    """The parameters of `function` in the module `source` whose tensors (or tensors they hold: list elements,
    dict values, attributes) may be written in place by any code of the module, under the rules above."""
    tree = ast.parse(source)
    analysis = _Analysis(tree)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function), None)
    if fn is None:
        return set()
    written = set()
    for arg in fn.args.args:
        names = {arg.arg}
        while True:  # a fixed point: bindings only add names
            before = len(names)
            analysis.step(names)
            if len(names) == before:
                break
        if analysis.writes(names):
            written.add(arg.arg)
    return written

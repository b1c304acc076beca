"""itertools and functools helpers, and the builtins that take an iterable whole (sorted, min, max, all, any),
over values the trace holds: they produce their items (or fold them) now.
"""

from __future__ import annotations

import functools
import itertools
import operator
from typing import Any, Callable

import torch

from framejit.contracts import Emitter, Tracer
from framejit.exc import BreakCode, unsupported
from framejit.variables.base import Variable
from framejit.variables.constant import ConstantVariable
from framejit.variables.containers import IteratorVariable, ListVariable, TupleVariable
from framejit.variables.symbolic import SymbolicVariable
from framejit.variables.tensor import TensorVariable


def container_items(tx: Tracer, value: Variable, what: str) -> list[Variable]:
    """The items a lazy itertools iterator takes from `value`, taken now: only from a container (an iterator would
    be advanced further than Python advances it)."""
    if isinstance(value, IteratorVariable):
        unsupported(f"{what} over an iterator (it would be advanced further than Python advances it)", BreakCode.ITER)
    return value.unpack(tx)


def _chain(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    return IteratorVariable([item for arg in args for item in container_items(tx, arg, "itertools.chain")])


def _chain_from_iterable(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    return _chain(tx, container_items(tx, args[0], "itertools.chain.from_iterable"), kwargs)


def _repeat(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    """itertools.repeat(x, n): the one object n times (`tuple(repeat(k, 2))` makes torch.nn's pairs)."""
    times = args[1] if len(args) > 1 else kwargs.get("times")
    if times is None:
        unsupported("itertools.repeat without a count (endless)", BreakCode.ITER)
    return IteratorVariable([args[0]] * times.as_python_constant())


def _islice(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    bounds = [a.as_python_constant() for a in args[1:]]
    if not all(b is None or type(b) is int and b >= 0 for b in bounds) or bounds[2:3] == [0]:
        unsupported("itertools.islice with bounds it refuses (ValueError)", BreakCode.ITER)
    span = slice(*bounds)
    if isinstance(args[0], IteratorVariable):
        return IsliceIterator(args[0], span.start or 0, span.stop, span.step or 1)
    return IteratorVariable(args[0].unpack(tx)[span])


class IsliceIterator(IteratorVariable):
    """itertools.islice over an iterator: it advances the iterator only as far as it is itself advanced, item by
    item, as Python's does (the iterator may be read again afterwards). Counts are from the iterator's position when
    the islice was made: `taken` items taken from it so far, the next item returned at index `due`."""

    def __init__(self, inner: IteratorVariable, start: int, stop: int | None, step: int) -> None:
        super().__init__([])
        self.inner, self.due, self.stop, self.step, self.taken = inner, start, stop, step, 0

    def python_type(self) -> type:
        return itertools.islice

    @property
    def items(self) -> list[Variable]:
        """What it would still return, read from the iterator's remaining items without advancing either."""
        if self._exhausted:
            return []
        rest = self.inner.items
        first = self.due - self.taken
        end = len(rest) if self.stop is None else min(len(rest), self.stop - self.taken)
        return rest[first : end : self.step]

    def children(self) -> list[Variable]:
        return [self.inner]

    def unpack(self, tx: Tracer) -> list[Variable]:
        items = []
        while (item := self.next()) is not None:
            items.append(item)
        return items

    def next(self) -> Variable | None:
        while not self._exhausted and self.taken < self.due:  # CPython's islice_next: skip, then take one
            self._take()
        if self._exhausted or self.stop is not None and self.taken >= self.stop:
            self._exhausted = True
            return None
        item = self._take()
        if item is not None:
            self.due = self.due + self.step if self.stop is None else min(self.due + self.step, self.stop)
        return item

    def _take(self) -> Variable | None:
        item = self.inner.next()
        if item is None:
            self._exhausted = True
        else:
            self.taken += 1
        return item

    def rebuild(self, cg: Emitter) -> None:
        """islice(the iterator, as far as this one has gone), so that both go on advancing together."""
        if self._exhausted:
            cg.emit_const(iter(()))
            return
        cg.emit("PUSH_NULL")
        cg.emit_const(itertools.islice)
        cg.load(self.inner)
        for bound in (self.due - self.taken, None if self.stop is None else self.stop - self.taken, self.step):
            cg.emit_const(bound)
        cg.call(4)


class ZipIterator(IteratorVariable):
    """zip() or enumerate() of arguments of which one is an iterator (a generator made in the trace, say): it takes
    one item of each argument, in order, each time it is advanced, as Python's does, so a generator's side effects
    interleave with the consumer's and `zip(it, it)` pairs consecutive items. `count`: enumerate's next index (None
    for zip)."""

    def __init__(self, inners: list[IteratorVariable], count: int | None = None) -> None:
        super().__init__([])
        self.inners, self.count = inners, count
        self.rest: list[Variable] | None = None  # over iterators without effects: the items left, taken at the end

    def _lazy_inside(self) -> bool:
        """Whether an argument is a generator (or a zip of one): advancing it runs its frame."""
        return any(_runs_code(inner) for inner in self.inners)

    def python_type(self) -> type:
        return zip if self.count is None else enumerate

    @property
    def items(self) -> list[Variable]:
        return self.unpack(None)  # (a rebuild or unpack asks: it takes them all)

    def children(self) -> list[Variable]:
        if self._lazy_inside():
            return list(self.inners)
        if self.rest is None:  # taking them now cannot differ: a tuple iterator over them after the graph
            self.rest = self.unpack(None)
        return list(self.rest)

    def unpack(self, tx: Tracer | None) -> list[Variable]:
        if self.rest is not None:
            return list(self.rest)
        items = []
        while (item := self.next()) is not None:
            items.append(item)
        return items

    def next(self) -> Variable | None:
        if self._exhausted:
            return None
        parts = []
        for inner in self.inners:
            item = inner.next()
            if item is None:
                self._exhausted = True
                return None
            parts.append(item)
        if self.count is not None:
            parts.insert(0, ConstantVariable(self.count))
            self.count += 1
        return TupleVariable(parts)

    def rebuild(self, cg: Emitter) -> None:
        """zip(the iterators) or enumerate(the iterator, start=the next index), at their positions; over iterators
        without effects, an iterator over the items left (a continuation's loop can then take it)."""
        if not self._lazy_inside():
            rest = self.children()
            for item in rest:
                cg.load(item)
            cg.emit("BUILD_TUPLE", len(rest))
            cg.emit("GET_ITER")
            return
        if self._exhausted:
            cg.emit_const(iter(()))
            return
        cg.emit("PUSH_NULL")
        cg.emit_const(self.python_type())
        for inner in self.inners:
            cg.load(inner)
        if self.count is not None:
            cg.emit_const(self.count)
        cg.call(len(self.inners) + (self.count is not None))


def _runs_code(iterator: Variable) -> bool:
    """Whether advancing the iterator runs a generator's frame (itself, or one it takes items from)."""
    if isinstance(iterator, ZipIterator):
        return any(_runs_code(inner) for inner in iterator.inners)
    if isinstance(iterator, IsliceIterator):
        return _runs_code(iterator.inner)
    return isinstance(iterator, IteratorVariable) and iterator.from_generator


def lazy_zip(tx: Tracer, args: list[Variable], count: int | None = None) -> IteratorVariable | None:
    """zip(*args) / enumerate(args[0], count) taken item by item when an argument is an iterator; None when none
    is (the items of containers are taken now)."""
    if not any(isinstance(a, IteratorVariable) for a in args):
        return None
    return ZipIterator([a if isinstance(a, IteratorVariable) else IteratorVariable(a.unpack(tx)) for a in args], count)


def without_side_effects(tx: Tracer, what: str, evaluate: Callable[[], Variable]) -> Variable:
    """map(), filter() (and itertools.accumulate, starmap...) are lazy; the trace evaluates them at once, which is only right if the function, and an
    iterator it takes items from (a generator), have no side effects (else they would run for items never taken):
    those run as Python (a graph break)."""
    checkpoint = tx.output.side_effects.checkpoint()
    result = evaluate()
    if tx.output.side_effects.wrote_older_state(checkpoint):
        unsupported(
            f"{what}() whose function or iterator has side effects (it is lazy in Python)", BreakCode.SIDE_EFFECT
        )
    return result


def _reduce(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    fn, items = args[0], args[1].each_item(tx)  # fn called as each item is taken, as Python's does
    value = args[2] if len(args) > 2 else next(items, None)
    if value is None:
        unsupported("functools.reduce of an empty sequence with no initial value (TypeError)", BreakCode.CALL)
    for item in items:
        value = fn.call(tx, [value, item], {})
    return value


def _sorted(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    items = _unpack(tx, args[0])
    key_fn = kwargs.get("key")
    reverse = kwargs["reverse"].as_python_constant() if "reverse" in kwargs else False
    if key_fn is None or key_fn.is_python_constant() and key_fn.as_python_constant() is None:
        keys = [i.as_python_constant() for i in items]
    else:
        keys = [key_fn.call(tx, [i], {}).as_python_constant() for i in items]
    order = sorted(range(len(items)), key=lambda i: keys[i], reverse=reverse)
    return ListVariable([items[i] for i in order])


def _min_max(fn: Callable[..., Any]) -> Callable[..., Variable]:
    def trace_call(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
        key_fn = kwargs.get("key")
        if key_fn is not None and key_fn.is_python_constant() and key_fn.as_python_constant() is None:
            key_fn = None
        items: list[Variable] = []
        keys: list[Variable] = [] if key_fn is not None else items
        for item in args[0].each_item(tx) if len(args) == 1 else args:  # key(item) as each is taken
            items.append(item)
            if key_fn is not None:
                keys.append(key_fn.call(tx, [item], {}))  # the winner is the item itself, not a copy
        symbolic = [isinstance(i, SymbolicVariable) for i in items]
        if (
            keys is items
            and not kwargs
            and len(items) > 1
            and any(getattr(i, "numpy_type", None) is not None for i in items)
        ):
            # a numpy number is the winner itself (eager's type depends on which wins): the comparison is a guard
            return functools.reduce(
                lambda a, b: (
                    b
                    if tx.output.call_graph_op(
                        tx, "call_function", operator.gt if fn is max else operator.lt, [b, a], {}
                    ).truth(tx)
                    else a
                ),
                items,
            )
        if (
            keys is items
            and not kwargs
            and len(items) > 1
            and any(symbolic)
            and all(
                is_symbolic or (i.is_python_constant() and type(i.as_python_constant()) in (int, float))
                for i, is_symbolic in zip(items, symbolic)
            )
        ):
            # sizes that vary (dynamic shapes): torch.sym_max/sym_min keep the result symbolic, with no guard
            op = torch.sym_max if fn is max else torch.sym_min
            return functools.reduce(lambda a, b: tx.output.call_graph_op(tx, "call_function", op, [a, b], {}), items)
        if keys is items and not kwargs and len(items) > 1 and _single_values_alike(items):
            return functools.reduce(lambda a, b: _pick(tx, fn, a, b), items)
        if set(kwargs) - {"key", "default"} or not all(k.is_python_constant() for k in keys):
            if any(isinstance(k, TensorVariable) for k in keys):
                unsupported(
                    f"{fn.__name__}() over tensors compares their values (data-dependent)", BreakCode.DATA_DEPENDENT
                )
            unsupported(f"{fn.__name__}() over non-constants", BreakCode.BUILTIN)
        if not items and "default" in kwargs:
            return kwargs["default"]
        if not items:
            unsupported(f"{fn.__name__}() of an empty sequence (ValueError)", BreakCode.BUILTIN)
        values = [k.as_python_constant() for k in keys]
        return items[fn(range(len(items)), key=values.__getitem__)]

    return trace_call


def _single_values_alike(items: list[Variable]) -> bool:
    """Whether min()/max() of `items` can be a `torch.where` per pair in the graph: tensors of one element, of one
    shape, dtype and device (eager's result is one of them), and Python numbers a floating tensor (or an integer
    one, for ints) holds as they are."""
    tensors = [i.as_fake() for i in items if isinstance(i, TensorVariable)]
    if not tensors or len(tensors) + sum(i.is_python_constant() for i in items) != len(items):
        return False
    first = tensors[0]
    if any(
        t.numel() != 1 or t.shape != first.shape or t.dtype != first.dtype or t.device != first.device for t in tensors
    ):
        return False
    numbers = [type(i.as_python_constant()) for i in items if not isinstance(i, TensorVariable)]
    return all(n is float and first.is_floating_point() or n is int and first.dtype != torch.bool for n in numbers)


def _pick(tx: Tracer, fn: Callable[..., Any], a: Variable, b: Variable) -> Variable:
    """Python's choice between a and b, in the graph: `max(a, b)` is b where b > a, else a (the first of equals,
    whose gradient it gets, as eager's)."""
    if a.is_python_constant() and b.is_python_constant():
        x, y = a.as_python_constant(), b.as_python_constant()
        return b if (y > x if fn is max else y < x) else a
    call = tx.output.call_graph_op
    wins = call(tx, "call_function", operator.gt if fn is max else operator.lt, [b, a], {})
    return call(tx, "call_function", torch.where, [wins, b, a], {})


def _all_any(fn: Callable[..., Any]) -> Callable[..., Variable]:
    def trace_call(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
        return ConstantVariable(fn(i.truth(tx) for i in args[0].each_item(tx)))  # up to the first answer

    return trace_call


def _unpack(tx: Tracer, value: Variable) -> list[Variable]:
    return value.unpack(tx)


RULES: dict[Any, Callable[..., Variable]] = {
    itertools.chain: _chain,
    itertools.chain.from_iterable: _chain_from_iterable,
    itertools.islice: _islice,
    itertools.repeat: _repeat,
    functools.reduce: _reduce,
    sorted: _sorted,
    min: _min_max(min),
    max: _min_max(max),
    all: _all_any(all),
    any: _all_any(any),
}

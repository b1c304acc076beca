"""itertools' C iterators beyond chain/islice/repeat (iteration.py), over values the trace holds: the
combinatoric ones (product, combinations, permutations), which take their inputs whole when made, and the lazy
ones (zip_longest, pairwise, accumulate, starmap, compress, takewhile, dropwhile, filterfalse), whose items are
taken now from containers (never from an iterator, which Python would advance only as far as they are taken).
"""

from __future__ import annotations

import itertools
import operator
from typing import Any, Callable

from framejit.contracts import Tracer
from framejit.exc import BreakCode, unsupported
from framejit.variables.base import Variable
from framejit.variables.constant import ConstantVariable
from framejit.variables.containers import IteratorVariable, TupleVariable
from framejit.variables.iteration import container_items, without_side_effects

# more items than this is a break: the trace would hold (and the code after the graph rebuild) every one
_MAX_ITEMS = 10_000


def _pool(tx: Tracer, value: Variable) -> list[Variable]:
    """An input of a combinatoric iterator: all its items, taken now, as Python's tuple(iterable) takes them."""
    return value.unpack(tx)


def _int_arg(args: list[Variable], kwargs: dict, index: int, name: str, default: Any) -> Any:
    arg = args[index] if len(args) > index else kwargs.get(name)
    return default if arg is None else arg.as_python_constant()


def _tuples(what: str, made: Any) -> IteratorVariable:
    items = list(itertools.islice(made, _MAX_ITEMS + 1))
    if len(items) > _MAX_ITEMS:
        unsupported(f"itertools.{what} of more than {_MAX_ITEMS} items", BreakCode.ITER)
    return IteratorVariable([TupleVariable(list(t)) for t in items])


def _product(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    repeat = kwargs["repeat"].as_python_constant() if "repeat" in kwargs else 1
    return _tuples("product", itertools.product(*[_pool(tx, a) for a in args], repeat=repeat))


def _combinatoric(fn: Callable[..., Any], r_required: bool) -> Callable[..., Variable]:
    def trace_call(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
        pool = _pool(tx, args[0] if args else kwargs["iterable"])
        r = _int_arg(args, kwargs, 1, "r", None)
        if r is None and r_required:
            unsupported(f"itertools.{fn.__name__} without r (TypeError)", BreakCode.BAD_CALL)
        if r is not None and (type(r) is not int or r < 0):
            unsupported(f"itertools.{fn.__name__} with r={r!r} (Python raises)", BreakCode.BAD_CALL)
        return _tuples(fn.__name__, fn(pool, r) if r is not None else fn(pool))

    return trace_call


def _zip_longest(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    fill = kwargs.get("fillvalue", ConstantVariable(None))
    columns = [container_items(tx, a, "itertools.zip_longest") for a in args]
    return IteratorVariable([TupleVariable(list(row)) for row in itertools.zip_longest(*columns, fillvalue=fill)])


def _pairwise(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    items = container_items(tx, args[0], "itertools.pairwise")
    return IteratorVariable([TupleVariable([a, b]) for a, b in zip(items, items[1:])])


def _compress(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    data = container_items(tx, args[0], "itertools.compress")
    selectors = container_items(tx, args[1], "itertools.compress")
    return IteratorVariable([d for d, s in zip(data, selectors) if s.truth(tx)])


def _accumulate(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    from framejit.variables.operators import call_operator

    items = container_items(tx, args[0], "itertools.accumulate")
    fn = args[1] if len(args) > 1 else kwargs.get("func")
    if fn is not None and fn.is_python_constant() and fn.as_python_constant() is None:
        fn = None
    initial = kwargs.get("initial")
    if initial is not None and not (initial.is_python_constant() and initial.as_python_constant() is None):
        items = [initial, *items]

    def evaluate() -> Variable:
        totals: list[Variable] = []
        for item in items:
            if not totals:
                totals.append(item)
            elif fn is None:
                totals.append(call_operator(tx, operator.add, [totals[-1], item]))
            else:
                totals.append(fn.call(tx, [totals[-1], item], {}))
        return IteratorVariable(totals)

    return without_side_effects(tx, "itertools.accumulate", evaluate)


def _starmap(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    fn, items = args[0], container_items(tx, args[1], "itertools.starmap")
    return without_side_effects(
        tx, "itertools.starmap", lambda: IteratorVariable([fn.call(tx, i.unpack(tx), {}) for i in items])
    )


def _predicate_rule(what: str) -> Callable[..., Variable]:
    """takewhile, dropwhile, filterfalse: the predicate asked of each item as Python asks it when all are taken."""

    def trace_call(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
        pred, items = args[0], container_items(tx, args[1], f"itertools.{what}")

        def holds(item: Variable) -> bool:
            if what == "filterfalse" and pred.is_python_constant() and pred.as_python_constant() is None:
                return item.truth(tx)
            return pred.call(tx, [item], {}).truth(tx)

        def evaluate() -> Variable:
            kept: list[Variable] = []
            for i, item in enumerate(items):
                if what == "filterfalse":
                    kept += [] if holds(item) else [item]
                elif not holds(item):  # the first item the predicate refuses ends takewhile, starts dropwhile
                    return IteratorVariable(kept if what == "takewhile" else items[i:])
                elif what == "takewhile":
                    kept.append(item)
            return IteratorVariable(kept)

        return without_side_effects(tx, f"itertools.{what}", evaluate)

    return trace_call


# itertools callables -> how a call of one is traced (joined into builtins.TRACED_BUILTINS)
RULES: dict[Any, Callable[..., Variable]] = {
    itertools.product: _product,
    itertools.combinations: _combinatoric(itertools.combinations, True),
    itertools.combinations_with_replacement: _combinatoric(itertools.combinations_with_replacement, True),
    itertools.permutations: _combinatoric(itertools.permutations, False),
    itertools.zip_longest: _zip_longest,
    itertools.pairwise: _pairwise,
    itertools.compress: _compress,
    itertools.accumulate: _accumulate,
    itertools.starmap: _starmap,
    itertools.takewhile: _predicate_rule("takewhile"),
    itertools.dropwhile: _predicate_rule("dropwhile"),
    itertools.filterfalse: _predicate_rule("filterfalse"),
}

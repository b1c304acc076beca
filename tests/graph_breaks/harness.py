"""The graph-break tests' harness: `differential` (a function compiled with framejit against eager
Python), no internal-error fallbacks, and opaque helpers whose calls are graph breaks.

Every behavioural test is differential: the function compiled with framejit must give
what eager Python gives (values, dtypes, requires_grad, nesting), leave its arguments
and the globals it touches in the same state, raise the same exception, and leave
grad mode as eager does. Graph counts are derived in the comments next to each
assertion from the rule "a frame (or continuation) compiles one graph iff the part
traced before its break, or up to its return, contains a tensor op"."""

from __future__ import annotations

import contextlib
import logging

import torch

import framejit
from framejit.testing import CompileCounter

from tests.helpers import assert_equal, clone


def run_catching(fn, args, kwargs):
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as e:  # noqa: BLE001 (compared with eager's)
        return ("raised", e)


class _InternalErrors(logging.Handler):
    """Collects framejit's 'internal error ... running it as Python' warnings: a fallback that hides a bug."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        message = record.getMessage()
        if "internal error" in message:
            self.messages.append(message)


@contextlib.contextmanager
def no_internal_errors():
    handler = _InternalErrors()
    logger = logging.getLogger("framejit")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
    assert not handler.messages, handler.messages


def differential(fn, *arg_sets, backend=None, kwargs=None, before=None, observe=None, repeat=1):
    """Run `fn` eagerly and compiled (same backend object for every call) on clones of each
    argument tuple; compare results / exceptions, the arguments afterwards, `observe()` (global
    state) and grad mode afterwards. Returns the backend (a CompileCounter by default)."""
    backend = backend if backend is not None else CompileCounter()
    compiled = framejit.optimize(backend)(fn)
    kwargs = kwargs or {}
    for _ in range(repeat):
        for args in arg_sets:
            results = []
            for f in (fn, compiled):
                EVENTS.clear()
                if before is not None:
                    before()
                call_args, call_kwargs = clone(args), clone(kwargs)
                with no_internal_errors():
                    outcome = run_catching(f, call_args, call_kwargs)
                seen = observe() if observe is not None else None
                results.append((outcome, call_args, call_kwargs, seen, torch.is_grad_enabled()))
            (e_out, e_args, e_kw, e_seen, e_grad), (c_out, c_args, c_kw, c_seen, c_grad) = results
            assert c_out[0] == e_out[0], f"eager {e_out}, compiled {c_out}"
            if e_out[0] == "raised":
                assert type(c_out[1]) is type(e_out[1]) and str(c_out[1]) == str(e_out[1]), (e_out, c_out)
            else:
                assert_equal(c_out[1], e_out[1])
            assert_equal(c_args, e_args, "arguments after the call")
            assert_equal(c_kw, e_kw, "keyword arguments after the call")
            assert_equal(c_seen, e_seen, "observed state after the call")
            assert c_grad == e_grad, "grad mode after the call"
    return backend


# Opaque helpers: calls to them are graph breaks (disallow_in_graph); framejit.disable(recursive=False)
# keeps their own frames from being captured, so they behave exactly like an opaque library call.
EVENTS: list = []


def opaque(fn):
    framejit.disable(fn, recursive=False)
    framejit.disallow_in_graph(fn)
    return fn


@opaque
def brk():
    EVENTS.append("brk")


@opaque
def rec(log, item):
    log.append(item)


@opaque
def plus100(t):
    return t + 100


@opaque
def opaque_kw(t, *, scale=1, shift=0):
    return t * scale + shift


@opaque
def opaque_star(*args, **kwargs):
    return sum(a for a in args if isinstance(a, torch.Tensor)) * len(args) + len(kwargs)


@opaque
def push(lst, value):
    lst.append(value)
    lst.insert(0, value * 10)


@opaque
def raise_value_error(log):
    log.append("raiser ran")
    raise ValueError("bad value from opaque code")


@opaque
def raise_key_error(t):
    raise KeyError("nope")


def observe_events():
    return list(EVENTS)

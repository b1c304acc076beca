"""The `framejit` logger and what it prints: FRAMEJIT_LOGS / config.debug pick the debug sections,
config.log_level sets the logger's level, config.output_code shows the code each backend compiles."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import Iterator

import torch

log = logging.getLogger("framejit")

SECTIONS = ("bytecode", "guards", "graph", "breaks", "recompiles")
# TORCH_LOGS names for framejit's sections (guards, recompiles and bytecode are spelt alike)
ALIASES = {"graph_breaks": "breaks", "graph_code": "graph"}
# TORCH_LOGS's component names: the `framejit` logger's level, "+name" DEBUG, "-name" ERROR, plain INFO
LEVEL_NAMES = ("dynamo", "framejit")
_parsed: dict[str, frozenset[str]] = {}
_applied_level = [logging.WARNING]  # the config.log_level last given to the logger (the default touches nothing)


def sections() -> frozenset[str]:
    """The sections FRAMEJIT_LOGS names (comma-separated, TORCH_LOGS names accepted); a name that is neither a
    section nor a level is an error. A level name sets the `framejit` logger's level."""
    text = os.environ.get("FRAMEJIT_LOGS", "")
    if text not in _parsed:
        wanted, level = set(), None
        for item in (s.strip() for s in text.split(",") if s.strip()):
            name = item.lstrip("+-")
            if name in LEVEL_NAMES:
                level = logging.DEBUG if item[0] == "+" else logging.ERROR if item[0] == "-" else logging.INFO
            elif not item.startswith("-"):
                wanted.add(ALIASES.get(name, name))
            else:
                wanted.add(item)
        unknown = sorted(wanted - {*SECTIONS, "all"})
        if unknown:
            raise ValueError(
                f"FRAMEJIT_LOGS names unknown section(s) {', '.join(map(repr, unknown))}; "
                f"valid sections: {', '.join(SECTIONS)}, all; TORCH_LOGS names: "
                f"{', '.join(f'{k} ({v})' for k, v in ALIASES.items())}; levels: "
                f"{', '.join(LEVEL_NAMES)} (INFO), +{LEVEL_NAMES[0]} (DEBUG), -{LEVEL_NAMES[0]} (ERROR)"
            )
        if level is not None:
            _set_level(level)
        _parsed[text] = frozenset(wanted)
    return _parsed[text]


def enabled(section: str, debug: bool) -> bool:
    """Whether a debug section prints: config.debug turns all on; FRAMEJIT_LOGS picks some."""
    if debug:
        return True
    wanted = sections()
    return section in wanted or "all" in wanted


def apply_level(level: int) -> None:
    """Give the `framejit` logger config.log_level when the setting changed (a level set on the logger
    directly stays until config.log_level changes). Below WARNING, messages need a handler to show:
    one is added to stderr if neither the logger nor the root logger has one."""
    if level == _applied_level[0]:
        return
    _applied_level[0] = level
    _set_level(level)


def _set_level(level: int) -> None:
    """The `framejit` logger's level; below WARNING with a handler to stderr if no logger would show it."""
    log.setLevel(level)
    if level < logging.WARNING and not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[framejit] %(levelname)s: %(message)s"))
        log.addHandler(handler)


@contextlib.contextmanager
def output_code(name: str, gm: torch.fx.GraphModule, on: bool) -> Iterator[None]:
    """config.output_code: print the graph's Python code, and while the backend compiles it, turn on torch's
    `output_code` log so that backends that generate code (inductor) show it."""
    if not on:
        yield
        return
    print(f"OUTPUT CODE {name} (the graph's Python code, handed to the backend)\n{gm.code.strip()}\n")
    from torch._logging._internal import _get_log_state, _set_log_state

    saved = _get_log_state()
    torch._logging.set_logs(output_code=True)
    try:
        yield
    finally:
        _set_log_state(saved)


class _FakeKernelErrors(logging.Filter):
    """Drops the traceback torch's fake tensors log for an op whose kernel raised, while the trace runs the op:
    the trace handles that error (the op raises at the break, as eager's does), so the log is only noise
    before the user's own error."""

    tracing = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        return not (getattr(self.tracing, "on", False) and str(record.msg).startswith("failed while attempting"))


logging.getLogger("torch._subclasses.fake_tensor").addFilter(_FakeKernelErrors())


@contextlib.contextmanager
def quiet_fake_kernel_errors() -> Iterator[None]:
    _FakeKernelErrors.tracing.on = True
    try:
        yield
    finally:
        _FakeKernelErrors.tracing.on = False

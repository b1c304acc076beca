"""How much CPU other processes took while we timed: a shared 2-core machine makes timings meaningless when
another job runs (two OpenMP threads wait on each other whenever one is descheduled: 10x slowdowns)."""

from __future__ import annotations

import os
import time


def _system_busy_s() -> float | None:
    """Seconds of CPU time all processes used since boot (Linux /proc/stat), or None elsewhere."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_busy_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


MIN_WALL_S = 0.25  # /proc/stat counts in 10 ms ticks: shorter windows cannot be judged


class Meter:
    """`with Meter() as m: ...` then `m.others`: the share of all CPUs other processes used meanwhile (0..1)."""

    def __enter__(self) -> "Meter":
        self.others: float | None = None
        self._start = (time.perf_counter(), _system_busy_s(), _own_busy_s())
        return self

    def __exit__(self, *exc: object) -> None:
        wall0, sys0, own0 = self._start
        sys1 = _system_busy_s()
        wall = time.perf_counter() - wall0
        if sys0 is None or sys1 is None or wall < MIN_WALL_S:
            return
        others = (sys1 - sys0) - (_own_busy_s() - own0)
        self.others = min(1.0, max(0.0, others / (wall * (os.cpu_count() or 1))))

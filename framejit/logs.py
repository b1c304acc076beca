"""The `framejit` logger, and FRAMEJIT_LOGS / config.debug deciding which debug sections print."""
from __future__ import annotations

import logging
import os

log = logging.getLogger("framejit")

SECTIONS = ("bytecode", "guards", "graph", "breaks", "recompiles")


def enabled(section: str, debug: bool) -> bool:
    """Whether a debug section prints: config.debug turns all on; FRAMEJIT_LOGS picks some."""
    if debug:
        return True
    wanted = {s.strip().lstrip("+") for s in os.environ.get("FRAMEJIT_LOGS", "").split(",") if s.strip()}
    return section in wanted or "all" in wanted

"""Every disagreement the fuzzer found, minimised (tests/fuzz/repros/repro_<seed>_<program>.py), stays fixed: each
file runs its program eagerly and compiled (with a gradient check where it says TRAIN) and must agree. The file's
docstring says what went wrong when it was found."""
from __future__ import annotations

import glob
import os

import pytest

from framejit.fuzz.runner import check_repro

REPROS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "repros", "repro_*.py")))


@pytest.mark.parametrize("path", REPROS, ids=[os.path.basename(p)[:-3] for p in REPROS])
def test_found_by_the_fuzzer_and_fixed(path):
    check_repro(path)

"""Every disagreement the fuzzer found, minimised (tests/fuzz/repros/, indexed in its README.md), is a regression
test: each file runs its program eagerly and compiled (with a gradient check where it says TRAIN) and must agree
(`internal_*`: must compile without an internal error). The ones still open are strict xfails naming why, so
that fixing one shows up here."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest

# a fresh interpreter per repro (about 4 s each): the full run's, not the fast loop's
pytestmark = pytest.mark.slow

HERE = os.path.join(os.path.dirname(__file__), "repros")
REPROS = sorted(glob.glob(os.path.join(HERE, "repro_*.py")) + glob.glob(os.path.join(HERE, "internal_*.py")))
STILL_OPEN: dict[str, str] = {  # file name -> why it still fails
    "repro_2900000_9547.py": "the leaf quirk (as 6427 of seed 1700000): a row of an input, written in place, "
    "then written again by the next call: eager's error says 'a leaf Variable', "
    "framejit's the row's view error (both raise; torch.compile fails it too)",
    "repro_3200000_805.py": "the leaf quirk: a view made while its base had no grad, the base then written with "
    "grad; eager's view keeps no history until something reads its grad_fn or is_leaf, so "
    "its in-place write raises 'a leaf Variable'; the trace reads it (torch.compile fails "
    "it too)",
    "repro_6200800_568.py": "the leaf quirk (as repro_3200000_805): the in-place write of a view made while its base "
    "had no grad raises 'a leaf Variable' in eager (torch.compile fails it too)",
    "repro_6500700_39.py": "inductor, not framejit: two equal float16 reductions at a dynamic size; inductor's C++ "
    "declares the conversion twice and does not compile (torch.compile fails it too)",
    "repro_6500700_65.py": "inductor, not framejit: cats of a strided input, a cumsum and writes into the inputs; "
    "inductor raises KeyError: 'buf15' while compiling (torch.compile fails the minimal "
    "form too)",
    "repro_6500700_714.py": "inductor, not framejit (as repro_4000000_5): `y` a row of `x`, `y -= g_t; x -= "
    "y.roll(1, 0)`: x differs from eager; torch.compile with inductor fails the minimal "
    "form too, eager and aot_eager agree",
    "repro_4000000_5.py": "inductor, not framejit: `x[-1] = torch.flip(y, [0])` with y passed as x[-1]; the "
    "compiled copy reads y while writing it (torch.compile with inductor fails it too; eager "
    "and aot_eager agree)",
}


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=STILL_OPEN[os.path.basename(p)]))
        if os.path.basename(p) in STILL_OPEN
        else p
        for p in REPROS
    ],
    ids=[os.path.basename(p)[:-3] for p in REPROS],
)
def test_found_by_the_fuzzer(path):
    # each in its own interpreter: a repro may change global torch state (default dtype, grad mode)
    done = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-2000:]

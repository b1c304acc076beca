"""`python -m framejit bench --backend NAME` with a name no backend has: a usage error (non-zero exit) listing the
known backends, before any model runs."""

import subprocess
import sys

import pytest

import framejit
from framejit.__main__ import main


def test_unknown_backend_exits_non_zero_listing_the_known_ones():
    proc = subprocess.run(
        [sys.executable, "-m", "framejit", "bench", "--backend", "nosuch", "--quick", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0
    known = ", ".join(framejit.list_backends(exclude_tags=()))
    assert proc.stderr.strip().splitlines()[-1] == (
        f"framejit bench: unknown backend(s) nosuch; known backends: {known}"
    ), proc.stderr
    assert "eager" in known and "inductor" in known
    assert proc.stdout == "", "no model ran"


def test_every_unknown_name_is_named_among_known_ones():
    with pytest.raises(SystemExit, match=r"unknown backend\(s\) nope, bad; known backends: .*aot_eager"):
        main(["bench", "--backend", "eager,nope", "--backend", "bad"])

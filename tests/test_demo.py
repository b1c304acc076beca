"""`python -m framejit demo` (the README's main job) captures every seed example and matches eager."""

import framejit
from framejit.__main__ import main


def test_demo_captures_the_seed_examples(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    # cos/sin/add, MockModule, Linear+relu, toy_example's first graph and its two continuations
    assert out.count("my_compiler() called with FX graph:") == 6
    assert out.count("equal: True") == 3 and "equal: False" not in out
    assert "100 calls equal to eager: True" in out
    assert "Graph Count: 2" in out and "Graph Break Count: 1" in out
    framejit.reset()

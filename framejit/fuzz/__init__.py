"""framejit.fuzz: differential fuzzing of framejit. `python -m framejit.fuzz --n N --seed S [--out DIR]`.

Generates random programs (generate.py: tensor ops with tracked shapes and dtypes, control flow, containers,
closures, helpers, small nn.Modules, graph breaks, exceptions, grad modes, globals and argument mutation) and
how each is called and compiled (plan.py: argument layouts and aliases per call, built by layouts.py, expanded
only where writes.py finds no write; dtypes; dynamic=/mark_dynamic; backend), runs each eagerly and compiled in
worker subprocesses (runner.py, worker.py, driver.py), compares what each call returns and leaves behind
(compare.py; remote.py is the parent's handle on a worker), and shrinks failures into standalone repro files
(minimise.py).
Outcomes: ok, mismatch, compiled_raised, crash, hang; eager_nondeterministic and invalid are generator bugs.
See docs/fuzz.md.
"""
from framejit.fuzz.driver import fuzz, run_programs
from framejit.fuzz.generate import generate
from framejit.fuzz.remote import FAILURES
from framejit.fuzz.runner import check_program, check_repro

__all__ = ["FAILURES", "check_program", "check_repro", "fuzz", "generate", "run_programs"]

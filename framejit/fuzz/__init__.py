"""framejit.fuzz: differential fuzzing of framejit. `python -m framejit.fuzz --n N --seed S [--out DIR]`."""

from framejit.fuzz.driver import fuzz, run_programs
from framejit.fuzz.generate import generate
from framejit.fuzz.remote import FAILURES
from framejit.fuzz.runner import check_program, check_repro

__all__ = ["FAILURES", "check_program", "check_repro", "fuzz", "generate", "run_programs"]

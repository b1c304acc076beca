"""`python -m framejit.fuzz --n N --seed S [--out DIR] [--batch B] [--jobs J] [--no-minimise] [--reference]
[--backend NAME] [--inductor-share F]`."""

from __future__ import annotations

import argparse
import sys

from framejit.fuzz.driver import fuzz
from framejit.fuzz.remote import FAILURES


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m framejit.fuzz",
        description="Differential fuzzing of framejit: "
        "random programs run eagerly and compiled, disagreements reported and minimised.",
    )
    p.add_argument("--n", type=int, default=100, help="number of programs")
    p.add_argument("--seed", type=int, default=0, help="program i has seed SEED + i")
    p.add_argument(
        "--out",
        default=None,
        help="directory for failing programs, repros and summary.json (default: a new temporary directory)",
    )
    p.add_argument("--batch", type=int, default=100, help="programs per worker process before a fresh one")
    p.add_argument("--jobs", type=int, default=1, help="worker processes run side by side")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds one program may take before it is a hang")
    p.add_argument(
        "--backend",
        default=None,
        help="compile every program with this backend (a name, or "
        "module:function) instead of its own (COMPILE: eager, aot_eager for training programs, or "
        "inductor); `torch.compile` (or torch.compile:NAME) runs torch.compile instead of framejit",
    )
    p.add_argument(
        "--inductor-share",
        type=float,
        default=0.0,
        help="fraction of programs (chosen by each "
        "program's seed) whose own backend is inductor; the rest of each program does not depend on it",
    )
    p.add_argument(
        "--dynamic",
        action="store_true",
        help="every program compiles with dynamic=True (the other "
        "draws stay as they are, so program i is the same program but for its COMPILE)",
    )
    p.add_argument("--no-minimise", dest="minimise", action="store_false", help="do not minimise failures")
    p.add_argument("--per-signature", type=int, default=1, help="failures minimised per failure signature")
    p.add_argument("--only", default=None, help="comma-separated program indices: check just these of the run")
    p.add_argument(
        "--reference",
        action="store_true",
        help="check each failure again under torch.compile (same "
        "backend), to tell framejit's bugs from those torch's own stack shares",
    )
    args = p.parse_args(argv)
    summary = fuzz(
        args.n,
        args.seed,
        out=args.out,
        batch=args.batch,
        jobs=args.jobs,
        timeout=args.timeout,
        backend=args.backend,
        minimise=args.minimise,
        per_signature=args.per_signature,
        only=[int(i) for i in args.only.split(",")] if args.only else None,
        reference=args.reference,
        inductor_share=args.inductor_share,
        dynamic=args.dynamic,
    )
    return 1 if any(summary["counts"].get(k) for k in FAILURES) else 0


if __name__ == "__main__":
    sys.exit(main())

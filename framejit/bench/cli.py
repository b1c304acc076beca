"""`framejit bench` command line: options -> BenchOptions, run the suite, print the table, write the files."""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys

import torch

from framejit.backends import list_backends
from framejit.bench import models
from framejit.bench.report import print_report, write_files
from framejit.bench.runner import BenchOptions, run_suite

MODES = ("infer", "train")


def _names(values: list[str] | None) -> list[str]:
    """Repeatable and comma-separated, duplicates dropped: ["a,b", "c,a"] -> ["a", "b", "c"]."""
    return list(dict.fromkeys(n.strip() for v in values or [] for n in v.split(",") if n.strip()))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend",
        action="append",
        metavar="NAME",
        help="backend(s) to compile with; repeatable or comma-separated (default: inductor)",
    )
    parser.add_argument(
        "--suite",
        choices=("builtin", "hf"),
        default="builtin",
        help="builtin: framejit's own models; hf: Hugging Face transformers models (the hf extra)",
    )
    parser.add_argument(
        "--models",
        action="append",
        metavar="NAMES",
        help=f"subset of the suite, comma-separated (default: all of it; builtin: {', '.join(models.SUITE)})",
    )
    parser.add_argument("--modes", default="infer,train", help="infer, train or both (default: infer,train)")
    parser.add_argument("--compare-torch", action="store_true", help="add rows for torch.compile with the same backend")
    parser.add_argument(
        "--iters",
        "--repeat",
        type=int,
        default=None,
        dest="iters",
        help="timed iterations; the median is reported (default 20, 3 with --quick)",
    )
    parser.add_argument("--warmup", type=int, default=None, help="untimed calls after the first (default 3)")
    parser.add_argument("--quick", action="store_true", help="tiny models and few iterations (for tests)")
    parser.add_argument("--tol", type=float, default=1e-3, help="inference tolerance against eager")
    parser.add_argument(
        "--train-tol", type=float, default=1e-2, help="training tolerance (losses and parameters after all steps)"
    )
    parser.add_argument("--out", default="bench_out", help="directory for bench.csv/json/md (default ./bench_out)")
    parser.add_argument(
        "--warm-cache",
        action="store_true",
        help="keep inductor's on-disk caches between rows (default: each row compiles cold)",
    )
    parser.add_argument(
        "--no-prime",
        action="store_true",
        help="do not compile the tiny version of each model first (one-time costs then land on its first row)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def suite_of(args: argparse.Namespace) -> dict:
    if getattr(args, "suite", "builtin") == "hf":
        from framejit.bench.hf_models import HF_SUITE

        return HF_SUITE
    return models.SUITE


def options_from(args: argparse.Namespace) -> BenchOptions:
    suite = suite_of(args)
    chosen = _names(args.models) or list(suite)
    unknown = [m for m in chosen if m not in suite]
    if unknown:
        raise SystemExit(f"framejit bench: unknown model(s) {', '.join(unknown)}; choose from {', '.join(suite)}")
    backends = _names(args.backend) or ["inductor"]
    known = list_backends(exclude_tags=())
    unknown_backends = [b for b in backends if b not in known]
    if unknown_backends:  # a usage error before any model runs, not a table of failed rows
        raise SystemExit(
            f"framejit bench: unknown backend(s) {', '.join(unknown_backends)}; known backends: {', '.join(known)}"
        )
    modes = _names([args.modes])
    if not modes or any(m not in MODES for m in modes):
        raise SystemExit(f"framejit bench: --modes takes {' and/or '.join(MODES)}, got {args.modes!r}")
    return BenchOptions(
        models=chosen,
        modes=modes,
        backends=backends,
        compare_torch=args.compare_torch,
        iters=args.iters if args.iters is not None else (3 if args.quick else 20),
        warmup=args.warmup if args.warmup is not None else (1 if args.quick else 3),
        quick=args.quick,
        tol=args.tol,
        train_tol=args.train_tol,
        progress=not args.no_progress,
        cold=not args.warm_cache,
        # (--quick alone is for tests: fast; side by side, one-time costs must not land on a row)
        prime=not args.no_prime and (args.compare_torch or not args.quick),
        retries=0 if args.quick else 2,
    )


def _loadavg() -> list[float] | None:
    """The machine's load: timings from a busy machine (other processes on the cores) are not comparable."""
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def run(args: argparse.Namespace) -> int:
    opts = options_from(args)
    load_before = _loadavg()
    results = run_suite(opts, suite_of(args))
    print(
        f"framejit bench: torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"{'quick' if opts.quick else 'full'} sizes, median of {opts.iters} iterations, "
        f"{'cold' if opts.cold else 'warm'} inductor caches, load average "
        f"{'?' if load_before is None else f'{load_before[0]:.2f}'}"
    )
    print_report(results)
    meta = {
        "argv": sys.argv[1:],
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "loadavg_before": load_before,
        "loadavg_after": _loadavg(),
        "options": vars(opts),
    }
    paths = write_files(results, os.path.abspath(args.out), meta)
    print("wrote " + ", ".join(paths))
    # the run succeeded even if rows failed: those are reported in the table
    return 0

"""Command line: `python -m framejit bench` (the model suite benchmark) and `python -m framejit demo`."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="framejit", description="framejit: a PEP 523 JIT for PyTorch")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="capture the seed examples with a printing backend")
    bench = sub.add_parser("bench", help="run the built-in model suite eager and compiled, side by side")
    from framejit.bench.cli import add_arguments

    add_arguments(bench)
    args = parser.parse_args(argv)
    if args.command == "demo":
        from framejit.demo import main as demo

        return demo()
    if args.command == "bench":
        from framejit.bench.cli import run

        return run(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())

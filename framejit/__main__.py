"""Command line: `python -m framejit demo`."""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="framejit", description="framejit: a PEP 523 JIT for PyTorch")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="capture the seed examples with a printing backend")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from framejit.demo import main as demo
        return demo()
    return 2


if __name__ == "__main__":
    sys.exit(main())

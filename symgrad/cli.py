"""The `symgrad` command: argument parsing and exit codes only."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from symgrad.cache import Cache, default_cache_dir
from symgrad.errors import SymgradError
from symgrad.generate import SymgradErrors, default_jobs, generate
from symgrad.output import stale_files, write_files
from symgrad.render import TARGETS

EXIT_OK, EXIT_STALE, EXIT_ERROR = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="symgrad", description="Derive gradients of ops declared with SymPy.")
    commands = parser.add_subparsers(dest="command", required=True)
    derive = commands.add_parser("derive", help="derive gradients and write numpy/TensorFlow modules")
    derive.add_argument("paths", nargs="+", help="op files, or folders of them")
    derive.add_argument("-o", "--output", default="generated", help="output folder (default: generated)")
    derive.add_argument(
        "--target", action="append", choices=TARGETS, help="generate only this target (repeatable)"
    )
    derive.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 when a generated file is stale"
    )
    derive.add_argument(
        "-j", "--jobs", type=int, default=default_jobs(), help="worker processes (default: one per core)"
    )
    derive.add_argument(
        "--no-cache", action="store_true", help=f"derive everything again (cache: {default_cache_dir()})"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    targets = tuple(args.target or TARGETS)
    try:
        cache = Cache(None if args.no_cache else default_cache_dir())
        files = generate(args.paths, targets, cache=cache, jobs=args.jobs)
    except SymgradErrors as exc:
        for error in exc.errors:
            print(f"error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except SymgradError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    out_dir = Path(args.output)
    if args.check:
        return _report_stale(stale_files(out_dir, files), len(files))
    for path in write_files(out_dir, files):
        print(f"wrote {path}")
    print(f"{len(files)} generated file(s) in {out_dir} are up to date")
    return EXIT_OK


def _report_stale(stale: list[Path], total: int) -> int:
    for path in stale:
        print(f"stale: {path} (run `symgrad derive` to regenerate it)", file=sys.stderr)
    if stale:
        return EXIT_STALE
    print(f"all {total} generated file(s) are up to date")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())

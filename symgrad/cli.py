"""The `symgrad` command: argument parsing and exit codes only."""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from symgrad import __version__
from symgrad.cache import default_cache_dir
from symgrad.errors import SymgradError
from symgrad.progress import Progress
from symgrad.targets import CHECK_DTYPES, DIFF_DTYPES, TARGETS, default_jobs

EXIT_OK, EXIT_STALE, EXIT_ERROR = 0, 1, 2


DERIVE_DESCRIPTION = """\
Derive the gradient of every op declared in the op files (or folders of them) given, verify
it against finite differences in every target installed, and write the numpy, TensorFlow, JAX
and PyTorch modules, with each target's runtime module beside them, into the output folder.
Op files whose declarations and symgrad are unchanged come from the cache."""

DERIVE_EXAMPLES = """\
examples:
  symgrad derive my_ops.py -o generated          derive one op file into generated/
  symgrad derive ops/ --target numpy --target torch
  symgrad derive ops/ --check                    exit 1 when generated/ is stale (CI, pre-commit)
  symgrad derive my_ops.py --watch               derive again on each save, in seconds"""

VERIFY_DESCRIPTIONS = {
    "diff": "Compare each derived gradient with a hand-written one: TensorFlow's registered "
    "gradient, JAX's or PyTorch's own derivative, or the functions of a module. Exits 1 on a "
    "mismatch, 2 on an error or when nothing was compared (no op has a reference).",
    "check": "Compare each derived gradient with central finite differences of the derived "
    "forward, and check it stays finite at extreme inputs. Exits 1 on a mismatch, 2 on an error.",
}
ORDER_HELP = {
    "diff": "2: compare the second-order gradients with TensorFlow's own (float64; --against tensorflow only)",
    "check": "2: check the second-order gradients, each target's path, against finite differences "
    "of the derived gradient (float64)",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="symgrad", description="Derive gradients of ops declared with SymPy.")
    parser.add_argument("--version", action="version", version=f"symgrad {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    derive = commands.add_parser(
        "derive", help="derive gradients and write numpy, TensorFlow, JAX and PyTorch modules",
        description=DERIVE_DESCRIPTION, epilog=DERIVE_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    derive.add_argument("paths", nargs="+", help="op files, or folders of them")
    derive.add_argument("-o", "--output", default="generated", help="output folder (default: generated)")
    derive.add_argument(
        "--target", action="append", choices=TARGETS, help="generate only this target (repeatable)"
    )
    derive.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 when a generated file is stale"
    )
    derive.add_argument(
        "-j", "--jobs", type=int,
        help="worker processes (default: one per core; with --watch, none: this process, which keeps "
        "the frameworks imported)",
    )
    derive.add_argument(
        "--no-cache", action="store_true", help=f"derive everything again (cache: {default_cache_dir()})"
    )
    derive.add_argument(
        "--allow-large-intermediates", action="store_true",
        help="warn, instead of failing, when a gradient needs an intermediate larger than the op's "
        "inputs, outputs and stages",
    )
    derive.add_argument(
        "--watch", action="store_true",
        help="derive again each time an op file changes, until Ctrl-C: in this process, the "
        "frameworks imported once, so a re-derivation takes seconds (every target still verified)",
    )
    _add_progress(derive)
    _add_verify_parsers(commands)
    explain = commands.add_parser("explain", help="print how an op's gradient is derived, as Markdown")
    explain.add_argument("paths", nargs=1, metavar="OP_FILE", help="an op file")
    explain.add_argument("--op", action="append", metavar="NAME", help="only this op type (repeatable)")
    return parser


def _add_progress(command) -> None:
    command.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=None,
        help="show progress (ops done, op in hand, time left) on stderr; default: when stderr is a terminal",
    )


def _add_verify_parsers(commands) -> None:
    diff = commands.add_parser("diff", help="compare derived gradients with hand-written ones",
                               description=VERIFY_DESCRIPTIONS["diff"])
    diff.add_argument("paths", nargs="+", help="op files, or folders of them")
    diff.add_argument("--against", required=True, metavar="tensorflow|jax|torch|MODULE",
                      help="`tensorflow` (its registered gradients), `jax` or `torch` (the "
                      "framework's own function of the op type under its autodiff, else its "
                      "autodiff of the generated forward), or a module file or name")
    diff.add_argument("--map", action="append", default=[], metavar="OURS=THEIRS", type=_mapping,
                      help="op type (or Python name) OURS is THEIRS in the module (repeatable)")
    check = commands.add_parser("check", help="compare derived gradients with finite differences",
                                description=VERIFY_DESCRIPTIONS["check"])
    check.add_argument("paths", nargs="+", help="op files, or folders of them")
    # check: differences in CHECK_DTYPES; extreme inputs (finite gradients) in float32 as well
    check_dtypes = tuple(dict.fromkeys(("float32",) + CHECK_DTYPES))
    for name, command, dtypes in (("diff", diff, DIFF_DTYPES), ("check", check, check_dtypes)):
        command.add_argument("--json", metavar="FILE", help="also write the results as JSON")
        command.add_argument("--op", action="append", metavar="NAME", help="only this op type (repeatable)")
        command.add_argument("--dtype", action="append", choices=dtypes, help="only this dtype (repeatable)")
        command.add_argument("--target", action="append", choices=TARGETS,
                             help="only this derived target (repeatable)")
        command.add_argument("--sample", type=_positive, metavar="N",
                             help="compare at most N attribute variants of each op, spread over "
                             "them (the first and last included); every dtype and target is still "
                             "compared")
        command.add_argument("--order", type=int, choices=(1, 2), default=1, help=ORDER_HELP[name])
        command.add_argument("--generated", metavar="DIR",
                             help="use the modules `symgrad derive` wrote to DIR instead of deriving afresh")
        command.add_argument("-v", "--verbose", action="store_true", help="list every result, not only failures")
        command.add_argument("-j", "--jobs", type=int, default=default_jobs(), help="worker processes for deriving and comparing (default: one per core)")
        command.add_argument("--no-cache", action="store_true", help="derive everything again")
        _add_progress(command)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return int(text)


def _mapping(text: str) -> tuple[str, str]:
    ours, sep, theirs = text.partition("=")
    if not (sep and ours and theirs):
        raise argparse.ArgumentTypeError(f"expected OURS=THEIRS, got {text!r}")
    return ours.strip(), theirs.strip()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    commands = {"diff": _verify, "check": _verify, "derive": _derive, "explain": _explain}
    return _reported(commands[args.command], args)


def _reported(command, args) -> int:
    """`command(args)`'s exit status; where it raises a `SymgradError`, every error of the run
    (one, or the several `SymgradErrors` holds) on stderr, and EXIT_ERROR."""
    try:
        return command(args)
    except SymgradError as exc:
        for error in getattr(exc, "errors", [exc]):
            print(f"error: {error}", file=sys.stderr, flush=True)
        return EXIT_ERROR


def _derive(args) -> int:
    """`symgrad derive`: write the generated modules (or, with --check, compare with them;
    with --watch, again on each change)."""
    if args.watch:
        from symgrad.watch import watch

        if args.check:
            raise SymgradError("--watch writes what it derives; --check writes nothing: give one of them")
        return watch(args.paths, lambda: _reported(_derive_once, args))
    return _derive_once(args)


def _derive_once(args) -> int:
    from symgrad.cache import Cache
    from symgrad.generate import generate
    from symgrad.output import require_writable_folder, stale_files, write_files

    out_dir = Path(args.output)
    if not args.check:
        require_writable_folder(out_dir)  # before the derivation, not after
    cache = Cache(None if args.no_cache else default_cache_dir())
    jobs = args.jobs or (1 if args.watch else default_jobs())
    files = generate(
        args.paths, tuple(args.target or TARGETS), cache=cache, jobs=jobs,
        allow_large=args.allow_large_intermediates, progress=Progress.for_command("derive", args.progress),
    )
    if args.check:
        return _report_stale(stale_files(out_dir, files), len(files))
    written = write_files(out_dir, files)
    for path in written:
        print(f"wrote {path}")
    print(f"{out_dir}: {len(written)} file(s) written, {len(files) - len(written)} unchanged")
    return EXIT_OK


def _explain(args) -> int:
    """`symgrad explain`: print the derivation of each op (or of those named) as Markdown."""
    from symgrad.explain import explain_ops
    from symgrad.load import load_op_file, op_file_paths

    decls = [decl for path in op_file_paths(args.paths) for decl in load_op_file(path).ops]
    undeclared = _undeclared_names(args, {name for d in decls for name in (d.name, d.func_name)})
    if undeclared:
        print(f"error: {undeclared}", file=sys.stderr)
        return EXIT_ERROR
    print(explain_ops([d for d in decls if not args.op or d.name in args.op or d.func_name in args.op]), end="")
    return EXIT_OK


def _verify(args) -> int:
    """`symgrad diff` and `symgrad check`: print the report, exit 0 / 1 (mismatch) / 2 (error)."""
    from symgrad.generate import to_temp_folder
    from symgrad.verify.check import available_targets
    from symgrad.verify.diff import make_reference
    from symgrad.verify.ops_under_test import load_derived
    from symgrad.verify.report import exit_status, format_report, nothing_compared, write_json
    from symgrad.verify.runner import Run, run_ops

    progress = Progress.for_command(args.command, args.progress)
    fresh = args.generated is None  # derived afresh into a temporary folder
    folder = to_temp_folder(args.paths, args.jobs, not args.no_cache, progress) if fresh else args.generated
    ops = load_derived(args.paths, folder, temporary=fresh)
    undeclared = _undeclared_names(args, {name for op in ops for name in (op.name, op.decl.func_name)})
    if undeclared:
        print(f"error: {undeclared}", file=sys.stderr)
        return EXIT_ERROR
    ops = [op for op in ops if not args.op or op.name in args.op]
    if args.order == 2 and args.command == "diff" and args.against != "tensorflow":
        print("error: diff --order 2 compares with TensorFlow's own second derivatives: "
              f"--against tensorflow, got {args.against!r}", file=sys.stderr)
        return EXIT_ERROR
    job = Run(
        args.command,
        tuple(map(str, args.paths)),
        str(ops[0].folder) if ops else "",
        bool(ops) and ops[0].temporary,
        tuple(args.target or available_targets()),
        tuple(args.dtype) if args.dtype else None,
        getattr(args, "against", None),
        tuple(getattr(args, "map", ())),
        sample=args.sample,
        order=args.order,
    )
    reference = make_reference(args.against, dict(args.map)) if args.command == "diff" else None
    results = run_ops(job, ops, args.jobs, reference, progress=progress)
    print(format_report(results, verbose=args.verbose))
    if args.json:
        write_json(results, args.json)
    uncompared = nothing_compared(results) if args.command == "diff" else None
    if uncompared:  # a reference that matches no op (a typo in a module or a name) fails the run
        print(f"error: {uncompared}", file=sys.stderr)
        return EXIT_ERROR
    return exit_status(results)


def _undeclared_names(args, names: set[str]) -> str | None:
    """What is wrong when --op or --map names no declared op (of `names`, their op types and
    Python names): a typo would compare nothing."""
    known = sorted(names)
    named = [("--op", name, name) for name in args.op or ()]
    named += [("--map", ours, f"{ours}={theirs}") for ours, theirs in getattr(args, "map", ())]
    for flag, name, given in named:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            return f"{flag} {given}: no op {name} is declared in {' '.join(map(str, args.paths))}{hint}"
    return None


def _report_stale(stale: list[Path], total: int) -> int:
    for path in stale:
        print(f"stale: {path} (run `symgrad derive` to regenerate it)", file=sys.stderr)
    if stale:
        return EXIT_STALE
    print(f"all {total} generated file(s) are up to date")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark symgrad's generated gradients against the hand-written ones users would otherwise use.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/run.py [--quick | --smoke]
        [--json FILE] [--png FILE] [--only OP ...] [--repeats N] [--[no-]isolate]
        [--use-generated] [--save-generated DIR]

Derives ops/ and benchmarks/ops/ afresh into a temporary folder (so new ops are picked up as
they are declared), then for every case in `bench_cases.CASES` whose op is derived times, in
float32: the generated TensorFlow gradient against TensorFlow's registered one; the generated
numpy gradient against autograd's and against `jax.vjp` under `jax.jit`; and each gradient
against its forward. Composed ops (ops/composed.py: attention, LayerNorm, an MLP block), which
have no TensorFlow op, are timed against their forward written by hand in plain TF ops,
autograd.numpy and jax.numpy, under each one's autodiff, and have targets of their own.
Before timing a case, every reference's forward and gradient is compared with the generated
ones at the smoke size in float64: one that differs fails the run. Contenders run
interleaved; medians and ratios (ours / reference) are printed, and written with `--json` and
`--png`. With full inputs each case runs in a process of its own. jax, autograd and
matplotlib are optional (`pip install '.[bench]'`): what is missing is skipped, and said so.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/run.py \
        --only ScaledDotProductAttention LayerNorm MlpBlock --json /tmp/composed.json

times the composed ops alone.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(ROOT))

import numpy as np  # noqa: E402

from bench_cases import CASES  # noqa: E402
from bench_measure import Generated, Libraries, Timing, run_case  # noqa: E402
from bench_report import check_targets, format_rows, format_targets, write_chart  # noqa: E402
from symgrad.runtime_module import import_generated  # noqa: E402

OP_FOLDERS = (ROOT / "ops", HERE / "ops")  # the library's ops, then the benchmark's own
TIMING = {
    "full": Timing(repeats=21, min_sample=0.05, settle=0.3),
    "quick": Timing(repeats=5, min_sample=0.01, settle=0.05),
    "smoke": Timing(repeats=1, min_sample=0.0, settle=0.0),
}
DEFAULT_PNG = ROOT / "docs" / "ratios.png"  # beside the report of docs/benchmarks.md


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="smaller inputs, 5 repeats (< 1 min)")
    size.add_argument(
        "--smoke", action="store_true", help="tiny inputs, 1 repeat: checks that it runs, no chart"
    )
    parser.add_argument("--repeats", type=int, help="interleaved repeats per contender")
    parser.add_argument("--json", type=Path, help="write the results as JSON to this file")
    parser.add_argument(
        "--png",
        type=Path,
        help=f"bar chart of the ratios (default {DEFAULT_PNG.relative_to(ROOT)}; none with --smoke)",
    )
    parser.add_argument("--only", nargs="+", metavar="OP", help="only these op types")
    parser.add_argument(
        "--save-generated",
        type=Path,
        metavar="DIR",
        help="copy the generated modules timed into DIR (ops/'s into DIR/ops, benchmarks/ops's "
        "into DIR/benchmarks_ops): symgrad may change between runs",
    )
    parser.add_argument(
        "--isolate",
        action=argparse.BooleanOptionalAction,
        help="run each case in a fresh process (default: with full inputs only)",
    )
    parser.add_argument("--worker-case", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--worker-folders", help=argparse.SUPPRESS)
    parser.add_argument(
        "--use-generated",
        action="store_true",
        help="use the committed generated/ for ops/ instead of deriving it (benchmarks/ops is "
        "derived, and so is an op file of ops/ with no modules in generated/)",
    )
    return parser


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    size = "smoke" if args.smoke else "quick" if args.quick else "full"
    timing = TIMING[size]
    if args.repeats:
        timing = dataclasses.replace(timing, repeats=args.repeats)
    if args.worker_case is not None:
        return run_worker(args, size, timing)
    isolate = size == "full" if args.isolate is None else args.isolate
    png = args.png or (None if args.smoke else DEFAULT_PNG)
    started = time.perf_counter()
    libs = load_libraries()
    machine = describe_machine(libs)
    machine["timing"] = f"{size} inputs, {timing.repeats} repeats, float32"
    machine["isolation"] = "one process per case" if isolate else "one process"
    print("\n".join(f"{key}: {value}" for key, value in machine.items()))
    if size == "smoke":
        print("smoke run: tiny inputs, one repeat; its times and ratios mean nothing")
    print()
    with tempfile.TemporaryDirectory(prefix="symgrad-bench-") as tmp:
        folders = derive_all(Path(tmp), args.use_generated, _targets(libs))
        if args.save_generated:
            save_generated(folders, args.save_generated)
        generated = load_generated(folders, libs.tf is not None, libs.jax is not None, libs.torch is not None)
        run = (lambda n, case: run_isolated(n, folders, args)) if isolate else None
        rows = run_cases(generated, libs, size, timing, args.only, run)
    targets = check_targets(rows)
    print("\n" + format_targets(targets))
    report = {"results": rows, "targets": targets, "machine": machine, "size": size}
    write_outputs(report, args.json, png)
    print(f"done in {time.perf_counter() - started:.1f} s")
    return 0


def write_outputs(report: dict, json_path: Path | None, png: Path | None) -> None:
    """The JSON report and the chart, where asked for; no chart without matplotlib."""
    if json_path:
        json_path.write_text(json.dumps(report, indent=1) + "\n")
        print(f"wrote {json_path}")
    if png:
        try:
            write_chart(report["results"], png)
            print(f"wrote {png}")
        except ImportError:
            _missing("matplotlib", "the chart")


def run_cases(generated: dict, libs: Libraries, size: str, timing: Timing, only, run) -> list[dict]:
    """Every case whose op is derived, its rows printed as they come.

    `run(index, case)` runs one case elsewhere (a fresh process); None: in this process.
    """
    gc.collect()
    gc.freeze()  # TensorFlow's and JAX's objects: the collections between timings skip them
    rows = []
    for index, case in enumerate(CASES):
        if only and case.op not in only:
            continue
        if case.op not in generated:
            print(f"skipped {case.label}: no op {case.op} is declared in ops/ or benchmarks/ops/")
            continue
        if run is None:
            case_rows = run_case(case, generated[case.op], libs, size, timing)
        else:
            case_rows = run(index, case)
        print(format_rows(case_rows) if not rows else format_rows(case_rows).split("\n", 1)[1])
        rows += case_rows
    return rows


# --- one process per case -----------------------------------------------------------------


def run_isolated(index: int, folders: list, args) -> list[dict]:
    """Run case `index` in a fresh process: no allocator, thread-pool or cache state is left
    over from the cases before it (numpy's temporaries, for one, cost more or less depending
    on what was freed before)."""
    with tempfile.TemporaryDirectory(prefix="symgrad-bench-case-") as tmp:
        out = Path(tmp) / "rows.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--worker-case", str(index)]
        command += ["--worker-folders", json.dumps([[str(a), str(b)] for a, b in folders])]
        command += ["--json", str(out)] + _size_flags(args)
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"case {CASES[index].label} failed:\n{done.stdout}{done.stderr}")
        return json.loads(out.read_text())["results"]


def _size_flags(args) -> list[str]:
    flags = ["--smoke"] if args.smoke else ["--quick"] if args.quick else []
    return flags + (["--repeats", str(args.repeats)] if args.repeats else [])


def run_worker(args, size: str, timing: Timing) -> int:
    """The worker process of `run_isolated`: one case, its rows written to `--json`."""
    with contextlib.redirect_stdout(io.StringIO()):  # the parent has said what is skipped
        libs = load_libraries()
        folders = [(Path(a), Path(b)) for a, b in json.loads(args.worker_folders)]
        generated = load_generated(folders, libs.tf is not None, libs.jax is not None, libs.torch is not None)
    case = CASES[args.worker_case]
    gc.collect()
    gc.freeze()
    rows = run_case(case, generated[case.op], libs, size, timing)
    args.json.write_text(json.dumps({"results": rows}))
    return 0


# --- the generated modules --------------------------------------------------------------------


def _targets(libs: Libraries) -> tuple[str, ...]:
    """The targets derived: those of the libraries this run could import."""
    return ("numpy",) + (("tensorflow",) if libs.tf else ()) + (("jax",) if libs.jax else ()) + (("torch",) if libs.torch else ())


def derive_all(out: Path, use_generated: bool, targets: tuple[str, ...]) -> list[tuple[Path, Path]]:
    """Derive each op folder with the `symgrad` CLI, for `targets`: (op folder, its generated
    modules' folder)."""
    folders = []
    for n, folder in enumerate(OP_FOLDERS):
        if use_generated and folder == ROOT / "ops":
            folders.append((folder, _committed(folder, out / str(n), targets)))
        else:
            _derive(folder, out / str(n), targets)
            folders.append((folder, out / str(n)))
    return folders


def save_generated(folders: list[tuple[Path, Path]], out: Path) -> None:
    for folder, modules in folders:
        name = "_".join(folder.relative_to(ROOT).parts)
        shutil.copytree(modules, out / name, dirs_exist_ok=True)
    print(f"copied the generated modules to {out}")


def _committed(folder: Path, out: Path, targets: tuple[str, ...]) -> Path:
    """generated/, or where an op file of `folder` has no modules there (declared since they
    were last committed), a copy of it with that file derived into it."""
    from symgrad.load import op_file_paths

    generated = ROOT / "generated"
    missing = [
        p for p in op_file_paths([folder]) if not (generated / f"{p.stem}_numpy.py").exists()
    ]
    if not missing:
        return generated
    shutil.copytree(generated, out)
    for path in missing:
        _derive(path, out, targets)
    return out


def load_generated(
    folders: list[tuple[Path, Path]], with_tf: bool, with_jax: bool = False, with_torch: bool = False
) -> dict[str, Generated]:
    """Op type -> its generated modules, for every op declared in the op folders."""
    from symgrad.load import load_op_file, op_file_paths

    generated = {}
    for folder, modules_folder in folders:
        for path in op_file_paths([folder]):
            if not (modules_folder / f"{path.stem}_numpy.py").exists():
                print(f"skipped {path.relative_to(ROOT)}: not derived into {modules_folder}")
                continue
            modules = _import_modules(modules_folder, path.stem, with_tf, with_jax, with_torch)
            for decl in load_op_file(path).ops:
                generated.setdefault(decl.name, Generated(decl.func_name, *modules))
    return generated


def _derive(folder: Path, out: Path, targets: tuple[str, ...]) -> None:
    command = [sys.executable, "-m", "symgrad", "derive", str(folder), "-o", str(out)]
    command += [a for target in targets for a in ("--target", target)]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"`symgrad derive {folder}` failed:\n{done.stdout}{done.stderr}")
    print(f"derived {folder.relative_to(ROOT)} in {time.perf_counter() - started:.1f} s")


def _import_modules(folder: Path, stem: str, with_tf: bool, with_jax: bool, with_torch: bool):
    """The generated numpy, TensorFlow, JAX and PyTorch modules of one op file (None for a
    framework's without it installed)."""
    return [
        import_generated(folder / f"{stem}{suffix}.py", f"symgrad_bench_{folder.name}_{stem}{suffix}") if wanted else None
        for suffix, wanted in (("_numpy", True), ("_tf", with_tf), ("_jax", with_jax), ("_torch", with_torch))
    ]


# --- libraries and machine --------------------------------------------------------------------


def load_libraries() -> Libraries:
    """TensorFlow, autograd and JAX where installed; each one missing is said and skipped."""
    return Libraries(tf=_load_tf(), autograd=_load_autograd(), jax=_load_jax(), torch=_load_torch())


def _missing(name: str, what: str) -> None:
    print(f"{name} is not installed: skipping {what} (pip install '.[bench]')")


def _load_tf():
    try:
        import tensorflow as tf
    except ImportError:
        print(
            "tensorflow is not installed: skipping the TensorFlow target (pip install '.[tensorflow]')"
        )
        return None
    tf.get_logger().setLevel("ERROR")  # one tf.function per case and contender is by design
    return tf


def _load_autograd():
    try:
        import autograd.numpy
        import autograd.scipy.special
    except ImportError:
        _missing("autograd", "the autograd contender")
        return None
    return argparse.Namespace(np=autograd.numpy, special=autograd.scipy.special)


def _load_jax():
    try:
        import jax
        import jax.numpy
        import jax.scipy.special
    except ImportError:
        _missing("jax", "the jax.jit contender")
        return None
    jax.config.update("jax_platforms", "cpu")
    return argparse.Namespace(np=jax.numpy, nn=jax.nn, special=jax.scipy.special, lax=jax.lax)


def _load_torch():
    try:
        import torch

        from symgrad.backends.torch.functions import FUNCTIONS
    except ImportError:
        print("torch is not installed: skipping the PyTorch target (see the README for its CPU build)")
        return None
    return argparse.Namespace(torch=torch, functions=FUNCTIONS)


def describe_machine(libs: Libraries) -> dict[str, str]:
    """The machine and library versions the numbers come from."""
    machine = {
        "cpu": _cpu_model(),
        "cores": str(os.cpu_count()),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "blas": _blas(),
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
        "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE", "(unset)"),
    }
    for name, lib in (("tensorflow", libs.tf), ("autograd", libs.autograd), ("jax", libs.jax), ("torch", libs.torch)):
        machine[name] = _version(name) if lib is not None else "(not installed)"
    machine["symgrad"] = _source_state()
    machine["load average at start"] = load_average()
    return machine


def _source_state() -> str:
    """The commit the generated code is derived with, and whether symgrad/ or ops/ differ."""
    try:
        git = lambda *args: subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        commit = git("rev-parse", "--short", "HEAD")
        changed = git("status", "--porcelain", "--", "symgrad", "ops", "templates")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no git checkout)"
    return commit + (" with uncommitted changes to symgrad/, ops/ or templates/" if changed else "")


def load_average() -> str:
    """The 1-minute load average; a busy machine makes every number here slower and noisier."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return "unknown"
    busy = load > 1.0  # more than one core's worth of other work
    return f"{load:.2f}" + (" (busy: other processes compete for the cores)" if busy else "")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _blas() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "unknown (no threadpoolctl)"
    blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    return (
        ", ".join(
            f"{i['internal_api']} {i.get('version')} {i.get('architecture')} kernel, {i['num_threads']} threads"
            for i in blas
        )
        or "unknown"
    )


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    for dist in (name, f"{name}-cpu"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return "unknown"


if __name__ == "__main__":
    sys.exit(main())

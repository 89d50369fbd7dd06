"""Running `symgrad diff` or `symgrad check` over many ops, in worker processes.

A `Run` says what to compare; `run_ops` deals its ops, largest first, to worker processes
one op at a time (each imports TensorFlow once), and gathers the results back in the order the
ops are declared. Workers are forked where that is safe (see `processes.start_method`): they
then start with SymPy imported and the declarations loaded, as `symgrad derive`'s verification
has them, instead of importing both again; else spawned, loading the op files once each.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace

from symgrad.processes import start_method
from symgrad.progress import QUIET, Progress
from symgrad.verify.check import run_check
from symgrad.verify.diff import make_reference, run_diff
from symgrad.verify.extremes import run_extremes
from symgrad.verify.ops_under_test import DerivedOp, load_derived
from symgrad.verify.report import Result
from symgrad.verify.second_order import run_second_order_check, run_second_order_diff


@dataclass(frozen=True)
class Run:
    """One comparison over some of the ops declared under `paths` (all of them when `ops` is
    None), with their generated modules in `folder`."""

    command: str  # "diff" or "check"
    paths: tuple[str, ...]  # op files, or folders of them
    folder: str  # where the generated modules are
    temporary: bool  # `folder` is a fresh derivation's (snippets say how to derive again)
    targets: tuple[str, ...]
    dtypes: tuple[str, ...] | None = None  # every dtype the op supports when None
    against: str | None = None  # diff: "tensorflow" or a module
    mapping: tuple[tuple[str, str], ...] = ()  # diff: (ours, theirs) names
    ops: tuple[str, ...] | None = None  # op types, or None for every op
    quick: bool = False  # check: each variant's first case alone (what `derive` verifies)
    sample: int | None = None  # at most this many variants per op (every one when None)
    order: int = 1  # 2: the second-order gradients (`symgrad/verify/second_order.py`)


def run(job: Run, ops: list[DerivedOp] | None = None, reference=None) -> list[Result]:
    """The results of `job` in this process (on `ops` and against `reference`, when already
    loaded: a user's module of gradients is then not executed a second time)."""
    if ops is None:
        ops = [op for op in _loaded(job.paths, job.folder, job.temporary) if job.ops is None or op.name in job.ops]
    if job.order == 2:
        run_order2 = run_second_order_check if job.command == "check" else run_second_order_diff
        return run_order2(ops, job.targets, job.dtypes, job.sample)
    if job.command == "check":
        if job.quick:  # derive's own verification: ordinary inputs only
            return run_check(ops, job.targets, job.dtypes, job.quick, job.sample)
        return [
            row
            for op in ops
            for row in run_check([op], job.targets, job.dtypes, sample=job.sample)
            + run_extremes([op], job.targets, job.dtypes, job.sample)
        ]
    if reference is None:
        reference = make_reference(job.against, dict(job.mapping))
    return run_diff(ops, reference, job.dtypes, job.targets, job.sample)


def run_ops(
    job: Run, ops: list[DerivedOp], workers: int, reference=None, initializer=None,
    progress: Progress = QUIET, what: str = "comparing ops",
) -> list[Result]:
    """The results of `job` on `ops`, spread over up to `workers` worker processes, each
    started with `initializer()` when given (in this one, against `reference` when given, for
    one worker); each op counted by `progress` as `what` when done."""
    workers = min(workers, len(ops))
    if workers <= 1:
        if reference is None and job.command == "diff" and job.order == 1:
            reference = make_reference(job.against, dict(job.mapping))  # a user's module run once
        rows = progress.each(what, [op.name for op in ops], lambda op: run(job, [op], reference), ops)
        return [row for op_rows in rows for row in op_rows]
    largest_first = sorted(ops, key=lambda op: -len(op.decl.variants()))
    one_each = [replace(job, ops=(op.name,)) for op in largest_first]
    method, key = start_method(), (job.paths, job.folder, job.temporary)
    if method == "fork":  # what a forked worker would load, it has already
        _LOADED[key] = ops
    try:
        context = multiprocessing.get_context(method)
        with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=initializer) as pool:
            stage = progress.stage(what, [op.name for op in largest_first])
            by_op = dict(zip((op.name for op in largest_first), stage.gather([pool.submit(run, j) for j in one_each])))
    finally:
        _LOADED.pop(key, None)
    return [row for op in ops for row in by_op[op.name]]


_LOADED: dict[tuple, list[DerivedOp]] = {}  # (paths, folder, temporary) -> the ops, per process


def _loaded(paths: tuple[str, ...], folder: str, temporary: bool) -> list[DerivedOp]:
    """The ops declared under `paths`, loaded once per worker process (inherited by a fork)."""
    key = (paths, folder, temporary)
    if key not in _LOADED:
        _LOADED[key] = [replace(op, temporary=temporary) for op in load_derived(list(paths), folder)]
    return _LOADED[key]

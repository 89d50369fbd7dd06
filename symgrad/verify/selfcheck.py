"""`symgrad derive` verifies what it writes: every variant's derived gradient, numpy and (when
installed) TensorFlow, against central differences of the derived forward, on one small
random float64 case, before any file is written or cached. A disagreement, a generated
function that raises, or a forward with no finite case is an error naming the op, the
variant and the element."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from symgrad.errors import VerificationError
from symgrad.load import OpFile
from symgrad.progress import QUIET, Progress
from symgrad.targets import MODULE_SUFFIX
from symgrad.verify.check import available_targets
from symgrad.verify.ops_under_test import DerivedOp
from symgrad.verify.runner import Run, run_ops

IN_PROCESS_MAX = 12  # ops verified without worker processes (spawning one costs seconds)


def verify_generated(
    op_files: list[OpFile], files: dict[str, str], jobs: int, targets: tuple[str, ...] | None = None,
    progress: Progress = QUIET,
) -> list[VerificationError]:
    """The errors found checking the generated `files` (name -> text) of `op_files`, for those
    of `targets` (default: those `files` has modules of) this process can run."""
    if targets is None:
        targets = tuple(t for t, suffix in MODULE_SUFFIX.items() if any(name.endswith(suffix) for name in files))
    ops_total = sum(len(f.ops) for f in op_files)
    if not ops_total:
        return []
    with tempfile.TemporaryDirectory(prefix="symgrad-verify-") as folder:
        for name, text in files.items():
            (Path(folder) / name).write_text(text)
        ops = [DerivedOp(d, f.stem, str(f.path), Path(folder), True) for f in op_files for d in f.ops]
        checked = tuple(t for t in available_targets() if t in targets)
        job = Run("check", tuple(str(f.path) for f in op_files), folder, True, checked,
                  ("float64",), quick=True)
        workers = jobs if ops_total > IN_PROCESS_MAX else 1
        results = run_ops(job, ops, workers, initializer=tensorflow_without_keras, progress=progress, what="verifying ops")
    locations = {op.name: op.decl.location for op in ops}
    return [_error(r, locations.get(r.op)) for r in results if r.status not in ("match", "unavailable") or (r.status == "match" and not r.cases)]


def tensorflow_without_keras() -> None:
    """In a verification worker, before TensorFlow is imported: TensorFlow's `__init__`
    imports Keras 3 eagerly (4 of its 12 s of import), which nothing here uses (the workers run
    generated code of raw ops); `TF_USE_LEGACY_KERAS` points it at `tf_keras` instead, which it
    skips where that is not installed. A user's setting is kept."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")


def _error(result, location) -> VerificationError:
    where = ", ".join(x for x in (result.target, result.dtype, result.variant and f"variant {result.variant}") if x)
    if result.status == "match":  # no case ran
        what = result.message or "the derived forward is not finite (or raises) on every generated case"
    else:
        what = result.message or result.status
    detail = result.detail or {}
    element = ""
    if detail.get("index") is not None:
        element = (f" at {detail.get('input')}{detail['index']} in case '{detail.get('case')}': "
                   f"expected {detail.get('expected')}, got {detail.get('got')}")
    return VerificationError(
        f"internal error, nothing written: the derived gradient was checked against central "
        f"differences of the derived forward ({where}){element}: {what}",
        result.op,
        location,
    )

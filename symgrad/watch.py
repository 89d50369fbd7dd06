"""`symgrad derive --watch`: derive, then derive again each time an op file changes, in one
process, so that TensorFlow, JAX and PyTorch are imported once and a re-derivation after an
edit costs the derivation and its verification alone (seconds, where a fresh process spends
10-20 s importing the frameworks).

Every re-derivation verifies every target before it writes, as a fresh `symgrad derive` does,
and one that fails prints its errors, leaves the output folder as it was and keeps watching.
Op files are found again each time, so a file added to a watched folder is derived too. A
module that op files import is imported once, as Python imports any module: restart the watch
after editing one.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable

from symgrad.errors import SymgradError
from symgrad.load import op_file_paths

POLL_SECONDS = 0.2  # how often the op files' modification times are read
SETTLE_SECONDS = 0.3  # a change counts once the files stay unchanged this long (an editor's save)


def watch(paths: list[str], derive_once: Callable[[], int], out=sys.stdout) -> int:
    """Run `derive_once()` (which reports its own errors and returns its exit status) now and
    after each change to the op files under `paths`, until interrupted (Ctrl-C), then return
    0. After each run a line says how long it took and that it is watching."""
    try:
        while True:
            seen = _snapshot(paths)
            start = time.perf_counter()
            status = derive_once()
            print(f"derived in {time.perf_counter() - start:.1f} s (exit status {status}); watching "
                  f"{_count(seen)} for changes (Ctrl-C stops)", file=out, flush=True)
            _wait_for_change(paths, seen)
    except KeyboardInterrupt:
        return 0


def _wait_for_change(paths: list[str], seen) -> None:
    """Return once the op files under `paths` differ from `seen` and have settled."""
    while _snapshot(paths) == seen:
        time.sleep(POLL_SECONDS)
    current = _snapshot(paths)
    while True:
        time.sleep(SETTLE_SECONDS)
        latest = _snapshot(paths)
        if latest == current:
            return
        current = latest


def _snapshot(paths: list[str]):
    """Each op file under `paths` with its modification time and size (or the error finding
    them says: a file an editor is replacing may be missing for a moment)."""
    try:
        found = op_file_paths(paths)
    except SymgradError as exc:
        return str(exc)
    stats = []
    for path in found:
        try:
            stat = Path(path).stat()
        except OSError:
            stats.append((str(path), None))
            continue
        stats.append((str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(stats)


def _count(snapshot) -> str:
    count = len(snapshot) if isinstance(snapshot, tuple) else 0
    return f"{count} op file{'s' if count != 1 else ''}"

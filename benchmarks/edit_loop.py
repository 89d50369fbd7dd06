"""The edit loop: re-deriving one small op file after an edit, cold (a fresh `symgrad derive`)
and warm (`symgrad derive --watch`, the frameworks kept imported), every target verified
before anything is written in both.

    python benchmarks/edit_loop.py [--edits N] [--json FILE]

The op file holds two small ops a person iterates on: an elementwise activation and a
softmax over the last axis of a tensor. Each edit changes a constant in both, so neither
comes from the cache. Cold: `python -m symgrad derive` in a fresh process per edit (what a
person without --watch runs). Warm: one `symgrad derive --watch` process, the edits saved one
after another; timed from the save to its "derived in" line (which includes the watcher's
poll and settle time). Printed: the median seconds of each, the load average at the start,
and each edit's figure. No time is asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

OP_FILE = '''\
import sympy as sp
from symgrad import dims, elementwise, indices, op, tensor

B, N = dims("B N")
b, n, m = indices("b n m")


@elementwise("EditedSoftsign")
def edited_softsign(x):
    """y = x / (c + |x|)."""
    return x / ({c} + sp.Abs(x))


@op("EditedSoftmax")
def edited_softmax():
    """Softmax of the last axis, its logits scaled by a constant."""
    x = tensor("x", (B, N))
    z = sp.exp({c} * x[b, n]) / sp.Sum(sp.exp({c} * x[b, m]), (m, 0, N - 1))
    return {{"y": ((b, n), z)}}
'''


def _environment(cache: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "SYMGRAD_CACHE_DIR": str(cache), "TF_CPP_MIN_LOG_LEVEL": "3"}


def _interruptible() -> None:
    """In the child, before Python starts: SIGINT's default action (a process started in the
    background of a shell inherits SIGINT ignored, and Python then installs no handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def cold(folder: Path, edits: int) -> list[float]:
    """Seconds of a fresh `symgrad derive` after each edit."""
    seconds = []
    for edit in range(edits):
        (folder / "edited.py").write_text(OP_FILE.format(c=edit + 2))
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "symgrad", "derive", "edited.py", "-o", "cold"], cwd=folder,
                       env=_environment(folder / "cold-cache"), check=True, capture_output=True)
        seconds.append(time.perf_counter() - start)
    return seconds


def warm(folder: Path, edits: int) -> tuple[float, list[float]]:
    """(seconds of the watcher's first derivation, seconds from each later save to its
    derivation's end)."""
    (folder / "edited.py").write_text(OP_FILE.format(c=1))
    process = subprocess.Popen(
        [sys.executable, "-m", "symgrad", "derive", "edited.py", "-o", "warm", "--watch"], cwd=folder,
        env=_environment(folder / "warm-cache"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=_interruptible,  # Ctrl-C stops it, even where this process ignores SIGINT
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()

    def derived() -> str:
        while True:
            line = lines.get(timeout=600)
            if line.startswith("derived in "):
                if "exit status 0" not in line:
                    raise SystemExit(f"the watcher's derivation failed: {line}")
                return line

    try:
        start = time.perf_counter()
        derived()
        first, seconds = time.perf_counter() - start, []
        for edit in range(edits):
            (folder / "edited.py").write_text(OP_FILE.format(c=edit + 2))
            start = time.perf_counter()
            derived()
            seconds.append(time.perf_counter() - start)
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    return first, seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edits", type=int, default=5, help="edits timed each way (default 5)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="symgrad-edit-loop-") as temp:
        folder = Path(temp)
        first, warm_seconds = warm(folder, args.edits)
        cold_seconds = cold(folder, args.edits)
    report = {
        "cpus": os.cpu_count(),
        "load_average": round(load, 2),
        "cold_s": [round(s, 2) for s in cold_seconds],
        "watch_first_s": round(first, 2),
        "warm_s": [round(s, 2) for s in warm_seconds],
        "cold_median_s": round(statistics.median(cold_seconds), 2),
        "warm_median_s": round(statistics.median(warm_seconds), 2),
    }
    print(f"{os.cpu_count()} cores, load average {load:.2f} at the start; one op file, two ops, every target verified")
    print(f"  cold, a fresh `symgrad derive` per edit: median {report['cold_median_s']:.1f} s  {report['cold_s']}")
    print(f"  warm, `symgrad derive --watch`, save to written: median {report['warm_median_s']:.1f} s  "
          f"{report['warm_s']} (its first derivation: {first:.1f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

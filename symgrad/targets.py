"""What symgrad's commands choose among: the targets it emits, their module suffixes, the dtypes
it verifies in, and how many worker processes this machine runs by default.

Nothing heavy is imported here, so that `symgrad --help` starts at once.
"""

from __future__ import annotations

import os

TARGETS = ("numpy", "tensorflow")
MODULE_SUFFIX = {"numpy": "_numpy.py", "tensorflow": "_tf.py"}

REAL_DTYPES = ("float32", "float64")
COMPLEX_DTYPES = ("complex64", "complex128")
DIFF_DTYPES = REAL_DTYPES + COMPLEX_DTYPES  # `symgrad diff` compares in each
CHECK_DTYPES = ("float64", "complex128")  # finite differences need the precision


def default_jobs() -> int:
    """One worker process per core this process may run on."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)

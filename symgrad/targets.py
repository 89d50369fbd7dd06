"""What symgrad's commands choose among: the targets it emits (the registry of backends), their
module suffixes, the dtypes it verifies in, and how many worker processes this machine runs by
default.

Nothing heavy is imported here, so that `symgrad --help` starts at once: a target names the
module of its backend, imported only when something is rendered or verified for it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Target:
    """A framework symgrad emits code for. Its backend module (`symgrad.backends.<name>`)
    defines `render_module(source, ops) -> str`, the generated file's text, and
    `derived_source(op, stand_in) -> source`, how verification obtains the gradient."""

    name: str  # as `--target` takes it
    suffix: str  # of the generated module: `<op file stem><suffix>`
    framework: str | None  # the package the generated code imports, None for numpy alone

    @property
    def backend(self) -> ModuleType:
        return importlib.import_module(f"symgrad.backends.{self.name}")

    @property
    def runtime_module(self) -> str:
        """The module of the target's runtime helpers, written beside its generated modules,
        which import from it: `_symgrad_<suffix>` (`symgrad.runtime_module`)."""
        return "_symgrad" + self.suffix.removesuffix(".py")

    def installed(self) -> bool:
        """Whether this process can import and run the generated code."""
        return self.framework is None or importlib.util.find_spec(self.framework) is not None


REGISTRY = {
    t.name: t
    for t in (
        Target("numpy", "_numpy.py", None),
        Target("tensorflow", "_tf.py", "tensorflow"),
        Target("jax", "_jax.py", "jax"),
        Target("torch", "_torch.py", "torch"),
    )
}
TARGETS = tuple(REGISTRY)
MODULE_SUFFIX = {t.name: t.suffix for t in REGISTRY.values()}

REAL_DTYPES = ("float32", "float64")
COMPLEX_DTYPES = ("complex64", "complex128")
DIFF_DTYPES = REAL_DTYPES + COMPLEX_DTYPES  # `symgrad diff` compares in each
CHECK_DTYPES = ("float64", "complex128")  # finite differences need the precision


def default_jobs() -> int:
    """One worker process per core this process may run on."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)

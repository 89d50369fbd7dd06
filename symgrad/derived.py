"""The ops under test: each declaration with its generated modules, imported for verification.

The modules come from a fresh derivation written to a temporary folder (the default), or
from a folder `symgrad derive` already wrote (`generated=`), which is faster but trusts
that folder to be up to date.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from symgrad.cache import Cache, default_cache_dir
from symgrad.declare import OpDecl
from symgrad.errors import SymgradError
from symgrad.generate import default_jobs, generate
from symgrad.load import check_unique, load_op_file, op_file_paths
from symgrad.render import MODULE_SUFFIX, TARGETS

_import_counter = itertools.count()
_temp_dirs: list[tempfile.TemporaryDirectory] = []  # kept alive while their modules are in use


@dataclass(frozen=True)
class DerivedOp:
    """One declared op and where its generated code lives."""

    decl: OpDecl  # the declaration
    stem: str  # the op file's stem: the generated modules are `<stem>_numpy.py`, `<stem>_tf.py`
    source: str  # the op file as given, for messages and snippets
    folder: Path  # the folder holding the generated modules
    temporary: bool = False  # the folder is a fresh derivation's, deleted at exit

    @property
    def name(self) -> str:
        return self.decl.name

    def module(self, target: str) -> ModuleType:
        """The generated module of `target` ("numpy" or "tensorflow"), imported once."""
        key = (self.folder, self.stem, target)
        if key not in _modules:
            path = self.folder / (self.stem + MODULE_SUFFIX[target])
            if not path.is_file():
                raise SymgradError(
                    f"no generated module {path}: run `symgrad derive {self.source}`"
                )
            _modules[key] = _import(path)
        return _modules[key]

    def function(self, target: str, suffix: str = "") -> Any:
        """The generated function `<func_name><suffix>` of `target`."""
        module = self.module(target)
        name = self.decl.func_name + suffix
        if not hasattr(module, name):
            raise SymgradError(f"{module.__file__} has no function {name}: is it stale?", self.name)
        return getattr(module, name)


_modules: dict[tuple, ModuleType] = {}


def load_derived(
    paths: list[str | Path],
    generated: str | Path | None = None,
    jobs: int | None = None,
    use_cache: bool = True,
) -> list[DerivedOp]:
    """Every op declared under `paths`, with its generated modules, in file and source order.

    Raises:
        SymgradError: an op file fails to load, or (SymgradErrors) to derive.
    """
    op_files = [load_op_file(path) for path in op_file_paths(paths)]
    check_unique([decl for f in op_files for decl in f.ops])
    if generated is None:
        folder = _derive_to_temp(paths, jobs, use_cache)
    else:
        folder = Path(generated)
        if not folder.is_dir():
            raise SymgradError(f"no such folder of generated modules: {folder}")
    return [
        DerivedOp(decl, f.stem, str(f.path), folder, temporary=generated is None)
        for f in op_files
        for decl in f.ops
    ]


def _derive_to_temp(paths, jobs: int | None, use_cache: bool) -> Path:
    cache = Cache(default_cache_dir() if use_cache else None)
    files = generate(list(paths), TARGETS, cache=cache, jobs=jobs or default_jobs())
    temp = tempfile.TemporaryDirectory(prefix="symgrad-derived-")
    _temp_dirs.append(temp)
    folder = Path(temp.name)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def _import(path: Path) -> ModuleType:
    """Import a generated file under a fresh module name (another copy may be imported too)."""
    name = f"_symgrad_derived_{next(_import_counter)}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Variant:
    """One attribute variant of an op under test, with the values its functions are called with."""

    op: DerivedOp  # the op
    values: tuple[tuple[str, Any], ...]  # the enumerated attributes' values (one derivation)
    attrs: dict  # every attribute as passed: enumerated, constant-input and numeric
    inputs: tuple[str, ...]  # tensor input names, in op order
    shapes: tuple[tuple, ...] | None  # symbolic input shapes of an index op; None: elementwise
    outputs: tuple[str, ...]  # output names, in op order
    exprs: tuple  # the outputs' SymPy expressions (for kinks and branch conditions)
    const_positions: tuple[int, ...]  # TensorFlow input positions of constant inputs (an axis)

    @property
    def label(self) -> str:
        """`transpose_a=True, transpose_b=False`; empty for an op without enumerated attributes."""
        return ", ".join(f"{name}={value!r}" for name, value in self.values)

    @property
    def symbols(self) -> dict:
        """Attribute symbol -> the numeric value the variant is called with."""
        return {a.symbol: self.attrs[a.name] for a in self.op.decl.numeric_attrs}


def variants_of(op: DerivedOp) -> list[Variant]:
    """Every enumerated variant of `op`, numeric attributes set to `numeric_value`."""
    from symgrad.declare import instantiate

    decl = op.decl
    numeric = {a.name: numeric_value(a) for a in decl.numeric_attrs}
    consts = tuple(sorted(a.input_position for a in decl.attrs if a.input_position is not None))
    result = []
    for values in decl.variants():
        inst = instantiate(decl, values)
        shapes = None if decl.kind == "elementwise" else tuple(t.shape for t in inst.inputs)
        result.append(
            Variant(
                op,
                values,
                {**{a.name: dict(values)[a.name] for a in decl.parameter_attrs}, **numeric},
                tuple(t.name for t in inst.inputs),
                shapes,
                tuple(o.name for o in inst.outputs),
                tuple(o.expr for o in inst.outputs),
                consts,
            )
        )
    return result


def numeric_value(attr) -> Any:
    """A float attribute is set off its default (so an implementation that ignores it shows),
    to a value exact in float32, the type TensorFlow stores float attributes in."""
    if attr.kind is float:
        import numpy as np

        return float(np.float32(0.75 if attr.default is None else attr.default + 0.05))
    return 2 if attr.default is None else attr.default

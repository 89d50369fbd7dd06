"""The ops under test: each declaration with its generated modules, imported for verification.

The modules come from a folder `symgrad derive` wrote (`--generated`), which trusts that folder
to be up to date, or from a fresh derivation written to a temporary one
(`generate.to_temp_folder`, what the CLI and `symgrad.testing` do by default).
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import itertools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import numpy as np
import sympy as sp

from symgrad.attributes import Ints
from symgrad.declaration import OpDecl
from symgrad.instantiate import instantiate
from symgrad.errors import SymgradError
from symgrad.load import check_unique, load_op_file, op_file_paths
from symgrad.runtime_module import import_generated
from symgrad.targets import MODULE_SUFFIX

_import_counter = itertools.count()


@dataclass(frozen=True)
class DerivedOp:
    """One declared op and where its generated code lives."""

    decl: OpDecl  # the declaration
    stem: str  # the op file's stem: the generated modules are `<stem>_numpy.py`, `<stem>_tf.py`
    source: str  # the op file as given, for messages and snippets
    folder: Path  # the folder holding the generated modules
    temporary: bool = False  # the folder is a fresh derivation's, deleted at exit
    # `check` differences the declaration with its stop_gradient held (`check.held_forward`)
    holds_stop_gradient: ClassVar[bool] = True

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


def load_derived(paths: list[str | Path], generated: str | Path, temporary: bool = False) -> list[DerivedOp]:
    """Every op declared under `paths`, with its generated modules in folder `generated`, in
    file and source order (`temporary`: a fresh derivation's folder, `generate.to_temp_folder`).

    Raises:
        SymgradError: an op file fails to load, or the folder does not exist.
    """
    op_files = [load_op_file(path) for path in op_file_paths(paths)]
    check_unique([decl for f in op_files for decl in f.ops])
    folder = Path(generated)
    if folder.is_file():
        raise SymgradError(f"--generated {folder} is a file: name the folder `symgrad derive -o` wrote to")
    if not folder.is_dir():
        raise SymgradError(f"no such folder of generated modules: {folder}")
    return [DerivedOp(decl, f.stem, str(f.path), folder, temporary=temporary) for f in op_files for decl in f.ops]


def _import(path: Path) -> ModuleType:
    """Import a generated file under a fresh module name (another copy may be imported too),
    leaving no TensorFlow gradient registered by it."""
    name = f"_symgrad_derived_{next(_import_counter)}_{path.stem}"
    tensorflow_module = path.name.endswith(MODULE_SUFFIX["tensorflow"])
    if tensorflow_module:
        import_tf()  # quietly, before the module's own `import tensorflow`
    with _registrations_undone(tensorflow_module):
        return import_generated(path, name)


@contextlib.contextmanager
def _registrations_undone(tensorflow_module: bool):
    """Forget the gradients a TensorFlow module registers (`Symgrad<OpType>`, and the op type
    where TensorFlow has none) as it is imported for verification. Left registered in the
    caller's process (a test suite, a notebook that called `generate`), they would make the
    caller's own import of the written module register nothing (`REGISTERED` empty) and
    `gradient_override_map` call this copy; verification calls the functions directly."""
    if not tensorflow_module:
        yield
        return
    from tensorflow.python.framework import ops as tf_ops  # imports TensorFlow's own first

    registry = tf_ops._gradient_registry._registry
    before = set(registry)
    try:
        yield
    finally:
        for name in set(registry) - before:
            del registry[name]


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
    integers: tuple[str, ...] = ()  # integer inputs (positions, such as Gather's): no gradient
    sizes: tuple = ()  # (index, size) of the output indices declared with their size
    sampled: tuple[tuple[str, Any], ...] = ()  # a further sample value, named in the label
    ascending: tuple[str, ...] = ()  # integer inputs whose positions are in ascending order
    list_output: bool = False  # the outputs are the entries of one list output (Unpack's)
    booleans: tuple[str, ...] = ()  # inputs holding bools (conditions), among `integers`
    listed: int = 0  # the first `listed` inputs are passed as one list (a gradient op's, Unpack's)
    distinct: tuple[str, ...] = ()  # integer inputs whose positions never repeat along the first axis
    tied: tuple = ()  # (name, indices, expression) of each input tied to the others (`equals=`)

    @property
    def fixed(self) -> tuple[str, ...]:
        """Inputs whose gradient is not checked: positions, bools, and tied inputs (their
        derivative at fixed other inputs is not one of the op)."""
        return self.integers + tuple(name for name, _, _ in self.tied)

    @property
    def label(self) -> str:
        """`transpose_a=True, transpose_b=False`; empty for an op without enumerated attributes
        (and a further sample value, `strides=(1, 2, 2, 1)`, where one is tried)."""
        return ", ".join(f"{name}={value!r}" for name, value in self.values + self.sampled)

    @property
    def symbols(self) -> dict:
        """Attribute symbol -> the numeric value the variant is called with."""
        return {a.symbol: self.attrs[a.name] for a in self.op.decl.numeric_attrs}

    def attr_values(self, *exprs) -> dict:
        """Each attribute symbol in `exprs` (`alpha`, `strides[1]`, `paddings[0][1]`) -> its
        value in this variant."""
        found = {}
        for symbol in set().union(*(sp.sympify(e).free_symbols for e in exprs)):
            path = _attr_path(symbol.name)
            if path is not None and path[0] in self.attrs:
                value = self.attrs[path[0]]
                try:
                    for k in path[1:]:
                        value = value[k]
                except (IndexError, TypeError):  # a list shorter than the declaration reads
                    continue
                found[symbol] = value
        return found


def _attr_path(name: str) -> tuple | None:
    """`paddings[0][1]` -> ("paddings", 0, 1); None for a name that is not of that form."""
    match = re.fullmatch(r"(\w+)((?:\[\d+\])*)", name)
    if match is None:
        return None
    return (match.group(1),) + tuple(int(k) for k in re.findall(r"\d+", match.group(2)))


def variants_of(op: DerivedOp) -> list[Variant]:
    """Every enumerated variant of `op`, once per setting of its numeric attributes (see
    `attr_settings`).

    Raises:
        SymgradError: a numeric attribute has no value to be called with.
    """
    return [variant for values in op.decl.variants() for variant in _settings_of(op, values)]


def _settings_of(op: DerivedOp, values: tuple) -> list[Variant]:
    """One enumerated variant, once per setting of its numeric attributes."""
    decl = op.decl
    inst = instantiate(decl, values)
    positions = [a.input_position for a in decl.attrs if a.input_position is not None]
    # a negative position counts from the end (the input after a list input)
    consts = tuple(sorted(p % (len(inst.inputs) + len(positions)) for p in positions))
    shapes = None if decl.kind == "elementwise" else tuple(t.merged_shape for t in inst.inputs)
    sizes = tuple(s for o in inst.outputs for s in o.sizes)
    used = _attrs_read([o.expr for o in inst.outputs] + [size for _, size in sizes] + [d for shape in shapes or () for d in shape])
    enumerated = {a.name: dict(values)[a.name] for a in decl.parameter_attrs}
    result = []
    for sampled, numeric in attr_settings(op, dict(values), used):
        v = Variant(
            op, values, {**enumerated, **numeric}, tuple(t.name for t in inst.inputs), shapes,
            tuple(o.name for o in inst.outputs), tuple(o.expr for o in inst.outputs), consts,
            tuple(t.name for t in inst.inputs if t.integer), sizes, sampled,
            tuple(t.name for t in inst.inputs if t.ascending), inst.outputs[0].list_name is not None,
            booleans=tuple(t.name for t in inst.inputs if t.boolean),
            distinct=tuple(t.name for t in inst.inputs if t.distinct),
            tied=tuple((t.name, *t.equals) for t in inst.inputs if t.equals is not None),
        )
        if shapes is not None:  # an axis declared as a group of sizes (a block size)
            known = lambda d: sp.sympify(d).subs(v.attr_values(d))
            v = dataclasses.replace(v, shapes=tuple(tuple(map(known, shape)) for shape in shapes))
        result.append(v)
    return result


def _attrs_read(exprs) -> set[str]:
    """The names of the attributes whose symbols occur in `exprs`."""
    symbols = set().union(*(sp.sympify(e).free_symbols for e in exprs)) if exprs else set()
    return {path[0] for path in map(_attr_path, (s.name for s in symbols)) if path}


def attr_settings(op: DerivedOp, values: dict, used: set[str]) -> list[tuple[tuple, dict]]:
    """(further sample named, numeric attribute values) per setting a variant is called with:
    every attribute at its first value, then each further sample value of each attribute in
    turn. An attribute's values are its samples where the variant reads it (or it has no
    default), else its default (`explicit_paddings` stays empty unless padding is EXPLICIT)."""
    candidates = {}
    for attr in op.decl.numeric_attrs:
        if attr.samples is not None and (attr.name in used or attr.default is None):
            candidates[attr.name] = _samples(attr, values)
        else:
            candidates[attr.name] = (numeric_value(attr, op.name),)
    base = {name: values_[0] for name, values_ in candidates.items()}
    settings = [((), base)]
    for name, values_ in candidates.items():
        settings += [(((name, value),), {**base, name: value}) for value in values_[1:]]
    return settings


def _samples(attr, values: dict) -> tuple:
    """An attribute's declared samples (a function's, given the enumerated values it takes)."""
    samples = attr.samples
    if callable(samples):
        params = inspect.signature(samples).parameters
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            samples = samples(**values)
        else:
            samples = samples(**{k: v for k, v in values.items() if k in params})
    return tuple(samples)


def numeric_value(attr, op_name: str = "") -> Any:
    """A float attribute is set off its default (so an implementation that ignores it shows),
    to a value exact in float32, the type TensorFlow stores float attributes in; an `Ints(n)`
    attribute without a default is n ones (unit strides); another integer is 2.

    Raises:
        SymgradError: a constant integer input without a default (its values depend on the
            input's shape: declare `samples`).
    """
    if attr.is_float:
        return float(np.float32(0.75 if attr.default is None else attr.default + 0.05))
    if attr.default is not None:
        return attr.default
    if isinstance(attr.use, Ints) and attr.use.length is not None:
        return (1,) * attr.use.length
    if attr.is_list_input:
        raise SymgradError(
            f"no values to verify with for {attr.name!r} (a constant input without a default): "
            f"declare them with samples={{{attr.name!r}: ...}}",
            op_name,
        )
    return 2


def import_tf():
    """TensorFlow, imported quietly."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    return tf

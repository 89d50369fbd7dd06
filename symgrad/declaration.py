"""What a declaration is: an `OpDecl`, as an op file declares it (`declare`), and an
`OpVariant`, the op instantiated for one combination of its enumerated attributes' values
(`instantiate`), with its `TensorInput`s and `Output`s."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable

import sympy as sp

from symgrad.attributes import Attr, AttributeGroups

ELEMENTWISE = "elementwise"
INDEX = "index"


@dataclass(frozen=True)
class Location:
    """Where a declaration sits in its op file, for error messages."""

    file: str  # path of the op file as given
    line: int  # line of the declaration's first decorator

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class OpDecl(AttributeGroups):
    """One declared op, as written; instantiate it per attribute variant with `build`."""

    name: str  # the op type, e.g. "MatMul" (TensorFlow's name when TensorFlow has it)
    func_name: str  # the Python name of the generated functions, e.g. "matmul"
    kind: str  # ELEMENTWISE or INDEX
    attrs: tuple[Attr, ...]  # every attribute, in declaration order
    inputs: tuple[str, ...]  # elementwise input names (index ops name theirs in `tensor()`)
    output_names: tuple[str, ...]  # elementwise output names
    complex_ok: bool  # the op supports complex dtypes: partials are conjugated
    fn: Callable = field(compare=False, repr=False)  # the user's declaration function
    location: Location = field(compare=False)  # where it is declared
    doc: str = ""  # first line of the declaration's docstring
    variadic: str | None = None  # name of the one list input whose length varies by variant
    broadcast_to: str | None = None  # elementwise: the attribute holding the output's shape
    boolean: tuple[str, ...] = ()  # elementwise: the inputs that are bools (conditions)
    scalars: tuple[str, ...] = ()  # elementwise: the inputs that are 0-D
    valid: Callable | None = field(default=None, compare=False, repr=False)  # enumerated attrs -> bool
    output_dtypes: tuple[tuple[str, str], ...] = ()  # (output, "real" | "complex" | a DType attribute)
    real_ok: bool = True  # real dtypes supported (False: `complex="only"`, Real's and Conj's input)
    namesakes: tuple = ()  # (framework, `symgrad.namesakes.Namesake`): what it stands for there

    @property
    def wirtinger(self) -> bool:
        """Whether the gradient is taken by Wirtinger derivatives: an op with an output of a
        dtype of its own, or of complex inputs only (their functions of conj(z), |z|)."""
        return bool(self.output_dtypes) or not self.real_ok

    def variants(self) -> list[tuple[tuple[str, Any], ...]]:
        """Every combination of enumerated attribute values, in a stable order."""
        attrs = self.enumerated_attrs
        combos = [tuple(zip((a.name for a in attrs), combo)) for combo in itertools.product(*(a.values for a in attrs))]
        return [c for c in combos if self.valid is None or self.valid(**dict(c))]


@dataclass(frozen=True)
class TensorInput:
    """An input of one op variant: a scalar symbol (elementwise) or an IndexedBase."""

    name: str  # input name, as the generated code's parameter
    base: Any  # sp.Symbol (elementwise) or sp.IndexedBase with a symbolic shape (index)
    integer: bool = False  # integer positions (a gather's indices) or bools: no gradient
    groups: tuple = ()  # (first axis, count) of the axes of `shape` that one axis of the input is
    ascending: bool = False  # integer positions in ascending order (SegmentSum's segment ids)
    boolean: bool = False  # a condition (SelectV2's): bools, no gradient (`integer` too)
    distinct: bool = False  # integer positions that never repeat along the first axis (TensorScatterUpdate's)
    equals: tuple | None = None  # (indices, expression): the value it must hold, of the other inputs

    @property
    def shape(self) -> tuple | None:
        """The shape the declaration indexes: an axis declared as a group is several axes."""
        return getattr(self.base, "shape", None)

    @property
    def merged_shape(self) -> tuple | None:
        """The input's own shape: each group of axes of `shape` one axis, their sizes' product."""
        if not self.groups:
            return self.shape
        starts, shape, n = dict(self.groups), [], 0
        while n < len(self.shape):
            count = starts.get(n, 1)
            shape.append(sp.Mul(*self.shape[n : n + count]))
            n += count
        return tuple(shape)


@dataclass(frozen=True)
class Output:
    """An output of one op variant."""

    name: str  # output name
    indices: tuple  # free indices in axis order (empty for elementwise)
    expr: sp.Expr  # its value, in terms of the inputs
    sizes: tuple = ()  # (index, size) for indices declared with their axis size
    groups: tuple = ()  # (first position, count) of index groups one output axis enumerates
    list_name: str | None = None  # the list output this is entry `name` of (Unpack's `output`)


@dataclass(frozen=True)
class OpVariant:
    """An op instantiated for one combination of enumerated attribute values."""

    decl: OpDecl  # the declaration it comes from
    attr_values: tuple[tuple[str, Any], ...]  # the enumerated attributes' values
    inputs: tuple[TensorInput, ...]  # inputs in op order
    outputs: tuple[Output, ...]  # outputs in op order
    stages: tuple[Output, ...] = ()  # intermediate tensors declared with `stage()`, in order

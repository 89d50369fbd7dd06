"""Op attributes: where a value comes from, and how the declaration uses it.

Two independent choices, each a small frozen dataclass. Where the value comes from:

| source | the value is |
| --- | --- |
| `Attribute()` (the default) | TensorFlow's op attribute (`op.get_attr(name)`), a keyword parameter of the generated functions; `Attribute(stored_as=...)` where `get_attr` reads it by another name |
| `Input(position)` | the op's input at `position` (negative: counted from the end of `op.inputs`), which TensorFlow passes as a tensor; its gradient is None |
| `RankOf(input)` | the rank of an input; not a parameter |
| `SizeOf(input, axis)` | the static size of one axis of an input (an index depth); not a parameter |
| `LengthOf(input)` | how many tensors the list input has (TensorFlow's `N`, which it infers); not a parameter |

How the declaration uses it:

| use | the declaration function gets |
| --- | --- |
| `Choice(values)` | one of `values`, a derivation each, dispatched on at run time (`bool`: False and True) |
| `Number(type)` | a symbol, the value read at run time (`float` or `int`) |
| `Ints(length)` | `length` symbols (`strides[1]`), or with no length a list indexed as deep as the declaration goes (`paddings[k][0]`), read when the graph is built |
| `Axis(of, values, inserted)` | an axis of input `of` (of the output, one axis longer, with `inserted`), a derivation per negative value; a non-negative axis is made negative at run time. A value may be a tuple of axes |
| `DType()` | a symbol (unused in expressions): a dtype's name read at run time, the dtype of an output (`output_dtypes`) |

`attr(use, source)` makes one. In `attrs={...}` a use alone is the op attribute of that use,
and `bool`, `float`, `int` and a tuple of values are `Choice((False, True))`, `Number(float)`,
`Number(int)` and `Choice(values)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Union

import sympy as sp

from symgrad.errors import DeclarationError


# --- where a value comes from ----------------------------------------------------------------


@dataclass(frozen=True)
class Attribute:
    """TensorFlow's op attribute of the same name; `stored_as` where the op keeps it under
    another (Squeeze is built with `axis`, and `op.get_attr("squeeze_dims")` reads it)."""

    stored_as: str | None = None


@dataclass(frozen=True)
class Input:
    """The op's input at `position` (negative: counted from the end)."""

    position: int


@dataclass(frozen=True)
class RankOf:
    """The rank of input `input`."""

    input: str


@dataclass(frozen=True)
class SizeOf:
    """The size of axis `axis` of input `input`, known when the graph is built."""

    input: str
    axis: int


@dataclass(frozen=True)
class LengthOf:
    """The number of tensors in list input `input` (`op(variadic=...)`)."""

    input: str


Source = Union[Attribute, Input, RankOf, SizeOf, LengthOf]
DERIVED = (RankOf, SizeOf, LengthOf)  # read off the inputs: not a parameter of the generated functions


# --- how the declaration uses it -------------------------------------------------------------


@dataclass(frozen=True)
class Choice:
    """One of `values`: a derivation each."""

    values: tuple


@dataclass(frozen=True)
class Number:
    """A symbol; the value is read at run time."""

    type: type  # float or int


@dataclass(frozen=True)
class Ints:
    """`length` integers, or with no length a (nested) list of them."""

    length: int | None = None


@dataclass(frozen=True)
class Axis:
    """An axis of input `of` (with `inserted`, of the output, one axis longer: a stack's)."""

    of: str
    values: tuple  # negative axes, or tuples of them (a list of axes)
    inserted: bool = False


@dataclass(frozen=True)
class DType:
    """A dtype, by name (`"float64"`, `"complex64"`), read at run time: the dtype of an output
    that `op(output_dtypes={output: name})` names the attribute of (Cast's `DstT`)."""


Use = Union[Choice, Number, Ints, Axis, DType]


@dataclass(frozen=True)
class AttrSpec:
    """What `attr` makes: a use and a source, named by its key in `attrs`."""

    use: Use
    source: Source = Attribute()


def attr(use, source: Source = Attribute()) -> AttrSpec:
    """An attribute: its `use` (`Choice`, `Number`, `Ints`, `Axis`, or the shorthands `bool`,
    `float`, `int`, a tuple of values) and its `source` (`Attribute()`, `Input(position)`,
    `RankOf(input)`, `SizeOf(input, axis)`, `LengthOf(input)`)."""
    return AttrSpec(_as_use(use), source)


def _as_use(kind) -> Use | None:
    if isinstance(kind, (Choice, Number, Ints, Axis, DType)):
        return kind
    if kind is bool:
        return Choice((False, True))
    if kind in (float, int):
        return Number(kind)
    if isinstance(kind, tuple) and kind:
        return Choice(kind)
    return None


# --- an attribute of one op ------------------------------------------------------------------


@dataclass(frozen=True)
class Attr:
    """An op attribute, named as TensorFlow names it; the properties below read its use
    and source for the stages that need one fact of them."""

    name: str
    use: Use
    source: Source = Attribute()
    default: Any = None  # default value in generated signatures (None: required)
    samples: Any = field(default=None, compare=False)  # values to verify with (`op(samples=)`)

    @property
    def stored_name(self) -> str:
        """The name TensorFlow's `op.get_attr` reads it by."""
        return getattr(self.source, "stored_as", None) or self.name

    @property
    def enumerated(self) -> bool:
        return isinstance(self.use, (Choice, Axis))

    @property
    def values(self) -> tuple:
        return tuple(self.use.values)

    @property
    def is_parameter(self) -> bool:
        """Passed by callers (not read off the inputs)."""
        return not isinstance(self.source, DERIVED)

    @property
    def is_float(self) -> bool:
        return isinstance(self.use, Number) and self.use.type is float

    @property
    def is_dtype(self) -> bool:
        return isinstance(self.use, DType)

    @property
    def is_list_input(self) -> bool:
        """A list of integers of no declared length, from an input (Pad's `paddings`)."""
        return isinstance(self.use, Ints) and self.use.length is None

    @property
    def input_position(self) -> int | None:
        return self.source.position if isinstance(self.source, Input) else None

    @property
    def axis_of(self) -> str | None:
        return self.use.of if isinstance(self.use, Axis) else None

    @property
    def axis_inserted(self) -> bool:
        return isinstance(self.use, Axis) and self.use.inserted

    @property
    def rank_of(self) -> str | None:
        """The input whose rank (or, with `size_axis`, whose axis's size) this is."""
        return self.source.input if isinstance(self.source, (RankOf, SizeOf)) else None

    @property
    def size_axis(self) -> int | None:
        return self.source.axis if isinstance(self.source, SizeOf) else None

    @property
    def length_of(self) -> str | None:
        return self.source.input if isinstance(self.source, LengthOf) else None

    @property
    def symbol(self) -> sp.Symbol:
        return sp.Symbol(self.name, real=True)

    @property
    def value_in_declaration(self):
        """What the declaration function is given: a symbol, or symbols for `Ints`."""
        if isinstance(self.use, Ints) and self.use.length is not None:
            return tuple(sp.Symbol(f"{self.name}[{n}]", real=True) for n in range(self.use.length))
        if self.is_list_input:
            return IntSymbols(self.name)
        return self.symbol


class IntSymbols(sp.Symbol):
    """`name[k][m]...`: a symbol that indexes into further symbols, as deep as the declaration
    goes (the value of an `Ints()` input: `paddings[1][0]`)."""

    _iterable = False  # indexable, but not a sequence: SymPy must not iterate it
    __iter__ = None

    def __new__(cls, name: str):
        return super().__new__(cls, name, real=True)

    def __getnewargs_ex__(self):
        return ((self.name,), {})

    def __getitem__(self, k: int) -> "IntSymbols":
        if not isinstance(k, int):
            raise DeclarationError(f"{self.name} is indexed with Python integers, got {k!r}")
        return IntSymbols(f"{self.name}[{k}]")


class AttributeGroups:
    """The groups of an op's attributes that generated code treats alike (a mixin for a class
    with `attrs`, every attribute in declaration order)."""

    @property
    def enumerated_attrs(self) -> tuple[Attr, ...]:
        return tuple(a for a in self.attrs if a.enumerated)

    @property
    def parameter_attrs(self) -> tuple[Attr, ...]:
        """The enumerated attributes callers pass (not those read off the inputs)."""
        return tuple(a for a in self.enumerated_attrs if a.is_parameter)

    @property
    def numeric_attrs(self) -> tuple[Attr, ...]:
        return tuple(a for a in self.attrs if not a.enumerated)


# --- made from a declaration -----------------------------------------------------------------


def make_attrs(op_name, location, attrs: dict, defaults: dict, variadic=None) -> tuple[Attr, ...]:
    """The attributes `attrs` declares (name -> use, or `attr(use, source)`), checked."""
    result = []
    for name, declared in attrs.items():
        spec = declared if isinstance(declared, AttrSpec) else AttrSpec(_as_use(declared))
        problem = _problem(spec, variadic) if spec.use is not None else "is no attribute use"
        if problem:
            raise DeclarationError(f"attribute {name!r} {problem}, got {declared!r}", op_name, location)
        enumerated = isinstance(spec.use, (Choice, Axis))
        default = defaults.get(name, spec.use.values[0] if enumerated else None)
        result.append(Attr(name, spec.use, spec.source, default))
    unknown = sorted(set(defaults) - set(attrs))
    if unknown:
        raise DeclarationError(f"defaults given for undeclared attributes {unknown}", op_name, location)
    return tuple(result)


def _problem(spec: AttrSpec, variadic) -> str | None:
    """What is wrong with `spec`, or None."""
    use, source = spec.use, spec.source
    if isinstance(source, DERIVED) and not isinstance(use, Choice):
        return "read off an input (its rank, a size, a list's length) must be a Choice of values"
    if isinstance(source, LengthOf) and source.input != variadic:
        return f"is the length of {source.input!r}, which names no list input (op(variadic=...): {variadic!r})"
    if isinstance(use, Ints) and use.length is None and not isinstance(source, Input):
        return "is a list of integers of no length: it must come from an input, attr(Ints(), Input(position))"
    if isinstance(use, Number) and use.type not in (float, int):
        return "is a Number of float or int"
    if isinstance(use, Choice) and isinstance(source, Attribute) and not _plain_values(use.values):
        return "must be bool, float, int, a tuple of bools, of strings or of ints, or a use (Choice, Number, Ints, Axis)"
    if isinstance(use, (Choice, Axis)) and not use.values:
        return "has no values"
    return None


def _plain_values(values: tuple) -> bool:
    return any(all(type(v) is kind for v in values) for kind in (bool, str, int))


def with_samples(op_name, location, attrs: tuple[Attr, ...], samples: dict) -> tuple[Attr, ...]:
    """`attrs` with the sample values of `samples` (numeric attributes only)."""
    numeric = {a.name for a in attrs if not a.enumerated}
    unknown = sorted(set(samples) - numeric)
    if unknown:
        raise DeclarationError(
            f"samples given for {unknown}, which are not numeric attributes", op_name, location
        )
    for attr_name, values in samples.items():
        if not callable(values) and not (isinstance(values, (tuple, list)) and values):
            raise DeclarationError(
                f"samples of {attr_name!r} must be a non-empty tuple of values or a function of "
                f"the enumerated attributes, got {values!r}",
                op_name,
                location,
            )
    return tuple(
        replace(a, samples=samples[a.name] if callable(samples[a.name]) else tuple(samples[a.name]))
        if a.name in samples
        else a
        for a in attrs
    )

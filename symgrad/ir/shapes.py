"""Integer values: sizes, ranks, axes made negative, index arithmetic, merged and split axes."""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from symgrad.ir.arrays import Elementwise

@dataclass(frozen=True)
class DimSize:
    """The size of one axis of a variable, as a number of the variable's dtype."""

    x: str  # variable
    axis: int  # negative: counted from the last

    def __str__(self) -> str:
        return f"shape({self.x})[{self.axis}]"


@dataclass(frozen=True)
class NegativeAxis:
    """An axis of `x` counted from the last: `axis - rank(x)` when `axis` is non-negative."""

    axis: str  # variable holding the axis
    x: str  # variable whose rank counts
    inserted: bool = False  # an axis of a result with one axis more than `x` (Pack's)

    def __str__(self) -> str:
        return f"negative_axis({self.axis}, rank({self.x}){' + 1' if self.inserted else ''})"


@dataclass(frozen=True)
class NegativeAxes:
    """A list of axes of `x` as a sorted tuple, each counted from the last (ReverseV2's)."""

    axes: str  # variable holding the list
    x: str  # variable whose rank counts

    def __str__(self) -> str:
        return f"sorted_negative_axes({self.axes}, rank({self.x}))"


@dataclass(frozen=True)
class AsTuple:
    """A constant list input as a tuple of ints, to compare with declared values (a perm)."""

    x: str  # variable holding the list

    def __str__(self) -> str:
        return f"tuple({self.x})"


@dataclass(frozen=True)
class IntArray:
    """A constant integer list input (nested) as an integer array, for index arithmetic."""

    x: str  # variable holding the list

    def __str__(self) -> str:
        return f"int_array({self.x})"


@dataclass(frozen=True)
class Length:
    """The number of tensors in a list input, as a Python integer (TensorFlow's `N`)."""

    x: str  # variable holding the list

    def __str__(self) -> str:
        return f"len({self.x})"


@dataclass(frozen=True)
class Rank:
    """The number of axes of a variable, or the size of its axis `axis` known when the graph is
    built, as a Python integer (dispatch on an input's rank, on an index depth)."""

    x: str  # variable
    axis: int | None = None  # None: the rank

    def __str__(self) -> str:
        return f"rank({self.x})" if self.axis is None else f"static_size({self.x}, {self.axis})"


@dataclass(frozen=True)
class IntSize:
    """The size of one axis of a variable, as an integer (for index arithmetic)."""

    x: str  # variable
    axis: int  # negative: counted from the last

    def __str__(self) -> str:
        return f"int_shape({self.x})[{self.axis}]"


@dataclass(frozen=True)
class IndexArith:
    """An integer expression over integer variables and attributes: positions and sizes.
    `floor(a/b)` is integer division; `exact_div(m, c)` is `m // c` where c divides m, else -1."""

    expr: sp.Expr  # symbols name integer variables or attributes

    def __str__(self) -> str:
        return f"int({self.expr})"


@dataclass(frozen=True)
class Arange:
    """0, 1, ..., n - 1 as integers, n held by an integer variable."""

    n: str  # variable

    def __str__(self) -> str:
        return f"arange({self.n})"


class axis_size(sp.Function):
    """The size of axis `axis` (negative) of variable `x`, as an integer known when the code
    is traced where the backend knows it: `axis_size(Symbol(x), axis)`."""

    is_integer = True
    is_positive = True


@dataclass(frozen=True)
class MergeAxes:
    """`x` (broadcast to `sizes` first if it lacks axes) with each group of adjacent axes
    merged into one, row-major: an output axis that enumerates several indices."""

    x: str | Elementwise  # what is reshaped
    sizes: tuple[str, ...]  # integer variables: the size of each axis before merging
    groups: tuple[tuple[int, int], ...]  # (first axis, count) of each group merged
    broadcast: bool = False  # x has size-1 axes where `sizes` has others
    leading: bool = False  # `sizes` are of x's last axes only; those before them are kept

    def __str__(self) -> str:
        leading = ", leading" if self.leading else ""
        return f"merge_axes({self.x}, sizes={self.sizes}, groups={self.groups}{leading})"


@dataclass(frozen=True)
class SplitAxis:
    """The adjoint layout of `MergeAxes`: axis `axis` of `x` split row-major into axes of
    sizes `outer`, one inferred from the axis's size, and `inner` (the upstream gradient of a
    merged output axis, an input axis declared as a group)."""

    x: str  # variable
    axis: int  # negative: counted from the last
    inner: tuple[str, ...]  # integer variables: the sizes of the axes after the inferred one
    outer: tuple[str, ...] = ()  # integer variables: the sizes of the axes before it

    def __str__(self) -> str:
        outer = f", outer={self.outer}" if self.outer else ""
        return f"split_axis({self.x}, axis={self.axis}, inner={self.inner}{outer})"

"""Values that read arrays at positions or through windows: gathers, scatter-adds, convolutions,
max-pooling's backprop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sympy as sp


@dataclass(frozen=True)
class Gather:
    """`x` read along `axis` at integer `positions`, whose axes take that axis's place;
    positions outside the axis read as `fill` (padding): an affine or indirect index map."""

    x: str  # variable read
    positions: str  # integer variable
    axis: int  # negative: counted from the last
    fill: Any = 0  # what a position outside reads: 0, or -oo for a window's maximum

    def __str__(self) -> str:
        fill = f", fill={self.fill}" if self.fill != 0 else ""
        return f"gather({self.x}, {self.positions}, axis={self.axis}{fill})"


@dataclass(frozen=True)
class ScatterAdd:
    """The adjoint of `Gather`: the axes of `values` that `positions` has (those before the
    last `trailing`) are summed into `size` slots at `positions` (outside 0..size-1: dropped);
    or, of `kind` "max" or "min", reduced to their maximum or minimum there (a segment's, the
    dtype's lowest or highest value where no position names a slot), of kind "prod" to their
    product (1 where none). Of kind "rows", a sum as
    "add" that is a whole gradient at positions an input gives (a gather's): TensorFlow keeps
    it as the rows and their positions, an `IndexedSlices`, as its own gather gradient."""

    values: str  # variable
    positions: str  # integer variable
    trailing: int  # how many axes of `values` follow the positions' axes
    size: str  # integer variable: how many slots
    kind: str = "add"  # "add", "rows", "max", "min" or "prod"

    def __str__(self) -> str:
        return f"scatter_{self.kind}({self.values}, {self.positions}, trailing={self.trailing}, size={self.size})"


@dataclass(frozen=True)
class Convolution:
    """A channels-last convolution kernel (`symgrad.conv_kernels`): "conv" (input, filter),
    "conv_backprop_filter" (input, upstream) or "conv_backprop_input" (upstream, filter), and
    their "depthwise_" namesakes (channel pair `c, m` as two axes of the result, upstream)."""

    kind: str  # a `symgrad.conv_kernels.KERNELS` name
    operands: tuple[str, str]  # variables, in the kernel's order
    strides: tuple[sp.Expr, ...]  # per spatial axis: integer expressions of attributes
    dilations: tuple[sp.Expr, ...]  # likewise
    pads: tuple[sp.Expr, ...]  # padding before each spatial axis, over `axis_size`s
    sizes: tuple[sp.Expr, ...]  # the result's spatial sizes, over `axis_size`s

    def __str__(self) -> str:
        geometry = f"strides={self.strides}, dilations={self.dilations}, pads={self.pads}"
        return f"{self.kind}({', '.join(self.operands)}, {geometry}, sizes={self.sizes})"


@dataclass(frozen=True)
class MaxPoolBackprop:
    """`dx[n, *h, c]`: each window's upstream gradient `grad[n, *u, c]` added at the first
    entry (row-major) of window u of `input` equal to its maximum `output[n, *u, c]`, windows
    read at `u*s + k - p` with padding never the maximum (`symgrad.lowering.pooling`)."""

    input: str  # variables
    output: str
    grad: str
    window: tuple[sp.Expr, ...]  # per spatial axis: the window's size, an integer expression
    strides: tuple[sp.Expr, ...]  # likewise
    pads: tuple[sp.Expr, ...]  # padding before each spatial axis, over `axis_size`s
    sizes: tuple[sp.Expr, ...]  # the result's spatial sizes (the input's), over `axis_size`s

    @property
    def operands(self) -> tuple[str, str, str]:
        return self.input, self.output, self.grad

    def __str__(self) -> str:
        geometry = f"window={self.window}, strides={self.strides}, pads={self.pads}, sizes={self.sizes}"
        return f"max_pool_backprop({', '.join(self.operands)}, {geometry})"

"""A Sum of two tensor entries that a convolution kernel computes (`conv_kernels`), as it.
"""

from __future__ import annotations

import sympy as sp

from symgrad.conv_kernels import find_convolution
from symgrad.ir import Convolution, axis_size
from symgrad.lowering.symbols import free_indices, is_index, sizes_in, whole_axes


def convolution(lowering, expr: sp.Sum, axes) -> sp.Expr | None:
    """A sum of two tensor entries that a convolution kernel computes (`conv_kernels`),
    over whole axes, as that kernel: no window is gathered."""
    coefficient, entries = sp.S.One, []
    for factor in sp.Mul.make_args(expr.function):
        if isinstance(factor, sp.Indexed):
            entries.append(factor)
        elif free_indices(factor) or factor.has(sp.Indexed):
            return None
        else:
            coefficient *= factor
    out = tuple(a for a in axes if a in free_indices(expr))
    ranges = {**lowering.ranges, **{lim[0]: (lim[1], lim[2]) for lim in expr.limits}}
    found = find_convolution(entries, out, tuple(lim[0] for lim in expr.limits), is_index)
    if found is None or not all(whole_axes(entry, ranges) for entry in found.operands):
        return None
    spatial = found.result_spatial()
    if any(ranges[i][0] != 0 for i in spatial) or not _sizes_known(lowering, found, spatial, ranges):
        return None
    static = lambda expr: static_sizes(lowering, expr)
    name = lowering.temp(
        Convolution(
            found.kernel.name,
            tuple(str(entry.base.label) for entry in found.operands),
            tuple(static(s) for s in found.strides),
            tuple(static(d) for d in found.dilations),
            tuple(static(p) for p in found.pads),
            tuple(static(ranges[i][1] + 1) for i in spatial),
        )
    )
    return lowering.scalar(coefficient) * sp.Symbol(lowering.expand(name, out, axes))


def _sizes_known(lowering, found, spatial, ranges) -> bool:
    return sizes_known(lowering, (*found.strides, *found.dilations, *found.pads, *(ranges[i][1] for i in spatial)))


def sizes_known(lowering, exprs) -> bool:
    """Whether every dimension size in `exprs` (a kernel's geometry) can be read from an array."""
    return all(d in lowering.dims for e in exprs for d in sizes_in(sp.sympify(e)))


def static_sizes(lowering, expr) -> sp.Expr:
    """`expr` with each dimension size read from an array's shape as `axis_size`."""
    expr = sp.sympify(expr)
    return expr.xreplace({d: axis_size(sp.Symbol(lowering.dims[d][0]), lowering.dims[d][1]) for d in sizes_in(expr)})

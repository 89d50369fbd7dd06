"""A window's gradient routed to its first maximum and summed into the input, as a pooling
kernel computes it (TensorFlow's MaxPoolGrad, in 2-D), never as gathered windows and scans.

Channels last, per spatial axis m a window read `x[n, *(u*s + k - p), c]`:

    dx[n, *h, c] = sum(delta(h, u*s + k - p) * g[n, *u, c] * first_attained(x[...] == y[n, *u, c]), u, k)

where `first_attained` (`symgrad.functions`) marks the first entry of window u, in row-major
order of k, equal to the window's maximum y. As in `symgrad.conv_kernels`, the sum is matched
by what it computes, never by the op it comes from.
"""

from __future__ import annotations

import sympy as sp

from symgrad.functions import indicator_equal, read_outside
from symgrad.extrema import first_attained
from symgrad.ir import MaxPoolBackprop
from symgrad.lowering.convolution import sizes_known, static_sizes
from symgrad.lowering.symbols import free_indices, is_index, whole_axes

SPATIAL_AXES = (2, 3)  # 2-D and 3-D pooling


def max_pool_backprop(lowering, expr: sp.Sum, axes) -> sp.Expr | None:
    """The sum above over whole axes, as the pooling kernel; else None."""
    parts = _parts(expr.function)
    if parts is None:
        return None
    coefficient, deltas, grad, marker = parts
    x, y = _window_read(marker)
    if x is None or y.indices != grad.indices or len(x.indices) - 2 not in SPATIAL_AXES:
        return None
    if (x.indices[0], x.indices[-1]) != (y.indices[0], y.indices[-1]):  # batch and channel kept
        return None
    out = (x.indices[0], *(_delta_axis(deltas, e) for e in x.indices[1:-1]), x.indices[-1])
    if None in out or tuple(a for a in axes if a in out) != out:
        return None
    ranges = {**lowering.ranges, **{lim[0]: (lim[1], lim[2]) for lim in expr.limits}}
    windows = [_window(e, u, ranges) for e, u in zip(x.indices[1:-1], y.indices[1:-1])]
    if None in windows or set(expr.variables) != {i for w in windows for i in w[:2]}:
        return None
    if not all(whole_axes(entry, ranges) for entry in (grad, y)) or not sizes_known(lowering, [e for w in windows for e in w[2:]]):
        return None
    static = lambda e: static_sizes(lowering, e)
    name = lowering.temp(
        MaxPoolBackprop(
            str(x.base.label),
            str(y.base.label),
            str(grad.base.label),
            tuple(static(w[2]) for w in windows),
            tuple(static(w[3]) for w in windows),
            tuple(static(w[4]) for w in windows),
            tuple(static(ranges[h][1] + 1) for h in out[1:-1]),
        )
    )
    return lowering.scalar(coefficient) * sp.Symbol(lowering.expand(name, out, axes))


def _parts(function) -> tuple | None:
    """(constant coefficient, deltas, upstream entry, first_attained marker) of the summand,
    or None when it holds anything else."""
    coefficient, deltas, entries, markers = sp.S.One, [], [], []
    for factor in sp.Mul.make_args(function):
        if isinstance(factor, sp.KroneckerDelta):
            deltas.append(factor)
        elif isinstance(factor, sp.Indexed):
            entries.append(factor)
        elif isinstance(factor, first_attained):
            markers.append(factor)
        elif free_indices(factor) or factor.has(sp.Indexed):
            return None
        else:
            coefficient *= factor
    if len(deltas) not in SPATIAL_AXES or len(entries) != 1 or len(markers) != 1:
        return None
    return coefficient, deltas, entries[0], markers[0]


def _window_read(marker: first_attained) -> tuple:
    """(x's windowed entry, the maximum's entry y) of `x[...] == y` padded with -oo, else (None, None)."""
    attained = marker.attained
    if not isinstance(attained, indicator_equal):
        return None, None
    read, y = attained.args
    if not (isinstance(read, read_outside) and read.args[1] == -sp.oo and isinstance(y, sp.Indexed)):
        return None, None
    x = read.args[0]
    return (x, y) if isinstance(x, sp.Indexed) else (None, None)


def _delta_axis(deltas, subscript):
    """The axis h of `delta(h, subscript)` among `deltas`, else None."""
    for delta in deltas:
        for h, positions in (delta.args, delta.args[::-1]):
            if is_index(h) and sp.expand(positions - subscript) == 0:  # spelled alike or not
                return h
    return None


def _window(subscript, u, ranges) -> tuple | None:
    """(u, k, window size, stride, padding) of `u*s + k - p` with k from 0, else None."""
    others = free_indices(subscript) - {u}
    if len(others) != 1:
        return None
    k = others.pop()
    stride, step = sp.diff(subscript, u), sp.diff(subscript, k)
    if step != 1 or free_indices(stride):
        return None
    pad = -subscript.xreplace({u: 0, k: 0})
    if free_indices(pad) or ranges.get(k, (None,))[0] != 0 or ranges.get(u, (None,))[0] != 0:
        return None
    return u, k, ranges[k][1] + 1, stride, pad

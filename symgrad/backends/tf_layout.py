"""TensorFlow's attribute conventions, read in plain Python for the reference tables of other
frameworks (`symgrad.backends.torch.functions`, `symgrad.backends.jax.functions`): the
spatial entries of an NHWC attribute, SAME and EXPLICIT padding as (before, after) pairs, and
attribute values PyTorch's or JAX's function cannot express; and the tables' elementwise
entries."""

from __future__ import annotations

import math

import numpy as np


def expressible(ok: bool, message: str) -> None:
    """Raise NotImplementedError (the case is skipped, not failed) unless `ok`."""
    if not ok:
        raise NotImplementedError(message)


def of_inputs(functions: dict, count: int) -> dict:
    """Table entries of elementwise functions (`torch.sin`, `jnp.add`): each takes the numpy
    forward's `count` inputs, positionally, and no attribute (which the function may accept as
    a keyword it means otherwise)."""
    wrap = (lambda fn: lambda x: fn(x)) if count == 1 else (lambda fn: lambda x, y: fn(x, y))
    return {op: wrap(fn) for op, fn in functions.items()}


def ints(values) -> tuple[int, ...]:
    """An attribute (a number, a list, a nested list, an array) as a flat tuple of ints."""
    return tuple(int(v) for v in np.asarray(values).reshape(-1))


def spatial(values, name: str, op: str) -> tuple[int, ...]:
    """The spatial entries of an NHWC (NDHWC) attribute; batch and channel entries must be 1."""
    values = ints(values)
    expressible(values[0] == values[-1] == 1, f"{op}: no {name} over batch or channels, got {values}")
    return values[1:-1]


def tf_pads(sizes, kernels, strides, dilations, padding: str, explicit=None) -> list[tuple[int, int]]:
    """(before, after) per spatial axis, as TensorFlow pads: SAME puts the odd one after."""
    if padding == "EXPLICIT":  # Conv2D's explicit_paddings: (before, after) per NHWC axis
        return [ints(explicit[k : k + 2]) for k in (2, 4)]
    pads = []
    for size, kernel, stride, dilation in zip(sizes, kernels, strides, dilations):
        reach = dilation * (kernel - 1) + 1
        total = max((math.ceil(size / stride) - 1) * stride + reach - size, 0)
        pads.append((total // 2, total - total // 2) if padding == "SAME" else (0, 0))
    return pads


def split_sizes(sizes, total: int) -> list[int]:
    """SplitV's `size_splits`, the one -1 given the rest of the axis' `total` entries."""
    sizes = list(ints(sizes))
    if -1 in sizes:
        sizes[sizes.index(-1)] = total - sum(s for s in sizes if s != -1)
    return sizes


def slice_ends(begin, size, shape, op: str = "Slice") -> list[int]:
    """Slice's end per axis (`size` -1: to the end); ValueError where TensorFlow rejects it."""
    begin = ints(begin)
    ends = [n if s == -1 else b + s for b, s, n in zip(begin, ints(size), shape)]
    if any(b < 0 or e < b or e > n for b, e, n in zip(begin, ends, shape)):
        raise ValueError(f"{op}: begin={list(begin)}, size={size} reach outside {tuple(shape)}")
    return ends


def single_diagonal(k, op: str) -> int:
    """The one diagonal `k` names (a single diagonal has no padding, so `padding_value` and
    `align` never apply); a band of diagonals has no function of its own in the frameworks."""
    ks = set(ints(k))
    expressible(len(ks) == 1, f"{op}: one diagonal at a time, got k={k}")
    return ks.pop()

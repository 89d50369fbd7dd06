"""Integer inputs (positions) drawn for verification: each within the size of the axis it
indexes, the first repeated (repeated positions accumulate), and, for an input declared
`distinct`, no two rows equal, the sizes bounding them grown until they fit with one to spare.
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from symgrad.declare import BATCH_DIM
from symgrad.verify.ops_under_test import Variant
from symgrad.verify.shapes import concrete_shapes, size_of


def position_bounds(variant: Variant) -> dict[str, sp.Expr]:
    """Integer input -> the size of the axis its values index: the axis of the tensor whose
    subscript it is (Gather's), or the output axis it is compared with (a segment id, in
    `KroneckerDelta(s, segment_ids[i])` with `s` sized `num_segments`, or as the tensor axis
    it subscripts: TensorScatterAdd's `KroneckerDelta(n, indices[i, 0])` with `tensor[n, p]`)."""
    sized = _index_sizes(variant)
    found: dict[str, sp.Expr] = {}
    within = lambda name, size: sp.Min(found[name], size) if name in found else size
    for expr in variant.exprs:
        for entry in expr.atoms(sp.Indexed):
            for axis, subscript in enumerate(entry.indices):
                for name in _integers_read(variant, subscript):  # within every axis it indexes
                    found[name] = within(name, entry.base.shape[axis])
        for delta in expr.atoms(sp.KroneckerDelta):
            for this, other in (delta.args, delta.args[::-1]):
                for name in _integers_read(variant, this):
                    if other in sized:
                        found[name] = within(name, sized[other])
    return found


def _index_sizes(variant: Variant) -> dict:
    """Index -> its size: declared with the output, else that of a tensor axis it subscripts."""
    sized = dict(variant.sizes)
    for expr in variant.exprs:
        for entry in sorted(expr.atoms(sp.Indexed), key=str):
            shape = getattr(entry.base, "shape", None) or ()
            for axis, subscript in enumerate(entry.indices):
                if subscript.is_Symbol and axis < len(shape):
                    sized.setdefault(subscript, shape[axis])
    return sized


def _integers_read(variant: Variant, expr) -> list[str]:
    names = {str(e.base.label) for e in sp.sympify(expr).atoms(sp.Indexed)}
    return [n for n in variant.integers if n in names]


def positions(rng, shape: tuple, size: int, distinct: bool = False) -> np.ndarray:
    """int32 positions in [0, size), the first repeated (repeated positions accumulate); or,
    `distinct`, no two slices along the first axis equal (each row of a (K, depth) tensor one
    position): K of the size**depth positions, drawn without replacement."""
    if distinct and shape:
        rows, depth = shape[0], int(np.prod(shape[1:]))
        chosen = rng.choice(max(size, 1) ** depth, rows, replace=False)
        digits = [(chosen // max(size, 1) ** d) % max(size, 1) for d in reversed(range(depth))]
        return np.stack(digits, axis=-1).reshape(shape).astype(np.int32)
    values = rng.integers(0, max(size, 1), shape).astype(np.int32)
    if values.size > 1:
        values.flat[1] = values.flat[0]
    return values


def with_distinct_room(variant: Variant, config: tuple) -> tuple | None:
    """A shape config (label, shapes, sizes) whose `distinct` inputs have room: K rows of
    depth d need K positions of the size**d within the axes they index, and one more left
    untouched where K > 1 (TensorScatterUpdate then keeps an entry of `tensor`). The sizes
    that bound the positions grow until they have; None where they cannot."""
    label, shapes, sizes = config
    if not variant.distinct:
        return config
    sizing = label.split(":")[0]
    bounds = position_bounds(variant)
    for _ in range(64):
        short = [
            name for name, shape in zip(variant.inputs, shapes)
            if name in variant.distinct and shape
            and bound(variant, bounds, name, sizes) ** int(np.prod(shape[1:])) < shape[0] + (shape[0] > 1)
        ]
        if not short:
            return label, shapes, sizes
        grow = {d for name in short for d in sp.sympify(bounds.get(name, 2)).free_symbols if d in sizes}
        if not grow or any(shape and shape[0] == BATCH_DIM for shape in variant.shapes):
            return None  # (batch axes: the config's are not regrown)
        sizes = {**sizes, **{d: sizes[d] + 1 for d in grow}}
        shapes = concrete_shapes(variant, sizes)
        label = f"{sizing}, room for distinct positions: {', '.join(map(str, shapes))}"
    return None


def bound(variant: Variant, bounds: dict, name: str, sizes: dict) -> int:
    """The number of positions integer input `name` holds values in, at `sizes`."""
    size = bounds.get(name, 2)
    size = size_of(sp.sympify(size).subs(variant.attr_values(size)), sizes)
    return int(size) if np.isfinite(size) else 2

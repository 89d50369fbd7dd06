"""The shapes an op's cases take: a size per dimension symbol (distinct, equal, all 1) grown
until each declared output size is at least 2, leading batch axes, and for elementwise ops
shapes that broadcast."""

from __future__ import annotations

import itertools

import numpy as np
import sympy as sp

from symgrad.declare import BATCH_DIM
from symgrad.verify.ops_under_test import Variant


def broadcast_shapes(names: tuple[str, ...]) -> list[tuple[str, list[tuple]]]:
    """(label, a shape per input) for inputs that broadcast: equal, crossed, a scalar, size 1."""
    n = len(names)
    if n == 1:
        return [("(2, 3)", [(2, 3)]), ("() (a scalar)", [()]), ("(1,)", [(1,)])]
    cases = [("all (2, 3)", [(2, 3)] * n)]
    crossed = [(3, 1) if k % 2 == 0 else (1, 4) for k in range(n)]
    cases.append((" x ".join(map(str, crossed)), crossed))
    for k, name in enumerate(names):
        cases.append(
            (f"{name} a scalar, others (2, 3)", [() if m == k else (2, 3) for m in range(n)])
        )
    cases.append(("all (1,)", [(1,)] * n))
    return cases


def shapes_broadcasting_to(shape: tuple) -> list[tuple]:
    """`shape` itself, then with each axis 1 in turn, all axes 1, fewer leading axes, a scalar."""
    found = [shape] + [shape[:k] + (1,) + shape[k + 1 :] for k in range(len(shape))]
    found += [(1,) * len(shape)] + [shape[k:] for k in range(1, len(shape))] + [(1,) + shape[-1:], ()]
    return list(dict.fromkeys(found))


def shape_configs(variant: Variant) -> list[tuple[str, list[tuple], dict]]:
    """(label, concrete input shapes, dimension sizes) per choice of dimension sizes and batch
    axes; sizes are grown until declared output sizes (a convolution's) are at least 2, or 1
    where they cannot grow, and a choice where one stays below 1 is left out."""
    outputs = _output_sizes(variant)
    symbols = _dimension_symbols(variant, outputs)
    batched = [k for k, shape in enumerate(variant.shapes) if shape and shape[0] == BATCH_DIM]
    one_batch = (
        [(2, 3)]
        if len(batched) == 1
        else [(2, 1) if m % 2 == 0 else (3,) for m in range(len(batched))]
    )
    sizings = [
        ("distinct sizes", {s: 2 + n for n, s in enumerate(symbols)}, 2),
        ("equal sizes", {s: 3 for s in symbols}, 2),
        ("sizes 1", {s: 1 for s in symbols}, 1),
    ]
    batches = [("", [()] * len(batched))]
    if batched:
        batches += [("batch (2,)", [(2,)] * len(batched)), ("batch broadcast", one_batch)]
    configs = []
    for (size_label, sizes, least), (batch_label, batch) in itertools.product(sizings, batches):
        if batch_label and size_label != "distinct sizes":
            continue
        sizes = _fitted(outputs, sizes, least)
        batch = dict(zip(batched, batch))
        shapes = None if sizes is None else _concrete(variant.shapes, sizes, batch)
        if shapes is not None:
            text = ", ".join(map(str, shapes))
            configs.append(
                (f"{size_label}{', ' + batch_label if batch_label else ''}: {text}", shapes, sizes)
            )
    return configs


def _dimension_symbols(variant: Variant, outputs: list) -> list:
    """The dimension symbols of the input shapes, in order of appearance, except that those
    whose growth shrinks an output (a kernel's size) come first: they get the small sizes."""
    symbols = []
    for shape in variant.shapes:
        for dim in shape:
            for s in sorted(sp.sympify(dim).free_symbols - {BATCH_DIM}, key=str):
                if s not in symbols:
                    symbols.append(s)
    sizes = {s: 2 + n for n, s in enumerate(symbols)}
    shrinking = [
        s
        for s in symbols
        if any(size_of(e, {**sizes, s: sizes[s] + 4}) < size_of(e, sizes) for e in outputs)
    ]
    return shrinking + [s for s in symbols if s not in shrinking]


def _output_sizes(variant: Variant) -> list:
    """The declared output sizes with the variant's attribute values in them; not a size
    declared as a constant number (FusedBatchNormV3's empty reserve_space_3, of size 0),
    which no shape of the inputs changes."""
    sizes = [_replaced(size, variant.attr_values(size)) for _, size in variant.sizes]
    return [size for size in sizes if not sp.sympify(size).is_number]


def size_of(expr, sizes: dict) -> float:
    """An output size at `sizes` (infinite where it does not evaluate to a number)."""
    value = _replaced(expr, sizes)
    return float(value) if value.is_number and value.is_finite is not False else np.inf


def _replaced(expr, values: dict) -> sp.Expr:
    """`expr` with symbols replaced by numbers: what `subs` gives, ten times faster."""
    return sp.sympify(expr).xreplace({s: sp.sympify(v) for s, v in values.items()})


def _fitted(outputs: list, sizes: dict, least: int) -> dict | None:
    """`sizes` with the dimensions grown, one step at a time, that let a declared output size
    (of `outputs`) below `least` grow; None if an output size stays below 1."""
    for _ in range(64):
        short = [e for e in outputs if size_of(e, sizes) < least]
        # a size that grows within four steps (a stride's floor), or at the next one (an
        # exact division, -1 where it does not divide: SpaceToBatchND's)
        grows = lambda s: any(size_of(e, {**sizes, s: sizes[s] + k}) > size_of(e, sizes) for e in short for k in (1, 4))
        grow = [s for s in sizes if grows(s)]
        if not grow:
            break
        sizes = {**sizes, **{s: sizes[s] + 1 for s in grow}}
    return sizes if all(size_of(e, sizes) >= 1 for e in outputs) else None


def _concrete(shapes, sizes: dict, batch: dict) -> list[tuple] | None:
    """Input shapes with `sizes` substituted; None when a dimension is not a positive integer."""
    result = []
    for k, shape in enumerate(shapes):
        lead, rest = (
            (tuple(batch[k]), shape[1:]) if shape and shape[0] == BATCH_DIM else ((), shape)
        )
        dims = [_replaced(d, sizes) for d in rest]
        if not all(d.is_Integer and d > 0 for d in dims):
            return None
        result.append(lead + tuple(int(d) for d in dims))
    return result


def concrete_shapes(variant: Variant, sizes: dict) -> list[tuple] | None:
    """The input shapes at `sizes`, without batch axes."""
    return _concrete(variant.shapes, sizes, {})

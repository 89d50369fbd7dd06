"""Check an index-summation variant against its declared shapes and find every index's range."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import sympy as sp
from sympy.concrete.expr_with_limits import ExprWithLimits

from symgrad.declaration import OpVariant
from symgrad.declare import BATCH_DIM
from symgrad.errors import DeclarationError
from symgrad.extrema import Position
from symgrad.functions import at_position
from symgrad.integers import computed_position

Range = tuple[sp.Expr, sp.Expr]  # inclusive (lowest, highest)


def index_ranges(variant: OpVariant) -> dict[sp.Symbol, Range]:
    """The range of every free output index and every summation index of `variant`.

    Raises:
        DeclarationError: an unknown tensor, an index without a range, a Sum range that
            disagrees with a tensor's shape, or free indices that differ from those declared.
    """
    inputs = {t.name: t for t in variant.inputs}
    ranges: dict[sp.Symbol, Range] = {}
    for out in variant.outputs:
        _check_position_dtype(variant, out)
        uses = list(_subscript_uses(out.expr, {}))
        _check_tensors(variant, inputs, uses)
        _check_free_indices(variant, out, uses)
        declared_sizes = dict(out.sizes)
        for index in out.indices:
            if index in declared_sizes:
                _set_range(variant, ranges, index, (sp.S.Zero, declared_sizes[index] - 1), out)
            elif isinstance(index, sp.Symbol):  # a literal 0 is a kept size-1 axis
                _set_range(variant, ranges, index, _free_range(variant, out, index, uses), out)
        for base, axis, sub, bound in uses:
            if sub in bound:
                _check_sum_range(variant, base, axis, sub, bound[sub])
                _set_range(variant, ranges, sub, bound[sub], out)
            elif not isinstance(sub, sp.Symbol):  # affine or indirect: zero outside the tensor
                _check_index_map(variant, base, sub)
                ranges.update({s: rng for s, rng in bound.items() if sub.has(s)})
    return ranges


def _set_range(variant, ranges: dict, index, rng: Range, out) -> None:
    """`ranges[index] = rng`, unless another output gave `index` another range: an index has
    one range in an op, so each output of another size names its own."""
    old = ranges.setdefault(index, rng)
    if old is not rng and any(sp.simplify(a - b) != 0 for a, b in zip(old, rng)):
        _fail(
            variant,
            f"index {index} ranges over {old[0]}..{old[1]} in one output and {rng[0]}..{rng[1]} in "
            f"output {out.name!r}: an index has one range, so name one per size",
        )


def _check_index_map(variant, base, sub) -> None:
    """An affine subscript (`i*s + k - p`, integer coefficients and offsets) or an entry of
    an integer tensor (a gather), or a position computed otherwise (a `computed_position`:
    read by a gather, scattered by its adjoint)."""
    if isinstance(sub, (sp.Indexed, computed_position)):
        return
    for index in index_symbols(sub):
        coefficient = sp.diff(sub, index)
        if index_symbols(coefficient):
            _fail(variant, f"subscript {sub} of {base.label} is not affine in {index}")


def _subscript_uses(expr, bound: dict) -> Iterator[tuple]:
    """(tensor, axis, subscript, ranges of the enclosing Sums) for each Indexed in `expr`."""
    if isinstance(expr, ExprWithLimits):  # Sum, Product, maximum, minimum
        inner = dict(bound)
        for limit in expr.limits:
            inner[limit[0]] = (limit[1], limit[2])
        yield from _subscript_uses(expr.function, inner)
    elif isinstance(expr, at_position):  # binds its index over its range, as a Sum would
        value, index, position, low, high = expr.args
        yield from _subscript_uses(value, {**bound, index: (low, high)})
        yield from _subscript_uses(position, bound)
    elif isinstance(expr, sp.Indexed):
        for axis, sub in enumerate(expr.indices):
            yield expr.base, axis, sub, bound
            if not isinstance(sub, sp.Symbol):  # the index tensor of a gather
                yield from _subscript_uses(sub, bound)
    else:
        for arg in expr.args:
            yield from _subscript_uses(arg, bound)


def _limit_uses(expr, bound: dict) -> Iterator[tuple]:
    """(summation index, lowest, highest, enclosing Sums' ranges) for each Sum in `expr`.
    A Sum's limits run innermost first (SymPy's `Sum(f, (m, 0, j), (j, 0, N - 1))`, which it
    makes of nested Sums): a limit's range may read the indices of the limits after it."""
    if isinstance(expr, ExprWithLimits):
        limits = [tuple(limit) for limit in expr.limits]
        for n, (index, low, high) in enumerate(limits):
            yield index, low, high, {**bound, **{i: (lo, hi) for i, lo, hi in limits[n + 1 :]}}
        yield from _limit_uses(expr.function, {**bound, **{i: (lo, hi) for i, lo, hi in limits}})
    else:
        for arg in expr.args:
            yield from _limit_uses(arg, bound)


def _check_tensors(variant, inputs, uses) -> None:
    for base, axis, _, _ in uses:
        name = str(base.label)
        if name not in inputs:
            _fail(variant, f"tensor {name!r} is used but not declared with tensor()")
        rank = len(inputs[name].shape)
        if axis >= rank:
            _fail(variant, f"tensor {name!r} has rank {rank} but is subscripted with more indices")


def _check_free_indices(variant, out, uses) -> None:
    free = set()
    for _, _, sub, bound in uses:
        free |= {s for s in index_symbols(sp.sympify(sub)) if s not in bound}
    for _, low, high, bound in _limit_uses(out.expr, {}):
        free |= {s for s in index_symbols(low - high) if s not in bound}
    for symbol_fn in out.expr.atoms(sp.KroneckerDelta, sp.LeviCivita):
        free |= {s for s in symbol_fn.free_symbols if s not in _dims(variant) and s in out.indices}
    declared = tuple(i for i in out.indices if isinstance(i, sp.Symbol))
    if any(i != 0 for i in out.indices if not isinstance(i, sp.Symbol)):
        _fail(variant, f"output {out.name!r} has indices {out.indices}: each must be an index or 0 (a size-1 axis)")
    # an index declared with its size may be missing from the expression: the output is
    # constant along it (Tile's copies)
    sized = {index for index, _ in out.sizes}
    unread = [i for i in declared if i not in free | sized and i in out.expr.free_symbols]
    if unread:
        index = unread[0]
        where = min((a for a in out.expr.atoms(sp.Function, sp.Pow) if index in a.free_symbols), key=sp.count_ops, default=None)
        _fail(
            variant,
            f"output {out.name!r}: index {index} appears only outside subscripts and Sum limits"
            + (f" (in {where})" if where is not None else "")
            + f": no tensor's axis gives its range, so declare it with its size, ({index}, <size>)",
        )
    if len(set(declared)) != len(declared) or not free <= set(declared) or set(declared) - free - sized:
        _fail(
            variant,
            f"output {out.name!r} declares free indices {_names(declared)} "
            f"but its expression has free indices {_names(free)}",
        )


def _free_range(variant, out, index, uses) -> Range:
    sizes = [
        (base, axis, base.shape[axis])
        for base, axis, sub, bound in uses
        if sub == index and index not in bound
    ]
    if not sizes:  # an index bounding a Sum (a cumulative sum) ranges as the summed index
        sizes = [
            (base, axis, base.shape[axis])
            for k, low, high, _ in _limit_uses(out.expr, {})
            if (low - high).has(index)
            for base, axis, sub, _ in uses
            if sub == k
        ]
    if not sizes:  # an index tied to others by KroneckerDelta or LeviCivita ranges as they do
        symbols = [f for f in out.expr.atoms(sp.KroneckerDelta, sp.LeviCivita) if index in f.args]
        partners = {a for f in symbols for a in f.args if a != index}
        sizes = [(b, axis, b.shape[axis]) for b, axis, sub, _ in uses if sub in partners]
    if not sizes:
        _fail(
            variant,
            f"index {index} of output {out.name!r} is used without a range (it indexes no tensor "
            f"axis directly): declare its size with ({index}, size) among the output's indices",
        )
    first = sizes[0]
    for other in sizes[1:]:
        if sp.simplify(other[2] - first[2]) != 0:
            _fail(
                variant,
                f"index {index} indexes {axis_text(first[0], first[1])} (size {first[2]}) "
                f"and {axis_text(other[0], other[1])} (size {other[2]})",
            )
    return (sp.S.Zero, first[2] - 1)


def axis_text(base, axis: int) -> str:
    """An axis of `base` as its declaration names it: `axis 1 of a`; behind a leading `...`
    (any number of batch axes) counted from the end, `the last axis of x`, `axis -2 of x`."""
    shape = base.shape
    if not shape or shape[0] != BATCH_DIM:
        return f"axis {axis} of {base.label}"
    if axis == 0:
        return f"the batch axes (...) of {base.label}"
    from_end = axis - len(shape)
    return f"the last axis of {base.label}" if from_end == -1 else f"axis {from_end} of {base.label}"


def _check_sum_range(variant, base, axis, sub, rng: Range) -> None:
    size = base.shape[axis]
    if any(s.is_positive is not True for s in (rng[1] - rng[0]).free_symbols):
        return  # a range bounded by another index (a cumulative sum) lies within that index's
    if sp.simplify(rng[0]) != 0 or sp.simplify(rng[1] - (size - 1)) != 0:
        _fail(
            variant,
            f"Sum over {sub} from {rng[0]} to {rng[1]} disagrees with {axis_text(base, axis)}, "
            f"of size {size} (expected {sub} from 0 to {size - 1})",
        )


def index_symbols(expr) -> set:
    """Index symbols in `expr`: integers not known positive (not sizes, not attributes)."""
    return {
        s for s in expr.free_symbols
        if isinstance(s, sp.Symbol) and s.is_integer and s.is_positive is not True
    }


def _dims(variant) -> set:
    return {s for t in variant.inputs for d in t.shape for s in sp.sympify(d).free_symbols}


def _check_position_dtype(variant, out) -> None:
    """An output that is a position (argmax, argmin) is an integer: its declared dtype must
    be an integer one, not the inputs' float dtype."""
    if not (out.expr.is_integer and _positions_read(out.expr)):
        return
    kind = dict(variant.decl.output_dtypes).get(out.name)
    attr = next((a for a in variant.decl.attrs if a.name == kind and a.is_dtype), None)
    values = [] if attr is None else [attr.default, *(attr.samples or ())]
    if attr is None or not all(v is not None and np.issubdtype(np.dtype(str(v)), np.integer) for v in values):
        declared = "the inputs' dtype" if kind is None else f"{kind!r} (values {values})"
        _fail(variant, f"output {out.name!r} is a position ({out.expr.func.__name__}), an integer, but is declared "
                       f"in {declared}: give it an integer DType() attribute, e.g. attrs={{'index_type': DType()}}, "
                       f"defaults={{'index_type': 'int64'}}, output_dtypes={{{out.name!r}: 'index_type'}}")


def _positions_read(expr) -> bool:
    """`expr` holds a position (argmax, argmin) other than as a subscript (a gather at it)."""
    if isinstance(expr, Position):
        return True
    if isinstance(expr, sp.Indexed):
        return False
    return any(_positions_read(a) for a in expr.args)


def _names(symbols) -> str:
    return "(" + ", ".join(sorted(str(s) for s in symbols)) + ")"


def _fail(variant: OpVariant, what: str):
    suffix = f" [attributes {dict(variant.attr_values)}]" if variant.attr_values else ""
    raise DeclarationError(what + suffix, variant.decl.name, variant.decl.location)

"""A Sum of a product of different tensors as one contraction (a matmul, an einsum): its
operands first made plain entries (gathered, computed, constant tables).
"""

from __future__ import annotations

import sympy as sp

from symgrad.ir import Constant
from symgrad.lowering.entries import gathered
from symgrad.lowering.matmul import lower_contraction
from symgrad.lowering.symbols import free_indices, has_reduction, is_index, is_map, laid_out


def contraction(lowering, expr: sp.Sum, axes) -> sp.Expr | None:
    """A Sum of a product of tensors over different indices, as one matmul or einsum; None
    for a product whose entries all have one index tuple (a plain reduction)."""
    summed = tuple(lim[0] for lim in expr.limits)
    function = _gather_operands(lowering, _constants_as_tensors(lowering, expr.function), axes)
    function = _operands_materialised(lowering, function, axes, summed)
    coefficient, operands = _plain_product(function)
    if not operands or len({idx for _, idx in operands}) < 2:
        return None
    out = tuple(a for a in axes if a in free_indices(expr))
    name = lowering.temp(lower_contraction(operands, out, summed))
    return lowering.scalar(coefficient) * sp.Symbol(lowering.expand(name, out, axes))


def _gather_operands(lowering, product: sp.Expr, axes) -> sp.Expr:
    """Tensor entries with mapped subscripts as entries of gathered arrays, plainly
    indexed, so the product can still be a contraction (a convolution: an einsum)."""
    factors = []
    for factor in sp.Mul.make_args(product):
        if isinstance(factor, sp.Indexed) and any(is_map(i) for i in factor.indices):
            name, idx = gathered(lowering, str(factor.base.label), tuple(factor.indices), axes)
            factor = sp.IndexedBase(name)[idx]
        factors.append(factor)
    return sp.Mul(*factors)


def _operands_materialised(lowering, product: sp.Expr, axes, summed) -> sp.Expr:
    """Elementwise functions of tensor entries (`tanh(h[i, k])`) as arrays of their own,
    when that makes the product a contraction (a matmul, not a product broadcast over
    every index and then summed). A function of indices alone (a causal mask,
    `indicator(j <= i)`) joins the array of a factor over its indices: a masked matmul."""
    factors = sp.Mul.make_args(product)
    plain = lambda f: isinstance(f, sp.Indexed) and all(is_index(i) for i in f.indices)
    constant = lambda f: not free_indices(f) and not f.has(sp.Indexed)
    computed = [f for f in factors if not plain(f) and not constant(f) and f.has(sp.Indexed)]
    masks = [f for f in factors if not constant(f) and not f.has(sp.Indexed)]
    if not (computed or masks) or any(has_reduction(f) for f in computed):
        return product
    order = tuple(axes) + tuple(summed)
    # computed factors over the same indices are one array (a relu's mask times its input)
    groups: dict = {}
    for f in computed:
        groups.setdefault(frozenset(free_indices(f)), []).append(f)
    for f in factors:  # an entry over the same indices joins them (one array, not two)
        if plain(f) and frozenset(f.indices) in groups and len(set(f.indices)) == len(f.indices):
            groups[frozenset(f.indices)].append(f)
            computed.append(f)
    for mask in masks:
        if not _mask_joined(mask, groups, [f for f in factors if plain(f) and f not in computed], computed):
            return product
    merged = {sp.Mul(*fs): laid_out(sp.Mul(*fs), order) for fs in groups.values()}
    tuples = set(merged.values()) | {tuple(f.indices) for f in factors if plain(f)}
    if len(tuples) < 2 or not all(set(free_indices(f)) <= set(order) for f in computed):
        return product
    result = [f for f in factors if f not in computed]
    for f, idx in merged.items():
        array = lowering.array(f, idx)
        name = lowering.variable(array)
        result.append(sp.IndexedBase(name)[idx])
    return sp.Mul(*result)


def _mask_joined(mask, groups: dict, entries: list, computed: list) -> bool:
    """`mask` (a function of indices alone) added to the group of computed factors over the
    fewest indices that include its own, else to a new group with such a plain entry of
    `entries`; False where no factor spans its indices."""
    over = frozenset(free_indices(mask))
    spanning = sorted((k for k in groups if over <= k), key=lambda k: (len(k), sorted(map(str, k))))
    if not spanning:
        entry = next((f for f in entries if over <= set(f.indices) and len(set(f.indices)) == len(f.indices)), None)
        if entry is None:
            return False
        spanning = [frozenset(entry.indices)]
        groups[spanning[0]] = [entry]
        computed.append(entry)
    groups[spanning[0]].append(mask)
    computed.append(mask)
    return True


def _constants_as_tensors(lowering, product: sp.Expr) -> sp.Expr:
    """Factors that depend on indices alone (LeviCivita(i, j, k)) over ranges of known
    size become small constant tensors, so the product can still be a contraction."""
    factors = []
    for factor in sp.Mul.make_args(product):
        idx = tuple(sorted(free_indices(factor), key=str))
        if idx and not factor.has(sp.Indexed) and not isinstance(factor, sp.KroneckerDelta):
            sizes = [lowering.numeric_size(i) for i in idx]
            if None not in sizes and sum(sizes) <= 64:
                constant = Constant(_tabulate(factor, idx, sizes), lowering.like())
                factor = sp.IndexedBase(lowering.once(constant, lambda: lowering.temp(constant)))[idx]
        factors.append(factor)
    return sp.Mul(*factors)


def _plain_product(expr) -> tuple[sp.Expr, list]:
    """(coefficient, [(tensor, indices)]) when `expr` is a product of plain tensor entries."""
    coefficient, operands = sp.S.One, []
    for factor in sp.Mul.make_args(expr):
        if isinstance(factor, sp.Indexed) and all(is_index(i) for i in factor.indices):
            operands.append((str(factor.base.label), tuple(factor.indices)))
        elif not free_indices(factor) and not factor.has(sp.Indexed):
            coefficient *= factor
        else:
            return sp.S.One, []
    return coefficient, operands


def _tabulate(factor, idx, sizes) -> tuple:
    """The values of `factor` over every combination of its indices, as nested tuples."""
    if not idx:
        return factor
    return tuple(_tabulate(factor.subs(idx[0], n), idx[1:], sizes[1:]) for n in range(sizes[0]))

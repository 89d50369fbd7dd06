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
    every index and then summed)."""
    factors = sp.Mul.make_args(product)
    plain = lambda f: isinstance(f, sp.Indexed) and all(is_index(i) for i in f.indices)
    constant = lambda f: not free_indices(f) and not f.has(sp.Indexed)
    computed = [f for f in factors if not plain(f) and not constant(f)]
    if not computed or any(not f.has(sp.Indexed) or has_reduction(f) for f in computed):
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

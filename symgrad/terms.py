"""Expressions as `Term`s (a product summed over indices), shaped for delta elimination and
lowering: sums of sums and products of sums flattened into terms (`normalize`), Kronecker
deltas hoisted out of branches so they can be summed out, a relu's mask made a factor, terms
elementwise over one entry merged into one reduction, and a sum over an index its factor does
not read counted."""

from __future__ import annotations

import sympy as sp

from symgrad.deltas import renamed_apart
from symgrad.derivation import Term
from symgrad.functions import mask
from symgrad.validate import index_symbols


def normalize(expr: sp.Expr, sums: tuple) -> list[Term]:
    """Flatten sums of sums and products of sums into a list of `Term`s. A sum of values
    elementwise over one entry's indices (GELU's `1 + tanh(u)`) stays one factor: multiplied
    out, it would print as a polynomial of its monomials."""
    if isinstance(expr, sp.Add):
        return [t for arg in expr.args for t in normalize(arg, sums)]
    if isinstance(expr, sp.Sum):
        return normalize(expr.function, sums + tuple(tuple(lim) for lim in expr.limits))
    if isinstance(expr, sp.Mul) and any(_multiplied_out(a) for a in expr.args):
        terms = [Term(sp.S.One, sums)]
        for arg in expr.args:
            terms = [
                Term(t.factor * u.factor, u.sums)
                for t in terms
                for u in (normalize(_bound_apart(arg, t), t.sums) if _multiplied_out(arg) else [Term(arg, t.sums)])
            ]
        return terms
    return [Term(expr, sums)]


def _multiplied_out(factor: sp.Expr) -> bool:
    """Whether a product's `factor` is split into terms: a Sum, or a sum holding Sums, deltas
    or branches (each term's own to eliminate or mask), or of values over different indices
    (`x[i, k] + y[k, j]`, whose terms may each be a contraction)."""
    if isinstance(factor, sp.Sum):
        return True
    if not isinstance(factor, sp.Add):
        return False
    if factor.has(sp.Sum, sp.KroneckerDelta, sp.Piecewise):
        return True
    indices = index_symbols(factor)
    return bool(indices) and not any(indices <= set(e.indices) for e in factor.atoms(sp.Indexed))


def _bound_apart(factor, term: Term):
    """`factor` with the indices its Sums bind renamed where `term` already uses them: one
    letter summed in two Sums of a product is two indices (`k`, then `k_1`)."""
    taken = {s[0] for s in term.sums} | term.factor.free_symbols
    if not taken & {lim[0] for s in factor.atoms(sp.Sum) for lim in s.limits}:
        return factor
    return renamed_apart(factor, taken)


def hoist_deltas(expr: sp.Expr) -> sp.Expr:
    """`Piecewise((delta * a, c), (0, True))` -> `delta * Piecewise((a, c), (0, True))`, so
    the deltas can be summed out (the derivative of a masked entry, MatrixBandPart)."""

    def hoist(piecewise):
        common = None
        for value, _ in piecewise.args:
            if value != 0:  # factored first: the deltas of a branch that is a sum of terms
                deltas = {d for d in sp.Mul.make_args(sp.factor_terms(value)) if isinstance(d, sp.KroneckerDelta)}
                common = deltas if common is None else common & deltas
        if not common:
            return piecewise
        factor = sp.Mul(*common)
        return factor * sp.Piecewise(*[(sp.cancel(v / factor) if v != 0 else v, c) for v, c in piecewise.args])

    return expr.replace(lambda e: isinstance(e, sp.Piecewise), hoist)


def masks_as_indicators(factor: sp.Expr) -> sp.Expr:
    """`Piecewise((a, c), (0, True))` with `c` reading tensors and `a` a polynomial of tensor
    entries (finite wherever its entries are) is `mask(c) * a`: a relu's mask as a factor,
    so the rest of `a` can still be a contraction (SymPy folds any factor of an enclosing Sum
    into a Piecewise, and lowering could only build it whole)."""

    def unmasked(piecewise):
        (value, condition), (zero, otherwise) = piecewise.args
        return mask(condition) * value

    def is_mask(e) -> bool:
        if not isinstance(e, sp.Piecewise) or len(e.args) != 2 or e.args[1] != (0, True):
            return False
        value, condition = e.args[0]
        return condition.has(sp.Indexed) and value.is_polynomial(*value.atoms(sp.Indexed))

    return factor.replace(is_mask, unmasked)


def merged_elementwise(terms: list[Term]) -> list[Term]:
    """Terms summed over the same indices whose factors are elementwise over one entry's
    indices (GELU's derivative, expanded into monomials) as one term: one reduction of their
    sum, not one reduction each. A contraction (no entry holds all its indices) stays apart."""
    merged: dict = {}
    result: list = []
    for term in terms:
        if term.sums and _elementwise_over_an_entry(term):
            key = term.sums
            if key in merged:
                result[merged[key]] = Term(result[merged[key]].factor + term.factor, key)
                continue
            merged[key] = len(result)
        result.append(term)
    return result


def _elementwise_over_an_entry(term: Term) -> bool:
    indices = index_symbols(term.factor)
    entries = term.factor.atoms(sp.Indexed)
    return bool(entries) and any(indices <= set(e.indices) for e in entries) and not term.factor.has(sp.KroneckerDelta)


def counted(term: Term) -> Term:
    """A sum over an index the factor does not depend on is a count: `Sum(c, (k, 0, N-1))`
    is `N*c` (a mean's derivative, summed over the axis it averages)."""
    summed = {s[0] for s in term.sums}
    factor, sums = term.factor, []
    for index, low, high in term.sums:
        bounds = sp.sympify(low).free_symbols | sp.sympify(high).free_symbols
        bounding = any(sp.sympify(b).has(index) for s in term.sums for b in s[1:])
        if factor.has(index) or bounds & summed or bounding:
            sums.append((index, low, high))
        else:
            factor = factor * (high - low + 1)
    return Term(factor, tuple(sums))

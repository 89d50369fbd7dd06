"""The rules for a Sum of no special kind: constant factors moved out, a mask applied after
the sum, a sum of expanded terms, and the plain reduction.
"""

from __future__ import annotations

import sympy as sp

from symgrad.lowering.reductions import reduce, summed_first
from symgrad.lowering.symbols import free_indices


def constant_factors_out(lowering, expr: sp.Sum, axes) -> sp.Expr | None:
    """`Sum(a * b[k], k)` with `a` free of k: `a * Sum(b[k], k)`."""
    summed = {lim[0] for lim in expr.limits}
    inside, outside = [], []
    for factor in sp.Mul.make_args(expr.function):
        (inside if factor.free_symbols & summed else outside).append(factor)
    if not outside:
        return None
    if not inside:  # a count: `Sum(a, k)` is `a` times the number of k
        count = sp.Mul(*[sp.sympify(high) - low + 1 for _, low, high in expr.limits])
        return lowering.array(sp.Mul(*outside) * count, axes)
    return lowering.array(sp.Mul(*outside), axes) * lowering.array(sp.Sum(sp.Mul(*inside), *expr.limits), axes)


def separable(lowering, expr: sp.Sum, axes) -> sp.Expr | None:
    """`Sum(a[j] * b[k], j, k)` whose factors fall into groups over disjoint summed indices
    (a range bounded by another summed index joins the two): the product of each group's
    Sum. None when the summed indices are all one group."""
    groups = _summed_groups(expr)
    if len(groups) < 2:
        return None
    factors = sp.Mul.make_args(expr.function)
    sums = []
    for group in groups:
        body = sp.Mul(*[f for f in factors if free_indices(f) & group])
        sums.append(lowering.array(sp.Sum(body, *[lim for lim in expr.limits if lim[0] in group]), axes))
    return sp.Mul(*sums)


def nested(lowering, expr: sp.Sum, axes) -> sp.Expr | None:
    """A Sum over k and s whose range of s starts or ends at k (a recurrence inside another):
    the sum over s taken first, inside the sum over k, with the factors free of s outside
    it. None when no range depends on another summed index."""
    summed = {lim[0] for lim in expr.limits}
    inner = [lim for lim in expr.limits if free_indices(sp.sympify(lim[1]) - sp.sympify(lim[2])) & summed]
    outer = [lim for lim in expr.limits if lim not in inner]
    if not inner or not outer:
        return None
    bound = {lim[0] for lim in inner}
    factors = sp.Mul.make_args(expr.function)
    inside = sp.Mul(*[f for f in factors if free_indices(f) & bound])
    outside = sp.Mul(*[f for f in factors if not free_indices(f) & bound])
    return summed_first(lowering, sp.Sum(inside, *inner), outside, tuple(outer), axes)


def _summed_groups(expr: sp.Sum) -> list[set]:
    """The summed indices, joined where a factor or a range's bound holds two of them."""
    summed = {lim[0] for lim in expr.limits}
    links = [free_indices(f) & summed for f in sp.Mul.make_args(expr.function)]
    links += [(free_indices(sp.sympify(lo) - sp.sympify(hi)) | {k}) & summed for k, lo, hi in expr.limits]
    groups: list[set] = []
    for link in links:
        joined = [g for g in groups if g & link]
        merged = set(link).union(*joined)
        groups = [g for g in groups if not g & link] + ([merged] if merged else [])
    return sorted(groups, key=lambda g: sorted(map(str, g)))


def indices_outside(lowering, expr: sp.Sum, axes) -> None:
    """Never lowers: fails for a Sum over indices that are not axes here."""
    if not free_indices(expr) <= set(axes):
        lowering.fail(f"{expr} depends on indices outside {axes}")
    return None


def into_branches(lowering, expr: sp.Sum, axes) -> sp.Expr | None:
    """`Sum(Piecewise((a, c), (0, True)) * r)` with `c` free of the summed indices is
    `Piecewise((Sum(a * r), c), (0, True))`: a relu's mask applied after the matmul, not
    a masked product over every index. None when no such Piecewise is a factor."""
    summed = {lim[0] for lim in expr.limits}
    factors = sp.Mul.make_args(expr.function)
    for n, factor in enumerate(factors):
        if isinstance(factor, sp.Piecewise) and not any(c.free_symbols & summed for _, c in factor.args):
            rest = sp.Mul(*factors[:n], *factors[n + 1 :])  # not a division: SymPy keeps Piecewise / Piecewise
            branches = [
                (lowering.array(sp.Sum(v * rest, *expr.limits), axes) if v != 0 else v, lowering.array(c, axes))
                for v, c in factor.args
            ]
            return sp.Piecewise(*branches, evaluate=False)  # SymPy would move c into the Sums
    return None


def expanded_terms(lowering, expr: sp.Sum, axes) -> sp.Expr | None:
    """`Sum((x[i, d] - y[j, d])**2, d)`, whose body no single entry's indices hold (an (i, j, d)
    array), as the Sums of its expanded terms: `Sum(x**2) + Sum(y**2) - 2*Sum(x*y)`, each an
    entry's reduction or a contraction. None when the body is held by an entry, or is no
    polynomial of entries."""
    body = expr.function
    entries = body.atoms(sp.Indexed)
    indices = free_indices(body)
    if not entries or any(indices <= set(e.indices) for e in entries) or not body.is_polynomial(*entries):
        return None
    expanded = sp.expand(body)
    if not isinstance(expanded, sp.Add):
        return None
    terms = lowering.array(sp.Add(*[sp.Sum(term, *expr.limits) for term in expanded.args]), axes)
    # a sum of squares stays one in floating point (`|x|^2 + |y|^2 - 2 x.y` may round below 0,
    # and a square root after it be NaN), as hand-written pairwise distances clamp theirs
    return sp.Max(terms, 0) if not lowering.op.complex_ok and _nonnegative(body, entries) else terms


def _nonnegative(body: sp.Expr, entries) -> bool:
    """Whether `body` is non-negative for every real value of its `entries` (a square)."""
    return bool(body.subs({e: sp.Dummy(real=True) for e in entries}).is_nonnegative)


def plain_sum(lowering, expr: sp.Sum, axes) -> sp.Expr:
    """A reduction of the summand over the summed indices."""
    return reduce(lowering, "sum", expr.function, tuple(lim[0] for lim in expr.limits), axes)

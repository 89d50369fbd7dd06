"""Kronecker deltas summed out: `sum_u delta(u, v) f(u)` is `f(v)`, with u's range kept as a
bound on another summed index where v may fall outside it (a cumulative sum), an index map
inverted where u is read through one (`x[i*s + k]`), and anything that would need a guard
refused with the op's name."""

from __future__ import annotations

import sympy as sp
from sympy.concrete.expr_with_limits import ExprWithLimits

from symgrad.derivation import Term
from symgrad.errors import DerivationError
from symgrad.functions import at_position, exact_div, indicator
from symgrad.validate import Range, index_symbols


def eliminate_deltas(variant, term: Term, ranges: dict[sp.Symbol, Range], outputs=frozenset()) -> Term:
    """Sum out every `KroneckerDelta(u, v)` whose index `u` is summed; a delta between two
    free indices stays (a diagonal, lowered to an identity matrix)."""
    factor, sums = term.factor, term.sums
    while True:
        summed = {s[0]: (s[1], s[2]) for s in sums}
        delta = next((d for d in _deltas(factor) if set(d.args) & set(summed)), None)
        if delta is None:
            inverted = _invert_index_map(factor, sums, outputs, ranges)
            if inverted is not None:
                factor, sums = inverted
                continue
            _check_remaining_deltas(variant, factor, summed)
            return Term(factor, sums)
        u, v = delta.args
        if u not in summed:
            u, v = v, u
        rest = sp.Mul(*[a for a in sp.Mul.make_args(factor) if a is not delta])
        if not isinstance(v, sp.Symbol):  # u := a map (a segment id): entries read there
            if not _range_kept_by_entry(rest, u, summed[u]):  # keep u's range (zero outside)
                raise DerivationError(
                    f"cannot eliminate {delta}: no entry indexed by {u} alone keeps its range",
                    variant.decl.name,
                    variant.decl.location,
                )
            factor = read_at(renamed_apart(rest, v.free_symbols), u, v, summed[u])
            sums = tuple(lim for lim in sums if lim[0] != u)
            continue
        v_range = summed.get(v) or ranges[v]
        factor = rest.subs(u, v)
        sums = tuple((s, lo.subs(u, v), hi.subs(u, v)) for s, lo, hi in sums if s != u)
        try:
            sums, conditions = _constrain(variant, delta, summed[u], v, v_range, sums, set(ranges))
            factor = factor * sp.Mul(*[indicator(c) for c in conditions])
        except DerivationError:
            if v in summed or not _range_kept_by_factor(rest, u, summed[u]):
                raise
            # the upstream gradient of a piece (a split's), indexed by u alone: read at v
            # beyond u's range it is zero (off its axis), so the bound holds by itself


def read_at(factor, u, v, u_range):
    """`factor` at u = v (a map): each outermost reduction over other indices that depends on
    u is computed over u's axis and read at v (`at_position`), u substituted elsewhere."""

    def at(e):
        if u not in e.free_symbols:
            return e
        if isinstance(e, ExprWithLimits):
            return at_position(e, u, v, *u_range)
        if e == u:
            return v
        return e.func(*[at(a) for a in e.args]) if e.args else e

    return at(factor)


def _deltas(factor) -> list:
    return [a for a in sp.Mul.make_args(factor) if isinstance(a, sp.KroneckerDelta)]


def _check_remaining_deltas(variant, factor, summed) -> None:
    """Left: deltas between two free indices (a diagonal), and `KroneckerDelta(u, E)` with u
    free and E a map with no inverse here, of summed indices and of free indices other than
    u (an offset diagonal, a gather by a per-row index): lowered to a scatter-add."""
    for delta in _unbound_deltas(factor):
        if all(isinstance(a, sp.Symbol) for a in delta.args):
            continue
        u, e = _map_delta(delta)
        if u is None or u in summed or u in index_symbols(e):
            raise DerivationError(
                f"cannot eliminate {delta}: an index map cannot read the index it places",
                variant.decl.name,
                variant.decl.location,
            )


def _unbound_deltas(expr) -> set:
    """The deltas of `expr` outside its reductions: one inside a reduction (a segment's count
    of ties, `Sum_i delta(s, ids[i]) * ...`) is that reduction's, computed over s's axis."""
    if isinstance(expr, sp.KroneckerDelta):
        return {expr}
    if isinstance(expr, ExprWithLimits) or not expr.args:
        return set()
    return set().union(*(_unbound_deltas(a) for a in expr.args))


def _map_delta(delta) -> tuple:
    """(u, E) for `KroneckerDelta(u, E)` with u an index and E an index map, else (None, None)."""
    a, b = delta.args
    if isinstance(a, sp.Symbol) and not isinstance(b, sp.Symbol):
        return a, b
    if isinstance(b, sp.Symbol) and not isinstance(a, sp.Symbol):
        return b, a
    return None, None


# --- affine index maps ---------------------------------------------------------------------


def _invert_index_map(factor, sums, outputs, ranges):
    """Sum out `KroneckerDelta(u, c*i + rest)` over a summed index i by solving for it:
    i = exact_div(u - rest, c), which is no position where c does not divide (a stride).

    Only where an entry of the factor is indexed by i alone along an axis whose range is i's
    own (the upstream gradient, for an output index): read at the solved position with zero
    outside, that entry keeps i's range. Entries indexed by `c*i + ...` read `u - rest + ...`.
    Only output indices, and indices that run along u's axis (their range grows with u's),
    are solved for, those along u's axis first: a convolution's input gradient then reads
    the upstream gradient in windows (solving for a kernel index would build a matrix the
    size of input times output); other maps are left to a scatter-add. Of several, the first
    in output order is solved (a patch's position, not its offset in the window).
    Returns the new (factor, sums), or None when no delta can be inverted so.
    """
    summed = {s[0]: (s[1], s[2]) for s in sums}
    for delta in _deltas(factor):
        u, e = _map_delta(delta)
        if u is None or u in summed or e.has(sp.Indexed):
            continue
        rest_factor = sp.Mul(*[a for a in sp.Mul.make_args(factor) if a is not delta])
        for i in _solvable(index_symbols(e) & set(summed), summed, outputs, ranges.get(u)):
            new_factor = _solved_for(rest_factor, u, e, i, summed[i])
            if new_factor is not None:
                return new_factor, tuple(lim for lim in sums if lim[0] != i)
    return None


def _solved_for(rest_factor, u, e, i, i_range):
    """`rest_factor` (the term without `KroneckerDelta(u, e)`) with the delta summed out over
    i by solving `u = e` for it, or None where that is not done here (`_invert_index_map`)."""
    c = sp.diff(e, i)
    rest = sp.expand(e - c * i)
    if rest.has(i) or not _range_kept_by_entry(rest_factor, i, i_range):
        return None
    if any(f.has(i) and not isinstance(f, sp.Indexed) and not _of_indices_only(f) for f in sp.Mul.make_args(rest_factor)):
        return None  # a function of i (a window's count, ties): computed once per output, scattered
    solved = exact_div(u - rest, c)
    rest_factor = renamed_apart(rest_factor, solved.free_symbols)
    new_factor = rest_factor.replace(
        lambda x: isinstance(x, sp.Indexed) and x.has(i),
        lambda x: x.func(x.base, *[_solved_subscript(s, i, c, u - rest, solved) for s in x.indices]),
    )
    # a condition on i alone (a mirror image's side) holds or not at the solved i;
    # where there is none (-1), the entries read there are zero anyway
    return new_factor.replace(
        lambda x: x in sp.Mul.make_args(new_factor) and not isinstance(x, sp.Indexed) and x.has(i),
        lambda x: x.subs(i, solved),
    )


def _solvable(candidates: set, summed: dict, outputs: tuple, u_range) -> list:
    """The summed indices of a map that may be solved for, in order: those running along the
    axis of u's range (sharing a size with it), then the other output indices, each group in
    output order, then by name."""
    sizes = sp.sympify(u_range[1]).free_symbols if u_range else set()
    shared = lambda i: sp.sympify(summed[i][1]).free_symbols & sizes
    # a shared dimension (a tensor axis's size) first: BatchToSpaceND's i in h = i*block + a
    # shares H with h; its offset a in the block shares only the block's size
    of_a_tensor = lambda i: any(s.is_integer and s.is_positive for s in shared(i))
    order = lambda i: (not of_a_tensor(i), not shared(i), list(outputs).index(i) if i in outputs else len(outputs), str(i))
    return sorted((i for i in candidates if i in outputs or shared(i)), key=order)


def _of_indices_only(factor) -> bool:
    """A factor computed from indices alone: no tensor entry, no inner sum or reduction."""

    return not factor.has(sp.Indexed) and not factor.atoms(ExprWithLimits)


def renamed_apart(expr, avoid: set):
    """`expr` with indices bound by its inner Sums renamed where they are in `avoid`, so a
    substitution cannot capture them (a window's count, summed over the window's own a)."""
    from sympy.concrete.expr_with_limits import ExprWithLimits

    def rename(e):
        clashes = {lim[0] for lim in e.limits} & avoid
        if not clashes:
            return e
        fresh = {k: sp.Symbol(f"{k}_", integer=True) for k in clashes}
        while any(f in avoid or e.has(f) for f in fresh.values()):
            fresh = {k: sp.Symbol(f"{f}_", integer=True) for k, f in fresh.items()}
        return e.xreplace(fresh)

    return expr.replace(lambda e: isinstance(e, ExprWithLimits), rename)


def _solved_subscript(sub, i, c, c_times_i, solved):
    """`sub` with i solved: `c*i + r` becomes `c_times_i + r` (exact where the solution is)."""
    if sp.diff(sub, i) == c:
        return sp.expand(sub - c * i + c_times_i)
    return sub.subs(i, solved)


def _range_kept_by_entry(factor, i, i_range) -> bool:
    low, high = i_range
    if low != 0:
        return False
    for entry in factor.atoms(sp.Indexed):
        for axis, sub in enumerate(entry.indices):
            if sub == i and sp.simplify(entry.base.shape[axis] - 1 - high) == 0:
                return True
    return False


def _range_kept_by_factor(factor, i, i_range) -> bool:
    """`_range_kept_by_entry` for an entry that is a factor of `factor` itself (not inside
    an inner sum): where it reads zero, so does the whole term."""
    entries = [f for f in sp.Mul.make_args(factor) if isinstance(f, sp.Indexed)]
    return _range_kept_by_entry(sp.Mul(*entries), i, i_range)


def _constrain(variant, delta, u_range: Range, v, v_range: Range, sums: tuple, indices: set) -> tuple:
    """Keep `u_range[0] <= v <= u_range[1]` after summing out u := v: (the sums, conditions
    on v the term is to be multiplied by).

    Bounds `v` always meets are dropped; a bound `s + c` on another summed index `s` (a
    cumulative sum) becomes a bound on `s` instead, once the other bounds make it the
    tighter one (each tried again after the others); a bound by free `indices` alone (a
    causal sum's `u <= i`) is a condition, a mask; anything else needs guards (not yet).
    """
    summed, conditions = {s[0]: s for s in sums}, []
    pending = [(u_range[0], v_range[0], False), (u_range[1], v_range[1], True)]
    while pending:
        moved = lambda p: _bound_moved(variant, delta, u_range, summed, v, v_range, *p, indices, conditions)
        deferred = [p for p in pending if not moved(p)]
        if len(deferred) == len(pending):
            s = next(s for s in summed if deferred[0][0].has(s))
            raise DerivationError(
                f"cannot eliminate {delta}: the range of {s} would need guards", variant.decl.name, variant.decl.location
            )
        pending = deferred
    return tuple(summed[s[0]] for s in sums), conditions


def _bound_moved(
    variant, delta, u_range, summed: dict, v, v_range: Range, bound, v_side, is_upper, indices: set, conditions: list
) -> bool:
    """Whether `v <= bound` (`v >= bound`) holds: met everywhere, moved onto the summed
    index `s` of `bound = s + c` (in `summed`), or, `bound` a function of free `indices`,
    added to `conditions`; False where that would not be tighter yet."""
    gap = (bound - v_side) if is_upper else (v_side - bound)
    if gap.is_nonnegative:
        return True  # v's whole range meets this bound
    s = next((s for s in summed if bound.has(s)), None)
    if s is None and bound.free_symbols & (indices - set(summed)):
        conditions.append(sp.Le(v, bound) if is_upper else sp.Ge(v, bound))
        return True
    c = bound - s if s is not None else None
    if s is None or c.free_symbols & set(summed) or not (bound - s - c == 0):
        raise DerivationError(
            f"cannot eliminate {delta}: {v} ranges over {v_range}, beyond {u_range}",
            variant.decl.name,
            variant.decl.location,
        )
    index, s_low, s_high = summed[s]
    # v <= s + c  <=>  s >= v - c ;   v >= s + c  <=>  s <= v - c (tighter, for every v)
    tighter = (v - c - s_low) if is_upper else (s_high - v + c)
    if not _everywhere_nonnegative(tighter, summed, v, v_range):
        return False
    summed[s] = (index, v - c, s_high) if is_upper else (index, s_low, v - c)
    return True


def _everywhere_nonnegative(gap, summed: dict, v, v_range: Range) -> bool:
    """Whether `gap` >= 0 wherever the other summed indices and v range: each summed index
    in it at the end of its range that makes it least (its range may end at v), then v."""
    for s, (_, low, high) in summed.items():
        coefficient = gap.coeff(s)
        if coefficient.is_number and coefficient != 0:
            gap = gap.subs(s, low if coefficient > 0 else high)
    coefficient = gap.coeff(v)
    if coefficient.is_number and coefficient != 0:
        gap = gap.subs(v, v_range[0] if coefficient > 0 else v_range[1])
    return bool(gap.is_nonnegative)

"""Simplification passes over a derivation, applied in order by `simplify`.

* `combine_powers`: `x**y / x` becomes `x**(y - 1)`, finite at x == 0 (Pow's gradient).
* `merge_equal_branches`: a `Piecewise` whose branches are one rational function is that
  function (Softplus, declared in two overflow-free branches, has one derivative).
* `without_vanishing_ends`: a triangular range (`s <= t`) cut short at an end where its
  terms vanish (a decay's gradient, finite at a decay of 0).
* `avoid_overflow`: the rules of `symgrad.stability` (ratios of `exp` as `sigmoid` and
  `softplus`, finite where `exp` overflows) on each gradient.
* `reuse.reuse_forward_outputs` and `reuse.reuse_tensor_outputs`: partials written in terms
  of the op's outputs where that is cheaper (`symgrad.reuse`).
* `share_subexpressions`: SymPy's `cse` over all of an op's gradients at once.
"""

from __future__ import annotations

import dataclasses

import sympy as sp
from sympy.concrete.expr_with_limits import ExprWithLimits

from symgrad.declaration import ELEMENTWISE
from symgrad.derivation import Derivation, TensorValue, Term
from symgrad.derive import strip_stop_gradient
from symgrad.guards import guarded, safe_where
from symgrad.stability import point_value, stabilized
from symgrad.reuse import reuse_forward_outputs, reuse_in_factor, reuse_tensor_outputs
from symgrad.stages import is_read_of, tensors_read
from symgrad.validate import index_symbols



def simplify(derivation: Derivation, reuse_outputs: bool = True) -> Derivation:
    """Apply every pass, in order (`reuse_outputs`: elementwise, the forward's outputs read
    where that is cheaper; not for a gradient op, whose outputs its caller gets summed over
    the axes each input is broadcast along)."""
    if derivation.variant.decl.kind == ELEMENTWISE:
        derivation = combine_powers(derivation)
        derivation = merge_equal_branches(derivation)
        derivation = avoid_overflow(derivation)
        if reuse_outputs:
            derivation = reuse_forward_outputs(derivation)
    else:
        derivation = _map_tensor_values(derivation, without_vanishing_ends)
        derivation = reuse_tensor_outputs(derivation)
        derivation = fold_stage_gradients(derivation)
    return plain_point_values(derivation)


def plain_point_values(derivation: Derivation) -> Derivation:
    """A forward value stated at a point by a branch of its own that the rest meets there (a
    norm's 0 at 0, `stability.point_branch`) computed without the select: it is the rest."""
    plain = lambda e: e.replace(lambda n: point_value(n) is not None, point_value)
    value = lambda v: (
        plain(v) if isinstance(v, sp.Basic) else TensorValue(v.indices, tuple(dataclasses.replace(t, factor=plain(t.factor)) for t in v.terms))
    )
    return dataclasses.replace(derivation, forward={n: value(v) for n, v in derivation.forward.items()})


def _map_vjp(derivation: Derivation, rewrite) -> Derivation:
    """`derivation` with `rewrite` applied to every non-zero elementwise gradient."""
    vjp = {n: None if e is None else rewrite(e) for n, e in derivation.vjp.items()}
    return dataclasses.replace(derivation, vjp=vjp)


def _map_tensor_values(derivation: Derivation, rewrite) -> Derivation:
    """`derivation` with `rewrite` applied to every tensor gradient, a stage's too."""
    vjp = {n: None if v is None else rewrite(v) for n, v in derivation.vjp.items()}
    staging = derivation.staging
    if staging is not None:
        staging = dataclasses.replace(staging, grads={n: None if v is None else rewrite(v) for n, v in staging.grads.items()})
    return dataclasses.replace(derivation, vjp=vjp, staging=staging)


def without_vanishing_ends(value: TensorValue) -> TensorValue:
    """`value` with the terms whose powers combine (`a**(t - s) / a`) summed over a range
    bounded by another index (`s <= t`) cut short at an end where those terms, taken together,
    vanish: a decay's gradient `sum_{s <= t} (t - s) * a**(t - s) / a * x[s]` (SymPy's
    derivative of `a**(t - s)`, split into a term in t and one in s) is
    `sum_{s < t} (t - s) * a**(t - s - 1) * x[s]`, finite at a == 0 (the term at s == t is
    0 * a**-1 there), and an exclusive scan. Other terms, over the same sums or not (an EMA's
    `(1 - a)` differentiated), are left as they are, in their place."""
    combining: dict = {}  # sums -> [(term, its factor with powers combined)]
    for term in value.terms:
        combined = sp.powsimp(term.factor, deep=True, combine="exp")
        if combined != term.factor and not term.factor.atoms(ExprWithLimits):
            combining.setdefault(term.sums, []).append((term, combined))
    replaced = {}
    for sums, group in combining.items():
        cut = tuple(_cut_end(limit, sp.Add(*(t.factor for t, _ in group))) for limit in sums)
        if cut != sums:
            replaced |= {id(t): Term(c, cut) for t, c in group}
    return TensorValue(value.indices, tuple(replaced.get(id(t), t) for t in value.terms))


def _cut_end(limit: tuple, total: sp.Expr) -> tuple:
    """`limit`, a bound naming another index moved in by one where `total` is 0 at it."""
    index, low, high = limit
    depends = lambda bound: bool(index_symbols(sp.sympify(bound)) - {index})
    if depends(high) and sp.expand(total.xreplace({index: high})) == 0:
        return index, low, high - 1
    if depends(low) and sp.expand(total.xreplace({index: low})) == 0:
        return index, low + 1, high
    return limit


def combine_powers(derivation: Derivation) -> Derivation:
    """Add the exponents of powers of one base: SymPy's `x**y*y/x` is NaN at x == 0."""
    return _map_vjp(derivation, lambda e: sp.powsimp(e, deep=True, combine="exp"))


def merge_equal_branches(derivation: Derivation) -> Derivation:
    """Replace each `Piecewise` whose branches are all one rational function by that function."""

    def merge(piecewise):
        forms = {sp.together(value) for value, _ in piecewise.args}
        return forms.pop() if len(forms) == 1 else piecewise

    return _map_vjp(derivation, lambda e: e.replace(lambda n: isinstance(n, sp.Piecewise), merge))


def avoid_overflow(derivation: Derivation) -> Derivation:
    """The stability rules (`symgrad.stability`) on each gradient of a real op: a derivative
    may build anew the forms they rewrite."""
    if derivation.variant.decl.complex_ok or derivation.variant.decl.wirtinger:
        return derivation
    return _map_vjp(derivation, lambda e: strip_stop_gradient(stabilized(e)))


def share_subexpressions(exprs: list[sp.Expr], prefix: str = "t", guard: bool = False) -> tuple[list, list[sp.Expr]]:
    """SymPy's `cse` over `exprs`: (temporaries as [(symbol, expr)], rewritten exprs).

    With `guard` (for code that is differentiated again: TensorFlow's), each `Piecewise` is
    `guarded` first: a partial function a branch applies (Pow's
    `x**(y - 1)`, in its branches x > 0 and x <= 0) is computed, wherever `cse` puts it, on
    inputs made safe where that branch is not taken, and two branches share it only under one
    mask. A safe read is an atom to `cse` (it would take `~(x > 0)` apart into `x <= 0`)."""
    reads = {}

    def safe_read(x, mask):
        return reads.setdefault((x, mask), sp.Symbol(f"{x.name}__safe{len(reads)}", real=True))

    symbols = sp.numbered_symbols(prefix, real=True)
    if not guard:  # numpy's: shared across branches, computed once
        return sp.cse(exprs, symbols=symbols, order="canonical")
    safe = [e.replace(sp.Piecewise, lambda *pairs: guarded(sp.Piecewise(*pairs), safe_read)) for e in exprs]
    temps, reduced = sp.cse(safe, symbols=symbols, order="canonical")
    return _safe_reads_restored(temps, reduced, reads)


def _safe_reads_restored(temps: list, reduced: list, reads: dict) -> tuple[list, list]:
    """`temps` and `reduced` with each safe read written out as `safe_where(x, mask)`, the
    mask reading a condition's temporary where one is computed before (`~tmp1`)."""
    conditions, restored = {}, []
    written = lambda: {atom: safe_where(x, mask.xreplace(conditions)) for (x, mask), atom in reads.items()}

    def restore(expr, reads_written):  # a mask may read safely itself (a guard within a guard)
        while expr.free_symbols & set(reads_written):
            expr = expr.xreplace(reads_written)
        return expr

    for symbol, value in temps:
        restored.append((symbol, restore(value, written())))
        if isinstance(value, sp.logic.boolalg.Boolean):
            conditions[value] = symbol
    at_end = written()
    return restored, [restore(e, at_end) for e in reduced]


def fold_stage_gradients(derivation: Derivation) -> Derivation:
    """Read a stage's gradient where it is used, when the op's outputs then say it shorter.

    Softmax staged as `sum1 = Sum(exp(x))` has `grad_x = grad*y + grad_sum1*exp(x)` with
    `grad_sum1 = -Sum(grad*y)/sum1`: written in place, `exp(x)/sum1` is the output `y` and
    the gradient is TensorFlow's `y*(grad - sum(grad*y))`. Only a use outside any sum is
    folded (its inner sums stay sums of their own, never coupled), and only where output
    reuse makes the folded terms smaller; a stage gradient no longer read is not computed.
    """
    staging = derivation.staging
    if staging is None:
        return derivation
    outputs = staging.outputs + staging.stages
    vjp, grads = dict(derivation.vjp), dict(staging.grads)
    for name in list(grads):
        value = grads[name]
        if value is None:
            continue
        single = sum(_uses(v, f"grad_{name}") for v in [*vjp.values(), *grads.values()]) == 1
        vjp = {n: _folded(v, name, value, outputs, single) for n, v in vjp.items()}
        grads = {n: v if n == name else _folded(v, name, value, outputs, single) for n, v in grads.items()}
        if not any(_reads(v, f"grad_{name}") for v in [*vjp.values(), *grads.values()]):
            grads[name] = None
    return dataclasses.replace(derivation, vjp=vjp, staging=dataclasses.replace(staging, grads=grads))


def _reads(value, name: str) -> bool:
    return value is not None and any(name in tensors_read(t.factor) for t in value.terms)


def _uses(value, name: str) -> int:
    """How many terms of `value` read `name`."""
    if value is None:
        return 0
    return sum(name in tensors_read(t.factor) for t in value.terms)


def _folded(value, name: str, grad: TensorValue, outputs, single: bool) -> TensorValue | None:
    """`value` with `grad_<name>` written in place in each term where that pays: always for
    its only use, else where output reuse makes it smaller."""
    if value is None or not _reads(value, f"grad_{name}"):
        return value
    terms = []
    for term in value.terms:
        terms += _folded_term(term, value.indices, f"grad_{name}", grad, outputs, single) or [term]
    return TensorValue(value.indices, tuple(terms))


def _folded_term(term: Term, indices: tuple, grad_name: str, grad: TensorValue, outputs, single: bool) -> list | None:
    """The terms of `term` with its one factor `grad_name[I]` replaced by the terms of
    `grad` at I, each with outputs reused; None when `term` is summed, reads the gradient
    otherwise than as one factor, or the result is no smaller."""
    entries = [f for f in sp.Mul.make_args(term.factor) if is_read_of(f, grad_name)]
    if term.sums or len(entries) != 1 or sp.Mul.make_args(term.factor).count(entries[0]) != 1:
        return None
    entry = entries[0]
    rest = term.factor / entry
    if grad_name in tensors_read(rest):
        return None
    at = dict(zip(grad.indices, entry.indices)) if isinstance(entry, sp.Indexed) else {}
    mapped = {i for i, s in at.items() if not (s.is_Symbol or s.is_Integer)}
    if any(mapped & r.free_symbols for t in grad.terms for r in t.factor.atoms(ExprWithLimits)):
        return None  # a reduction read at positions (a segment's count at each id): kept apart
    naive, folded = [], []
    for inner in grad.terms:
        taken = rest.free_symbols | set(entry.free_symbols) | set(indices)
        renames = {s[0]: sp.Symbol(f"{s[0]}_f", integer=True) for s in inner.sums if s[0] in taken}
        # a range may end at an index of `grad` (a cumulative sum's): renamed with it
        bound = lambda b: sp.sympify(b).xreplace(renames).xreplace(at)
        sums = tuple((renames.get(k, k), bound(lo), bound(hi)) for k, lo, hi in inner.sums)
        factor = rest * inner.factor.xreplace(renames).xreplace(at)
        naive.append(Term(factor, sums))
        free = tuple(indices) + tuple(k for k, _, _ in sums)
        folded.append(Term(reuse_in_factor(factor, free, outputs), sums))
    if not single and sum(sp.count_ops(t.factor) for t in folded) >= sum(sp.count_ops(t.factor) for t in naive):
        return None
    return folded

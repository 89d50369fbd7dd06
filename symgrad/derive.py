"""Vector-Jacobian products: SymPy partials contracted with the upstream gradient.

Elementwise ops give one scalar expression per input (`grad * d(out)/d(input)`, summed over
outputs). Index-summation ops give, per input, a sum of `Term`s over the input's own axis
indices, with every Kronecker delta eliminated against the known index ranges (SymPy's
`doit` would leave range guards instead).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import sympy as sp

from symgrad.declare import BATCH, BATCH_DIM, ELEMENTWISE, OpVariant, stop_gradient
from symgrad.errors import DerivationError
from symgrad.functions import exact_div, mask
from symgrad.stability import stabilized_outputs
from symgrad.stages import Staged, scalar_entry, split_stages
from symgrad.validate import Range, index_ranges, index_symbols


@dataclass(frozen=True)
class Term:
    """`Sum(factor, *sums)`: a product of tensor entries and scalars, summed over indices."""

    factor: sp.Expr  # a product with no Sum and no Add inside
    sums: tuple[tuple[sp.Symbol, sp.Expr, sp.Expr], ...]  # (index, lowest, highest)

    def __str__(self) -> str:
        return str(self.as_sum())

    def as_sum(self) -> sp.Expr:
        """`Sum(factor, *sums)`, a range bounded by another summed index inside that index's
        sum (SymPy sums over its first limit innermost)."""
        if not self.sums:
            return self.factor
        return sp.Sum(self.factor, *innermost_first(self.sums))


def innermost_first(sums: tuple) -> tuple:
    """The limits in order, but for a range bounded by another summed index, which goes
    before (inside) that index's limit."""
    ordered, pending = [], list(sums)
    while pending:
        bounds = lambda lim: sp.sympify(lim[1]).free_symbols | sp.sympify(lim[2]).free_symbols
        named = set().union(*(bounds(lim) for lim in pending))
        inner = next((lim for lim in pending if lim[0] not in named), pending[0])
        ordered.append(inner)
        pending.remove(inner)
    return tuple(ordered)


@dataclass(frozen=True)
class TensorValue:
    """A tensor given entry-wise: `value[indices] = sum(terms)`."""

    indices: tuple[sp.Symbol, ...]  # one per axis
    terms: tuple[Term, ...]  # summed

    def __str__(self) -> str:
        return f"[{', '.join(map(str, self.indices))}] = " + " + ".join(map(str, self.terms))


@dataclass(frozen=True)
class Derivation:
    """The forward values and the vector-Jacobian product of one op variant."""

    variant: OpVariant  # what was derived
    grad_names: tuple[str, ...]  # the upstream gradient's name, one per output
    forward: dict  # output name -> sympy expr (elementwise) or TensorValue (index)
    vjp: dict  # input name -> sympy expr / TensorValue, or None where the gradient is zero
    ranges: dict = dataclasses.field(default_factory=dict)  # index -> (lowest, highest)
    staging: Staging | None = None  # a composed op's stages (then `forward` reads them)


@dataclass(frozen=True)
class Staging:
    """The stages of a composed op: forward values in order, gradients in reverse order."""

    stages: tuple  # the stages (`Output`s), in forward order
    tensors: tuple  # `TensorInput` per stage: its name and shape
    outputs: tuple  # the op's outputs (`Output`s) as expressions of the stages
    values: dict  # stage name -> TensorValue (its forward value)
    grads: dict  # stage name -> TensorValue in terms of later gradients, or None; reverse order


def grad_names(variant: OpVariant) -> tuple[str, ...]:
    """`grad` for a single output (unless an input is an upstream gradient, `grad` or
    `grad_<...>`: a gradient op's), else `grad_<output>` per output (and per entry of a list
    output, whatever its length)."""
    outs = variant.outputs
    upstream = any(t.name == "grad" or t.name.startswith("grad_") for t in variant.inputs)
    if len(outs) == 1 and outs[0].list_name is None and not upstream:
        return ("grad",)
    return tuple(f"grad_{o.name}" for o in outs)


def derive(variant: OpVariant) -> Derivation:
    """Derive the vector-Jacobian product of one op variant (as declared, but for the
    rewrites that keep it finite: `stability`)."""
    _check_names(variant)
    variant = stabilized_outputs(variant)
    pruned = lambda outputs: tuple(dataclasses.replace(o, expr=without_dead_branches(o.expr)) for o in outputs)
    variant = dataclasses.replace(variant, outputs=pruned(variant.outputs), stages=pruned(variant.stages))
    if variant.decl.kind == ELEMENTWISE:
        return _derive_elementwise(variant)
    staged = split_stages(variant)
    if not staged.stages:
        return _derive_index(dataclasses.replace(variant, outputs=staged.outputs))
    return _derive_staged(variant, staged)


def _derive_staged(variant: OpVariant, staged: Staged) -> Derivation:
    """Reverse mode over the stages: each stage's vector-Jacobian product by the single-stage
    engine, with the gradients of the stages it reads accumulated, last stage first."""
    last = _derive_index(staged.part(variant, None), grad_names(variant))
    contributions = {name: [value] for name, value in last.vjp.items() if value is not None}
    ranges, grads = dict(last.ranges), {}
    for n in reversed(range(len(staged.stages))):
        name = staged.stages[n].name
        grads[name] = _accumulated(contributions.pop(name, []))
        if grads[name] is None:
            continue  # nothing downstream depends on it (a stop_gradient maximum)
        part = _derive_index(staged.part(variant, n), (f"grad_{name}",))
        _merge_ranges(variant, ranges, part.ranges)
        for read, value in part.vjp.items():
            if value is not None:
                contributions.setdefault(read, []).append(value)
    vjp = {t.name: None if t.integer else _accumulated(contributions.get(t.name, [])) for t in variant.inputs}
    values = {
        s.name: forward_value(s) for s in staged.stages
    }
    # outputs as values (read by output reuse): what their derivatives are written in
    stripped = lambda outputs: tuple(dataclasses.replace(o, expr=strip_stop_gradient(o.expr)) for o in outputs)
    staging = Staging(stripped(staged.stages), staged.tensors, stripped(staged.outputs), values, grads)
    return Derivation(variant, grad_names(variant), last.forward, vjp, ranges, staging)


def _accumulated(values: list) -> TensorValue | None:
    """The sum of one tensor's gradient contributions (each over the same axis indices)."""
    if not values:
        return None
    return TensorValue(values[0].indices, tuple(t for v in values for t in v.terms))


def _merge_ranges(variant, ranges: dict, more: dict) -> None:
    for index, rng in more.items():
        if index in ranges and sp.simplify(ranges[index][0] - rng[0]) != 0 or (
            index in ranges and sp.simplify(ranges[index][1] - rng[1]) != 0
        ):
            raise DerivationError(
                f"index {index} ranges over {ranges[index]} in one stage and {rng} in another: "
                f"name them apart",
                variant.decl.name,
                variant.decl.location,
            )
        ranges[index] = rng


def _check_names(variant: OpVariant) -> None:
    taken = [t.name for t in variant.inputs] + [o.name for o in variant.outputs]
    taken += [a.name for a in variant.decl.attrs] + list(grad_names(variant))
    clashes = sorted({n for n in taken if taken.count(n) > 1})
    if clashes:
        raise DerivationError(
            f"names {clashes} are used for more than one input, output, attribute or gradient",
            variant.decl.name,
            variant.decl.location,
        )


# --- elementwise ---------------------------------------------------------------------------


def _derive_elementwise(variant: OpVariant) -> Derivation:
    forward = {o.name: strip_stop_gradient(o.expr) for o in variant.outputs}
    return Derivation(variant, grad_names(variant), forward, elementwise_vjp(variant))


def elementwise_vjp(variant: OpVariant, stopped: bool = False) -> dict:
    """Input name -> its gradient (None: none) of an elementwise variant; with `stopped`,
    what the declaration stops still marked `stop_gradient` in it (Pow's `y` in
    `x ** stop_gradient(y)`: its partial in x is `stop_gradient(y) * x ** (stop_gradient(y) - 1)`),
    as the gradient op declares it to be differentiated again."""
    grads = [sp.Symbol(n, real=True) for n in grad_names(variant)]
    vjp = {}
    for inp in variant.inputs:
        total = sp.S.Zero
        for out, grad in zip(variant.outputs, grads):
            total += grad * partial_derivative(variant, out.expr, inp.base, stopped)
        vjp[inp.name] = None if total == 0 else sp.piecewise_fold(total)
    return vjp


def partial_derivative(variant: OpVariant, expr: sp.Expr, wrt, stopped: bool = False) -> sp.Expr:
    """d(expr)/d(wrt) by SymPy, refusing results SymPy left unevaluated; `stop_gradient`
    markers stripped unless `stopped`."""
    d = sp.diff(expr, wrt)
    if d.has(sp.Derivative, sp.Subs):
        stuck = sorted(str(e.expr) for e in d.atoms(sp.Derivative, sp.Subs))
        raise DerivationError(
            f"SymPy cannot differentiate {', '.join(stuck)} with respect to {wrt}: state the "
            "derivative with a `Piecewise` (one expression per branch), or wrap a step-like value "
            "in `stop_gradient(...)` where its derivative is zero (as `stop_gradient(sp.floor(x))` "
            "declares Floor)",
            variant.decl.name,
            variant.decl.location,
        )
    return without_dead_branches(d if stopped else strip_stop_gradient(d))


def without_dead_branches(expr: sp.Expr) -> sp.Expr:
    """`expr` with each Piecewise's conditions false in its later branches: the derivative
    of `x / Piecewise((0, Eq(u, 0)), (sqrt(u), True))` under an outer `Piecewise((0, Eq(u, 0)),
    ...)` has a `Piecewise((zoo, Eq(u, 0)), ...)` that branch never reaches."""

    def pruned(*pairs):
        earlier, branches = [], []
        for value, condition in pairs:
            branches.append((value.xreplace({c: sp.false for c in earlier}) if earlier else value, condition))
            earlier.append(condition)
        return sp.Piecewise(*branches)

    return expr.replace(sp.Piecewise, pruned) if expr.has(sp.Piecewise) else expr


def strip_stop_gradient(expr: sp.Expr) -> sp.Expr:
    """Replace every `stop_gradient(x)` by `x` once derivatives are taken."""
    return expr.replace(lambda e: isinstance(e, stop_gradient), lambda e: e.args[0])


# --- index summation -----------------------------------------------------------------------


def _derive_index(variant: OpVariant, grads: tuple[str, ...] | None = None) -> Derivation:
    grads = grads or grad_names(variant)
    ranges = index_ranges(variant)
    forward = {
        o.name: forward_value(o) for o in variant.outputs
    }
    vjp = {}
    all_ranges = dict(ranges)
    for inp in variant.inputs:
        if inp.integer:  # positions: piecewise constant, no gradient
            vjp[inp.name] = None
            continue
        steps = input_steps(variant, inp, grads, ranges)
        all_ranges.update(steps.axis_ranges)
        terms = _merged_elementwise([_counted(t) for t in steps.eliminated])
        terms = [t for t in terms if t.factor != 0]
        axes = tuple(steps.axis_ranges)
        vjp[inp.name] = _batch_renamed(TensorValue(axes, tuple(terms)), inp.shape) if terms else None
    return Derivation(variant, grads, forward, vjp, all_ranges)


@dataclass(frozen=True)
class InputSteps:
    """How one input's gradient is found (what `symgrad explain` shows)."""

    entry: sp.Expr  # the input's entry differentiated by, e.g. `a[a_0, a_1]`
    axis_ranges: dict  # each of its axis indices -> (lowest, highest), in axis order
    partials: tuple[tuple[str, sp.Expr], ...]  # (output, d(output)/d(entry)), per output
    contracted: tuple[Term, ...]  # upstream gradient times partial, summed over output indices
    eliminated: tuple[Term, ...]  # the same terms, each Kronecker delta summed out


def input_steps(variant: OpVariant, inp, grads: tuple[str, ...], ranges: dict) -> InputSteps:
    """The partials of one input of an index-summation variant, their contraction with the
    upstream gradients `grads` (one per output), and the deltas summed out."""
    axes = tuple(sp.Symbol(f"{inp.name}_{n}", integer=True) for n in range(len(inp.shape)))
    axis_ranges = {a: (sp.S.Zero, d - 1) for a, d in zip(axes, inp.shape)}
    entry = inp.base[axes] if axes else scalar_entry(inp.name)  # a scalar stage
    partials, terms = [], []
    for out, grad_name in zip(variant.outputs, grads):
        partial, contracted = _contract(variant, out, grad_name, entry, ranges)
        partials.append((out.name, partial))
        terms += contracted
    outputs = tuple(dict.fromkeys(i for o in variant.outputs for i in o.indices))
    eliminated = [_eliminate_deltas(variant, t, {**ranges, **axis_ranges}, outputs) for t in terms]
    return InputSteps(entry, axis_ranges, tuple(partials), tuple(terms), tuple(eliminated))


def _batch_renamed(value: TensorValue, shape) -> TensorValue:
    """Name an input's batch axis `BATCH`, as everywhere else, once the deltas are gone."""
    if not shape or shape[0] != BATCH_DIM:
        return value
    old = value.indices[0]
    terms = tuple(Term(t.factor.subs(old, BATCH), t.sums) for t in value.terms)
    return TensorValue((BATCH,) + value.indices[1:], terms)


def _contract(variant, out, grad_name, entry, ranges) -> tuple[sp.Expr, list[Term]]:
    """`d(out)/d(entry)`, and the terms of `Sum(grad[out_indices] * d(out)/d(entry), out_indices)`."""
    shape = tuple(ranges[i][1] + 1 if i in ranges else 1 for i in out.indices)
    grad = sp.IndexedBase(grad_name, shape=shape)
    upstream = grad[out.indices] if out.indices else sp.Symbol(grad_name)
    partial = _hoist_deltas(partial_derivative(variant, out.expr, entry))
    # an output's whole expression in its own derivative (a maximum's) is the output, passed
    # in: read it before index maps are solved, which would hide it
    outputs = {
        o.expr: sp.IndexedBase(o.name, shape=tuple(ranges[i][1] + 1 if i in ranges else 1 for i in o.indices))[o.indices]
        for o in variant.outputs
        if o.indices
    }
    partial = partial.xreplace(outputs)
    sums = tuple((i, *ranges[i]) for i in out.indices if i in ranges)
    # hoisted again once out of their Sums (a Sum folds a delta back into its Piecewise)
    return partial, [Term(_masks_as_indicators(_hoist_deltas(t.factor)), t.sums) for t in _normalize(upstream * partial, sums)]


def forward_value(out) -> TensorValue:
    """An output's or a stage's value as terms, as its gradient's are."""
    terms = _normalize(strip_stop_gradient(out.expr), ())  # may expand Sum(x + 1) into Sum(1): a count
    return TensorValue(out.indices, tuple(_counted(Term(_masks_as_indicators(t.factor), t.sums)) for t in terms))


def _masks_as_indicators(factor: sp.Expr) -> sp.Expr:
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


def _hoist_deltas(expr: sp.Expr) -> sp.Expr:
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


def _normalize(expr: sp.Expr, sums: tuple) -> list[Term]:
    """Flatten sums of sums and products of sums into a list of `Term`s."""
    expr = sp.expand(expr, deep=False, power_base=False, power_exp=False, log=False, multinomial=False)
    if isinstance(expr, sp.Add):
        return [t for arg in expr.args for t in _normalize(arg, sums)]
    if isinstance(expr, sp.Sum):
        return _normalize(expr.function, sums + tuple(tuple(lim) for lim in expr.limits))
    if isinstance(expr, sp.Mul) and any(isinstance(a, (sp.Sum, sp.Add)) for a in expr.args):
        terms = [Term(sp.S.One, sums)]
        for arg in expr.args:
            terms = [
                Term(t.factor * u.factor, u.sums)
                for t in terms
                for u in _normalize(_bound_apart(arg, t), t.sums)
            ]
        return terms
    return [Term(expr, sums)]


def _bound_apart(factor, term: Term):
    """`factor` with the indices its Sums bind renamed where `term` already uses them: one
    letter summed in two Sums of a product is two indices (`k`, then `k_1`)."""
    taken = {s[0] for s in term.sums} | term.factor.free_symbols
    if not taken & {lim[0] for s in factor.atoms(sp.Sum) for lim in s.limits}:
        return factor
    return _rename_bound(factor, taken)


def _merged_elementwise(terms: list[Term]) -> list[Term]:
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


def _counted(term: Term) -> Term:
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


def _eliminate_deltas(variant, term: Term, ranges: dict[sp.Symbol, Range], outputs=frozenset()) -> Term:
    """Sum out every `KroneckerDelta(u, v)` whose index `u` is summed; a delta between two
    free indices stays (a diagonal, lowered to an identity matrix)."""
    factor, sums = term.factor, term.sums
    while True:
        summed = {s[0]: (s[1], s[2]) for s in sums}
        delta = next((d for d in _deltas(factor) if set(d.args) & set(summed)), None)
        if delta is None:
            inverted = _invert_index_map(factor, sums, outputs)
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
            factor = _rename_bound(rest, v.free_symbols).subs(u, v)
            sums = tuple(lim for lim in sums if lim[0] != u)
            continue
        v_range = summed.get(v) or ranges[v]
        factor = rest.subs(u, v)
        sums = tuple((s, lo.subs(u, v), hi.subs(u, v)) for s, lo, hi in sums if s != u)
        try:
            sums = _constrain(variant, delta, summed[u], v, v_range, sums)
        except DerivationError:
            if v in summed or not _range_kept_by_factor(rest, u, summed[u]):
                raise
            # the upstream gradient of a piece (a split's), indexed by u alone: read at v
            # beyond u's range it is zero (off its axis), so the bound holds by itself


def _deltas(factor) -> list:
    return [a for a in sp.Mul.make_args(factor) if isinstance(a, sp.KroneckerDelta)]


def _check_remaining_deltas(variant, factor, summed) -> None:
    """Left: deltas between two free indices (a diagonal), and `KroneckerDelta(u, E)` with u
    free and E a map of summed indices with no inverse here (lowered to a scatter-add)."""
    for delta in factor.atoms(sp.KroneckerDelta):
        if all(isinstance(a, sp.Symbol) for a in delta.args):
            continue
        u, e = _map_delta(delta)
        if u is None or u in summed or not index_symbols(e) <= set(summed):
            raise DerivationError(
                f"cannot eliminate {delta}: an index map must be of summed indices only",
                variant.decl.name,
                variant.decl.location,
            )


def _map_delta(delta) -> tuple:
    """(u, E) for `KroneckerDelta(u, E)` with u an index and E an index map, else (None, None)."""
    a, b = delta.args
    if isinstance(a, sp.Symbol) and not isinstance(b, sp.Symbol):
        return a, b
    if isinstance(b, sp.Symbol) and not isinstance(a, sp.Symbol):
        return b, a
    return None, None


# --- affine index maps ---------------------------------------------------------------------


def _invert_index_map(factor, sums, outputs):
    """Sum out `KroneckerDelta(u, c*i + rest)` over a summed index i by solving for it:
    i = exact_div(u - rest, c), which is no position where c does not divide (a stride).

    Only where an entry of the factor is indexed by i alone along an axis whose range is i's
    own (the upstream gradient, for an output index): read at the solved position with zero
    outside, that entry keeps i's range. Entries indexed by `c*i + ...` read `u - rest + ...`.
    Only output indices are solved for: a convolution's input gradient then reads the
    upstream gradient in windows (solving for a kernel index would build a matrix the size
    of input times output); other maps are left to a scatter-add. Of several output indices,
    the first in output order is solved (a patch's position, not its offset in the window).
    Returns the new (factor, sums), or None when no delta can be inverted so.
    """
    summed = {s[0]: (s[1], s[2]) for s in sums}
    for delta in _deltas(factor):
        u, e = _map_delta(delta)
        if u is None or u in summed or e.has(sp.Indexed):
            continue
        rest_factor = sp.Mul(*[a for a in sp.Mul.make_args(factor) if a is not delta])
        for i in sorted(index_symbols(e) & set(summed) & set(outputs), key=list(outputs).index):
            c = sp.diff(e, i)
            rest = sp.expand(e - c * i)
            if rest.has(i) or not _range_kept_by_entry(rest_factor, i, summed[i]):
                continue
            if any(f.has(i) and not isinstance(f, sp.Indexed) and not _of_indices_only(f) for f in sp.Mul.make_args(rest_factor)):
                continue  # a function of i (a window's count, ties): computed once per output, scattered
            solved = exact_div(u - rest, c)
            rest_factor = _rename_bound(rest_factor, solved.free_symbols)
            new_factor = rest_factor.replace(
                lambda x: isinstance(x, sp.Indexed) and x.has(i),
                lambda x: x.func(x.base, *[_solved_subscript(s, i, c, u - rest, solved) for s in x.indices]),
            )
            # a condition on i alone (a mirror image's side) holds or not at the solved i;
            # where there is none (-1), the entries read there are zero anyway
            new_factor = new_factor.replace(
                lambda x: x in sp.Mul.make_args(new_factor) and not isinstance(x, sp.Indexed) and x.has(i),
                lambda x: x.subs(i, solved),
            )
            return new_factor, tuple(lim for lim in sums if lim[0] != i)
    return None


def _of_indices_only(factor) -> bool:
    """A factor computed from indices alone: no tensor entry, no inner sum or reduction."""
    from sympy.concrete.expr_with_limits import ExprWithLimits

    return not factor.has(sp.Indexed) and not factor.atoms(ExprWithLimits)


def _rename_bound(expr, avoid: set):
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


def _constrain(variant, delta, u_range: Range, v, v_range: Range, sums: tuple) -> tuple:
    """Keep `u_range[0] <= v <= u_range[1]` after summing out u := v.

    Bounds `v` always meets are dropped; a bound `s + c` on another summed index `s` (a
    cumulative sum) becomes a bound on `s` instead, once the other bounds make it the
    tighter one (each tried again after the others); anything else needs guards (not yet).
    """
    summed = {s[0]: s for s in sums}
    pending = [(u_range[0], v_range[0], False), (u_range[1], v_range[1], True)]
    while pending:
        deferred = [p for p in pending if not _bound_moved(variant, delta, u_range, summed, v, v_range, *p)]
        if len(deferred) == len(pending):
            s = next(s for s in summed if deferred[0][0].has(s))
            raise DerivationError(
                f"cannot eliminate {delta}: the range of {s} would need guards", variant.decl.name, variant.decl.location
            )
        pending = deferred
    return tuple(summed[s[0]] for s in sums)


def _bound_moved(variant, delta, u_range, summed: dict, v, v_range: Range, bound, v_side, is_upper) -> bool:
    """Whether `v <= bound` (`v >= bound`) holds: met everywhere, or moved onto the summed
    index `s` of `bound = s + c` (in `summed`); False where that would not be tighter yet."""
    gap = (bound - v_side) if is_upper else (v_side - bound)
    if gap.is_nonnegative:
        return True  # v's whole range meets this bound
    s = next((s for s in summed if bound.has(s)), None)
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

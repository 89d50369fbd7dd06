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

from symgrad.declare import BATCH, BATCH_DIM, stop_gradient
from symgrad.declaration import ELEMENTWISE, OpVariant
from symgrad.deltas import eliminate_deltas
from symgrad.derivation import Derivation, Staging, TensorValue, Term
from symgrad.errors import DerivationError
from symgrad.stability import stabilized_outputs
from symgrad.stages import Staged, scalar_entry, split_stages, without_vanishing_terms
from symgrad.terms import counted, hoist_deltas, masks_as_indicators, merged_elementwise, normalize
from symgrad.dtypes import output_real
from symgrad.validate import index_ranges
from symgrad.wirtinger import indexed_vjp, promoted_reals, uses_wirtinger, wirtinger_vjp


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
        if grads[name] is None:  # nothing downstream depends on it (a stop_gradient maximum),
            # but a gradient may read it: its indices' ranges, as for any stage
            _merge_ranges(variant, ranges, index_ranges(staged.part(variant, n)))
            continue
        part = _derive_index(staged.part(variant, n), (f"grad_{name}",))
        _merge_ranges(variant, ranges, part.ranges)
        for read, value in part.vjp.items():
            value = value and without_vanishing_terms(value, staged.stages)
            if value is not None and value.terms:
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
    taken = [t.name for t in variant.inputs] + [o.name for o in variant.outputs] + [s.name for s in variant.stages]
    taken += [a.name for a in variant.decl.attrs] + list(grad_names(variant))
    clashes = sorted({n for n in taken if taken.count(n) > 1})
    if clashes:
        raise DerivationError(
            f"names {clashes} are used for more than one input, output, stage, attribute or gradient",
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
    wirtinger = uses_wirtinger(variant)
    grads = [upstream_symbol(variant, n, o) if wirtinger else sp.Symbol(n, real=True) for n, o in zip(grad_names(variant), variant.outputs)]
    differentiate = lambda expr, wrt: partial_derivative(variant, expr, wrt, stopped)
    # what the generated gradient reads conjugated (a complex op's prologue)
    conjugated = [t.base for t in variant.inputs if not t.integer and not t.base.is_real] if variant.decl.complex_ok else []
    vjp = {}
    for inp in variant.inputs:
        total = sp.S.Zero
        for out, grad in zip(variant.outputs, grads):
            if wirtinger and not inp.integer:
                total += wirtinger_vjp(out.expr, inp.base, grad, differentiate, conjugated)
            else:
                total += grad * differentiate(out.expr, inp.base)
        if wirtinger:
            total = promoted_reals(total, [t.base for t in variant.inputs if not t.integer])
        vjp[inp.name] = None if total == 0 else sp.piecewise_fold(total)
    return vjp


def upstream_symbol(variant: OpVariant, name: str, output) -> sp.Symbol:
    """The upstream gradient of `output` of a Wirtinger op: real where the output is."""
    return sp.Symbol(name, real=True) if output_real(variant.decl, output.name, dict(variant.attr_values)) else sp.Symbol(name)


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
    forward = {o.name: _eliminated(variant, forward_value(o), ranges) for o in variant.outputs}
    vjp = {}
    all_ranges = dict(ranges)
    for inp in variant.inputs:
        if inp.integer:  # positions: piecewise constant, no gradient
            vjp[inp.name] = None
            continue
        steps = input_steps(variant, inp, grads, ranges)
        all_ranges.update(steps.axis_ranges)
        terms = merged_elementwise([counted(t) for t in steps.eliminated])
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
    eliminated = [eliminate_deltas(variant, t, {**ranges, **axis_ranges}, outputs) for t in terms]
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
    if uses_wirtinger(variant):  # the upstream gradient within: a term of its own per part
        conjugated = [t.base for t in variant.inputs if not t.integer] if variant.decl.complex_ok else []
        contracted = indexed_vjp(out.expr, entry, upstream, lambda e, wrt: partial_derivative(variant, e, wrt), conjugated)
        return contracted, [Term(hoist_deltas(t.factor), t.sums) for t in normalize(hoist_deltas(contracted), sums_of(out, ranges))]
    partial = hoist_deltas(partial_derivative(variant, out.expr, entry))
    # an output's whole expression in its own derivative (a maximum's) is the output, passed
    # in: read it before index maps are solved, which would hide it. Not a constant output
    # (FusedBatchNormV3's empty reserve_space_3, all 0): a partial 0 or 1 is no output's entry
    outputs = {
        o.expr: sp.IndexedBase(o.name, shape=tuple(ranges[i][1] + 1 if i in ranges else 1 for i in o.indices))[o.indices]
        for o in variant.outputs
        if o.indices and o.expr.atoms(sp.Indexed)
    }
    partial = partial.xreplace(outputs)
    sums = sums_of(out, ranges)
    # hoisted again once out of their Sums (a Sum folds a delta back into its Piecewise)
    return partial, [Term(masks_as_indicators(hoist_deltas(t.factor)), t.sums) for t in normalize(upstream * partial, sums)]


def sums_of(out, ranges: dict) -> tuple:
    """The limits of a sum over `out`'s indices."""
    return tuple((i, *ranges[i]) for i in out.indices if i in ranges)


def forward_value(out) -> TensorValue:
    """An output's or a stage's value as terms, as its gradient's are."""
    terms = normalize(strip_stop_gradient(out.expr), ())  # may expand Sum(x + 1) into Sum(1): a count
    return TensorValue(out.indices, tuple(counted(Term(masks_as_indicators(t.factor), t.sums)) for t in terms))


def _eliminated(variant: OpVariant, value: TensorValue, ranges: dict) -> TensorValue:
    """A forward value with its Kronecker deltas summed out, as a gradient's are. An output
    index placed by a map of summed indices (`delta(h, i*s + a*d - p)`, a transposed
    convolution's) reads the map's inverse instead (`exact_div(h + p - a*d, s)`), solved for
    a summed index that runs along the output's axis (its range grows with the output's
    size, as a window's position does), never for a window offset."""
    return TensorValue(value.indices, tuple(_eliminated_term(variant, t, ranges) for t in value.terms))


def _eliminated_term(variant: OpVariant, term: Term, ranges: dict) -> Term:
    if not term.factor.has(sp.KroneckerDelta):
        return term
    return eliminate_deltas(variant, term, {**ranges, **{lim[0]: tuple(lim[1:]) for lim in term.sums}})

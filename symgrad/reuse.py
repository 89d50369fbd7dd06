"""Reuse of forward outputs: partials written in terms of the op's outputs where that is
cheaper, as TensorFlow does (Sigmoid: `grad * y * (1 - y)`, Tanh: `grad * (1 - y**2)`, Exp:
`grad * y`; Softmax's and a norm's gradients reading the output tensor). SymPy's `simplify`
does not find these (it turns sigmoid' into `1/(4*cosh(x/2)**2)`). A forward `y = x * h(x)`
also offers `h = y / x`, guarded near 0 (GELU's erf), as a second spelling each backend's
printer may take (`recomputed_or_reused`). Each rewrite is checked numerically first.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import random

import sympy as sp

from symgrad.declare import BATCH
from symgrad.derivation import Derivation, TensorValue, Term
from symgrad.extrema import REDUCTIONS
from symgrad.functions import recomputed_or_reused
from symgrad.stability import point_value

SAMPLE_POINTS = (-1.7, -0.6, 0.35, 0.8, 1.3, 2.1)  # where a rewrite is checked numerically


def reuse_forward_outputs(derivation: Derivation) -> Derivation:
    """Rewrite each elementwise gradient with the forward outputs wherever that is cheaper."""
    variant = derivation.variant
    outputs = [(sp.Symbol(o.name, real=True), derivation.forward[o.name]) for o in variant.outputs]
    inputs = [t.base for t in variant.inputs]
    vjp = {}
    for name, expr in derivation.vjp.items():
        for y, f in outputs:
            if expr is not None:
                expr = _reuse_or_keep(expr, y, f, inputs)
        vjp[name] = expr
    return dataclasses.replace(derivation, vjp=vjp)


def _reuse_or_keep(expr, y, f, inputs) -> sp.Expr:
    """The cheapest rewrite of `expr` with output `y`; `expr` itself where SymPy fails on
    one (this pass only saves work: it must never stop a derivation)."""
    try:
        return _cheapest(expr, _reuse_candidates(expr, y, f, inputs), inputs)
    except (TypeError, ValueError, NotImplementedError):  # e.g. "Invalid NaN comparison"
        return expr


def _reuse_candidates(expr, y, f, inputs) -> list[tuple[sp.Expr, dict]]:
    """Rewrites of `expr` in terms of output `y = f(inputs)`, each with how to evaluate `y`."""
    if isinstance(f, sp.Piecewise) or not f.free_symbols & set(inputs):
        return []
    candidates = [expr.subs(f, y)]
    if len(inputs) == 1:
        candidates += _by_inverse(expr, y, f, inputs[0])
        candidates += _by_quotient(expr, y, f, inputs[0])
    return [(c, {y: f}) for c in candidates if c != expr]


QUOTIENT_GUARD = 1e-30  # |x| below which `y / x` is replaced by its limit: see _by_quotient


def _by_quotient(expr, y, f, x) -> list[sp.Expr]:
    """For a forward `y = x * h(x)`, offer `h`'s functions in terms of `h = y / x` (GELU's
    `erf(x / sqrt(2)) = 2*y/x - 1`) as `recomputed_or_reused`: the backend picks.

    `y / x` is guarded: where `|x| <= QUOTIENT_GUARD` it is the limit `h(0)`. The guard keeps
    `y` a normal float32 or float64 wherever `y / x` is used (a subnormal `y` has lost the
    digits `y / x` needs), and the limit is exact to far below any dtype's rounding there:
    `h` is taken only when `|h'(0)| * QUOTIENT_GUARD` is below `1e-20 * |h(0)|`.
    """
    h = sp.cancel(f / x)
    if not h.atoms(sp.Function):
        return []
    at_zero, slope = h.subs(x, 0), sp.diff(h, x).subs(x, 0)
    if not (at_zero.is_number and slope.is_number and at_zero.is_finite and slope.is_finite and at_zero != 0):
        return []
    if abs(float(slope)) * QUOTIENT_GUARD > 1e-20 * abs(float(at_zero)):
        return []
    quotient = sp.Piecewise((y / x, sp.Abs(x) > QUOTIENT_GUARD), (at_zero, True))
    result = []
    for function in [a for a in h.atoms(sp.Function) if x in a.free_symbols]:
        solved = _solve_linear(h, function, quotient)
        if solved is not None and expr.has(function):
            result.append(recomputed_or_reused(expr, expr.xreplace({function: solved})))
    return result


def _solve_linear(h, function, value) -> sp.Expr | None:
    """`function` such that `h == value`, where `h` is linear in `function`, else None."""
    unknown = sp.Dummy("F")
    linear = sp.expand(h.xreplace({function: unknown}))
    slope = linear.coeff(unknown, 1)
    rest = sp.expand(linear - slope * unknown)
    if slope == 0 or rest.has(unknown) or slope.has(unknown):
        return None
    return (value - rest) / slope


INVERTIBLE_OPS = 8  # larger forwards are not inverted: SymPy's solve has no time limit


def _by_inverse(expr, y, f, x) -> list[sp.Expr]:
    """Substitute `x = f^-1(y)` where SymPy can invert `f` and the result has no functions left.

    Only small forwards are tried: `solve` on GELU's tanh form runs for minutes. Substituting
    cancels `f(f^-1(y))` by itself (`exp(-log(z))` is `1/z`, `tanh(atanh(y))` is `y`); a
    function it leaves, `simplify` has never removed in the library's elementwise ops (Acosh's
    `sqrt(cosh(y) - 1)`, Erf's `exp(-erfinv(y)**2)`), at 5 s of CPU over them: such a
    solution is dropped before simplifying. A rewrite missed costs speed, never correctness.
    """
    if sp.count_ops(f) > INVERTIBLE_OPS:
        return []
    free_y = sp.Symbol(y.name)
    try:
        solutions = sp.solve(sp.Eq(free_y, f), x)
    except (NotImplementedError, ValueError, TypeError):  # SymPy gives up, or trips on a NaN
        return []
    result = []
    for solution in solutions[:4]:
        substituted = expr.subs(x, solution)
        if substituted.atoms(sp.Function):
            continue
        simplified = sp.simplify(substituted)
        for candidate in (simplified, sp.factor(simplified)):
            candidate = candidate.subs(free_y, y)
            if x not in candidate.free_symbols and not candidate.atoms(sp.Function):
                result.append(candidate)
    return result


def _cheapest(expr, candidates, inputs) -> sp.Expr:
    """The cheapest candidate that beats `expr` and agrees with it numerically, else `expr`."""
    best, best_cost = expr, _cost(expr, inputs)
    for candidate, outputs in candidates:
        cost = _cost(candidate, inputs)
        if cost < best_cost and _agrees(expr, candidate, outputs):
            best, best_cost = candidate, cost
    return best


def _cost(expr, inputs) -> tuple[int, int]:
    """Operations (a function call counting 4), then whether the inputs are still needed;
    a value with two spellings counts as reused (a backend takes it where it is cheaper)."""
    expr = expr.replace(lambda n: isinstance(n, recomputed_or_reused), lambda n: n.reused)
    calls = len(expr.atoms(sp.Function))
    return sp.count_ops(expr) + 3 * calls, int(bool(expr.free_symbols & set(inputs)))


def _agrees(expr, candidate, outputs: dict) -> bool:
    """True when `candidate` (outputs substituted) equals `expr` wherever both are finite,
    and stays finite where `expr` is finite at a variable's zero."""
    rng = random.Random(0)
    symbols = sorted(expr.free_symbols | set().union(*(f.free_symbols for f in outputs.values())), key=str)
    other_expr = candidate.subs(outputs)
    compared = 0
    for point in SAMPLE_POINTS:
        values = {s: point + 0.1 * rng.random() for s in symbols}
        exact, other = _number(expr, values), _number(other_expr, values)
        if exact is not None and other is not None:
            if abs(exact - other) > 1e-9 * (1 + abs(exact)):
                return False
            compared += 1
        for s in symbols:  # `y*z/x` (z = x**y) agrees with `y*x**(y - 1)` but is NaN at x == 0
            at_zero = {**values, s: 0}
            if _number(expr, at_zero) is not None and _number(other_expr, at_zero) is None:
                return False
    return compared >= 2


def _number(expr, values) -> complex | None:
    """The value of `expr` at `values`, or None where it is not a finite real number."""
    try:
        z = complex(expr.evalf(subs=values))
    except TypeError:  # zoo and the like
        return None
    if abs(z.imag) < 1e-12 and abs(z.real) != float("inf") and z.real == z.real:
        return z
    return None


def reuse_tensor_outputs(derivation: Derivation) -> Derivation:
    """Write each tensor gradient's terms with the op's outputs wherever that is cheaper.

    Softmax's gradient has `exp(x[p, q]) / Sum(exp(x[p, k]), k)` in every term: that is the
    output `softmax[p, q]`, and with it the gradient is TensorFlow's `(grad - sum(grad * y)) * y`.
    """
    staging = derivation.staging
    # a composed op's stages are values the gradient may read too (a mean, reused)
    outputs = staging.outputs + staging.stages if staging else derivation.variant.outputs
    # a norm's output, 0 where it is 0 and the root elsewhere, is the root everywhere
    outputs += tuple(dataclasses.replace(o, expr=point_value(o.expr)) for o in outputs if point_value(o.expr) is not None)

    def reused(value):
        if value is None:
            return None
        terms = tuple(
            Term(reuse_in_factor(t.factor, value.indices + tuple(s[0] for s in t.sums), outputs), t.sums)
            for t in value.terms
        )
        return TensorValue(value.indices, terms)

    vjp = {name: reused(value) for name, value in derivation.vjp.items()}
    if staging:  # a stage's gradient reads the outputs as its inputs' gradients do
        grads = {name: reused(value) for name, value in staging.grads.items()}
        staging = dataclasses.replace(staging, grads=grads)
    return dataclasses.replace(derivation, vjp=vjp, staging=staging)


def reuse_in_factor(factor: sp.Expr, indices: tuple, outputs) -> sp.Expr:
    """Substitute output entries `y[t]` for their expressions, t over tuples of `indices`."""
    improved = True
    while improved:
        improved = False
        for out in outputs:
            reads = _entries(out.expr)
            tried = list(_index_tuples(out.indices, _candidate_indices(factor, reads, indices)))
            tried += [e for e in _elementwise_entries(factor, out, reads) if e not in tried]
            for entry in tried:
                at = dict(zip(out.indices, entry))
                # `y[t]`'s expression occurs in `factor` only if its entries do, and can be
                # solved for one only if that one does: checked first, substituting is slow
                mapped = {e.xreplace(at) for e in reads}
                found = mapped & factor.atoms(sp.Indexed)
                if not found:
                    continue
                expr = out.expr.xreplace(at)
                value = sp.IndexedBase(out.name)[entry] if entry else sp.Symbol(out.name)
                direct = [factor.subs(expr, value)] if found == mapped else []
                for candidate in [*direct, *_by_inverse_entry(factor, expr, value, entry)]:
                    if sp.count_ops(candidate) < sp.count_ops(factor):
                        factor, improved = candidate, True
    return factor


@functools.lru_cache(maxsize=1024)
def _entries(expr: sp.Expr) -> frozenset:
    """The tensor entries `expr` reads, found once per expression: an output's expression (a
    mirror pad's, one branch per region) is otherwise searched again for every term of every
    gradient, a fifth of the op's derivation."""
    return frozenset(expr.atoms(sp.Indexed))


def _candidate_indices(factor: sp.Expr, reads: frozenset, indices: tuple) -> tuple:
    """The indices an entry of an output found in `factor` could have, given the entries
    `reads` the output reads: none when `factor` lacks a tensor it reads, else those of
    `factor`'s entries of such tensors (a convolution's factor, with one of its two tensors,
    would otherwise try every permutation)."""
    wanted = {e.base for e in reads}
    entries = [e for e in factor.atoms(sp.Indexed) if e.base in wanted]
    if not wanted <= {e.base for e in entries}:
        return ()
    found = set().union(*(e.free_symbols for e in entries))
    return tuple(i for i in indices if i in found)


def _elementwise_entries(factor: sp.Expr, out, reads: frozenset) -> list[tuple]:
    """The entries of `out` at the positions of `factor`'s entries of a tensor `out` reads at
    its own position (`exp(x[p, q]) / S[p]` in a gradient, `y[i, j] = exp(x[i, j]) / S[i] -
    labels[i, j]`: the entry (p, q)), though `factor` lacks other tensors `out` reads
    (`labels`): `_by_inverse_entry` solves for such an entry, which `_candidate_indices` does
    not offer. Only for an output elementwise in its own indices (no sum, no merged axes),
    whose expression is then solved entry for entry."""
    if out.groups or out.expr.has(*REDUCTIONS):
        return []
    own = {e.base for e in reads if e.indices == tuple(out.indices) and len(set(e.indices)) == len(e.indices)}
    entries = sorted((e for e in factor.atoms(sp.Indexed) if e.base in own), key=str)
    return list(dict.fromkeys(e.indices for e in entries if all(isinstance(i, sp.Symbol) for i in e.indices)))


def _by_inverse_entry(factor, expr, value, entry) -> list[sp.Expr]:
    """Solve `value = expr` for the input entry at `entry` and substitute it into `factor`
    (LogSoftmax: `x[p] = y[p] + log(S)` turns `exp(x[p]) / S` into `exp(y[p])`), also with
    common factors pulled out of sums (`(a/S + b/S) * S` is `a + b`: SoftmaxCrossEntropy's
    `exp(x[p]) = (backprop[p] + labels[p]) * S`)."""
    result = []
    for x in [e for e in expr.atoms(sp.Indexed) if e.indices == entry and factor.has(e)]:
        solution = _inverse(expr, x, value)
        if solution is not None and not _divides_by_an_entry(solution):
            candidate = factor.subs(x, solution)
            if not candidate.has(x):
                result += [candidate, sp.factor_terms(candidate)]
    return result


def _divides_by_an_entry(expr) -> bool:
    """Whether `expr` divides by a tensor entry: LayerNorm's `x = (y - offset) / scale * ...`
    would make its gradient infinite where `scale` is 0, where it is finite."""
    return any(p.exp.is_negative and p.base.has(sp.Indexed) for p in expr.atoms(sp.Pow))


def _inverse(expr, x, y):
    """`x` such that `expr` (which reads `x` once) is `y`, peeling one invertible layer at a
    time (a sum, a product, `exp`, `log`, a reciprocal or a root), or None. (SymPy's `solve`
    does this and more, but can take minutes on nested functions.)"""
    while expr != x:
        if expr.count(x) != 1:
            return None
        if isinstance(expr, (sp.Add, sp.Mul)):
            inner = next(a for a in expr.args if a.has(x))
            rest = expr.func(*[a for a in expr.args if a is not inner])
            y = y - rest if isinstance(expr, sp.Add) else y / rest
        elif isinstance(expr, sp.exp):
            inner, y = expr.args[0], sp.log(y)
        elif isinstance(expr, sp.log):
            inner, y = expr.args[0], sp.exp(y)
        elif isinstance(expr, sp.Pow) and not expr.exp.has(x) and (expr.exp == -1 or (1 / expr.exp).is_integer):
            inner, y = expr.base, y ** (1 / expr.exp)
        else:
            return None
        expr = inner
    return y


def _index_tuples(pattern: tuple, indices: tuple):
    """Tuples of distinct `indices` shaped like `pattern` (a leading batch index stays put)."""
    if pattern and pattern[0] == BATCH:
        if BATCH not in indices:
            return
        for rest in _index_tuples(pattern[1:], tuple(i for i in indices if i != BATCH)):
            yield (BATCH,) + rest
        return
    symbols = [n for n, p in enumerate(pattern) if isinstance(p, sp.Symbol)]
    for chosen in itertools.permutations([i for i in indices if i != BATCH], len(symbols)):
        entry = list(pattern)  # literal subscripts (a kept size-1 axis) stay
        for n, i in zip(symbols, chosen):
            entry[n] = i
        yield tuple(entry)

"""Rewrites that keep a value finite where the math is finite, one rule each, in one table.

`exp(u)` overflows at u of about 89 in float32 and 710 in float64; a formula that divides two
such values, or multiplies one by something that vanishes there, gives inf/inf or inf * 0 = NaN
where its value is finite. Each rule below rewrites one such form into functions that do not
overflow; `stabilized` applies every rule to an expression of a real op, bottom-up:

* `softplus`: `log(1 + exp(u))` is `softplus(u)` (finite, and u itself for large u).
* `logistic` (of a product's factors, as the rules below): `exp(u)**p / (1 + exp(u))**q`
  (q a number or an attribute) is `sigmoid(u)**p * sigmoid(-u)**(q - p)` unless q < p, then
  `exp((p - q)*u) * sigmoid(u)**q`: bounded factors only (Swish's derivative,
  `x*exp(-x)/(1 + exp(-x))**2`, is NaN at x = -1000 otherwise).
* `log_sigmoid`: `log(sigmoid(u))` is `-softplus(-u)` and `log(1 - sigmoid(u))` is
  `-softplus(u)` (a binary cross-entropy or focal loss written from its formula); and
  `sigmoid_power`: `sigmoid(u)**q`, q no whole number, is `exp(-q*softplus(-u))`.
* `exp_ratio`: `exp(a) / (exp(a) + b)` is `1 / (1 + b*exp(-a))` (b not 1: the `logistic`
  rule takes b = 1), 1 rather than inf/inf for large a.
* `exp_sum`: any other `1 / (sum_j c_j exp(a_j))**q` has the largest exponent subtracted
  inside the sum and its exp merged into the numerator's (a softmax's trick, for any sum of
  exponentials: `1/(1 + exp(-x) + exp(-2x))` and its derivative).
* `cumulative_logsumexp`: `log(Sum(exp(u), (k, 0, i)))` is `logsumexp(u, (k, 0, i))`, a
  log-space scan whose derivative is the softmax `exp(u - logsumexp)` (the cumulative sum of
  `exp` overflows at 89, and its gradient `exp(x) * cumsum(g / sum)` with it).
* `scaled_bessel`: `besseli(n, u) * exp(-|u|)` is `scaled_besseli(n, u)` (BesselI0e).
* `split_growth`: `exp(u) * v**-p` (p > 0), u growing without bound with the tensor entry v,
  is `split_exp(v**-p, u)`, computed as `(v**-p * exp(u/2)) * exp(u/2)`: finite up to where
  the product overflows, not where exp(u) does (Ei's derivative, exp(x) / x, in float32 for
  88.7 < x < 93).
* `hyperbolic`: a product dividing by `cosh` or `sinh` has them written as exponentials,
  for `exp_sum` to scale (`1/cosh(x)` is finite where `cosh(x)` overflows).
* `point_branch`: where a derivative divides by zero but has a limit (a norm's, x / |x| at
  the origin), the declaration states the value there as a branch of its own,
  `Piecewise((0, Eq(total, 0)), (sqrt(total), True))`, and the gradient there is that branch's.
  The rule restates the condition on the value, `Eq(sqrt(total), 0)`, where the value meets
  the branch's constant at that point alone: the gradient then reads the op's output (the
  norm) in its condition and its division, as a hand-written one does. Neither branch is
  evaluated where it divides by zero (the printers' double where).

A declaration is rewritten before it is differentiated (its derivatives are then those of
`sigmoid` and `softplus`, which are bounded), and each derived gradient again (a derivative
may build the forms anew). A complex op's declaration is rewritten by `logistic` alone, with
whole powers, the one rule whose rewrite holds for complex values: the others are for reals.
"""

from __future__ import annotations

import dataclasses

import sympy as sp

from symgrad.declare import stop_gradient
from symgrad.functions import bounded_by_index, logsumexp, scaled_besseli, sigmoid, softplus, split_exp


def _exponent(node) -> sp.Expr | None:
    """u where `node` is exp(u)."""
    return node.args[0] if isinstance(node, sp.exp) else None


def _one_plus_exp(node) -> sp.Expr | None:
    """u where `node` is 1 + exp(u)."""
    if isinstance(node, sp.Add) and len(node.args) == 2 and sp.S.One in node.args:
        (other,) = [a for a in node.args if a != sp.S.One]
        return _exponent(other)
    return None


def softplus_rule(node) -> sp.Expr | None:
    """log(1 + exp(u)) -> softplus(u)."""
    if isinstance(node, sp.log):
        u = _one_plus_exp(node.args[0])
        if u is not None:
            return softplus(u)
    return None


def logistic(factors: list, whole: bool = False) -> sp.Expr | None:
    """exp(u)**p / (1 + exp(u))**q -> sigmoid forms, q a number or a symbol (an attribute:
    a focal loss's `(1 - p)**gamma`); `whole`: only where p and q are whole numbers, for
    which the rewrite is an identity of complex values too."""
    for k, factor in enumerate(factors):
        base, power = factor.as_base_exp()
        u = _one_plus_exp(base)
        if u is None or power.is_nonnegative or (power.is_number and not power.is_negative):
            continue
        rest = factors[:k] + factors[k + 1 :]
        p, rest = _exp_power_of(u, rest)
        if whole and not (p.is_integer and power.is_integer):
            continue
        return sp.Mul(*rest) * _logistic(u, p, -power)
    return None


def whole_logistic(factors: list) -> sp.Expr | None:
    """`logistic` where its powers are whole numbers: a complex op's sigmoid, `1/(1 + exp(-x))`,
    is one function, computed without overflow, whose derivative is bounded."""
    return logistic(factors, whole=True)


def _exp_power_of(u, factors: list) -> tuple[sp.Expr, list]:
    """(p, the other factors) where one of `factors` is exp(p*u) with p > 0, else (0, factors)."""
    for k, factor in enumerate(factors):
        v = _exponent(factor)
        if v is not None:
            p = sp.simplify(v / u)
            if p.is_number and p.is_positive:
                return p, factors[:k] + factors[k + 1 :]
    return sp.S.Zero, factors


def _logistic(u, p, q) -> sp.Expr:
    """exp(u)**p / (1 + exp(u))**q in bounded factors (but for exp((p - q) u) where p > q,
    which is as large as the value itself)."""
    if (q - p).is_negative:
        return sp.exp((p - q) * u) * sigmoid(u) ** q
    return sigmoid(u) ** p * sigmoid(-u) ** (q - p)  # an identity for any p and q


def _sigmoid_complement(node) -> sp.Expr | None:
    """u where `node` is 1 - sigmoid(u) (which is sigmoid(-u), exactly: no cancellation)."""
    if isinstance(node, sp.Add) and len(node.args) == 2 and sp.S.One in node.args:
        (other,) = [a for a in node.args if a != sp.S.One]
        if isinstance(-other, sigmoid):
            return (-other).args[0]
    return None


def log_sigmoid(node) -> sp.Expr | None:
    """log(sigmoid(u)) -> -softplus(-u), log(1 - sigmoid(u)) -> -softplus(u): a
    log-probability finite at any logit (log(0) once sigmoid rounds to 0 or 1 otherwise:
    |u| > 17 in float32)."""
    if not isinstance(node, sp.log):
        return None
    inner = node.args[0]
    if isinstance(inner, sigmoid):
        return -softplus(-inner.args[0])
    u = _sigmoid_complement(inner)
    return None if u is None else -softplus(u)


def sigmoid_power(node) -> sp.Expr | None:
    """sigmoid(u)**q -> exp(-q*softplus(-u)) and (1 - sigmoid(u))**q -> exp(-q*softplus(u)),
    for a power that is no whole number (an attribute's: a focal loss's `(1 - p)**gamma`):
    in log space, every derivative is finite. As a power, 0**(q - 1) is inf where the
    sigmoid rounds to 0 or 1 (|u| > 88 in float32), and its derivative NaN."""
    if not isinstance(node, sp.Pow) or node.exp.is_integer:
        return None
    if isinstance(node.base, sigmoid):
        return sp.exp(-node.exp * softplus(-node.base.args[0]))
    u = _sigmoid_complement(node.base)
    return None if u is None else sp.exp(-node.exp * softplus(u))


def exp_ratio_rule(node) -> sp.Expr | None:
    """exp(a) / (exp(a) + b) -> 1 / (1 + b*exp(-a)), within a product."""
    if not isinstance(node, sp.Mul):
        return None
    for numerator in (f for f in node.args if isinstance(f, sp.exp)):
        for denominator in node.args:
            base, power = denominator.as_base_exp()
            if power == -1 and isinstance(base, sp.Add) and numerator in base.args:
                rest = [f for f in node.args if f is not numerator and f is not denominator]
                scaled = sp.Add(*[term / numerator for term in base.args])  # exp(a)/exp(a) is 1
                return sp.Mul(*rest) / scaled
    return None


def hyperbolic(factors: list) -> sp.Expr | None:
    """Dividing by cosh(u) or sinh(u) (a sech, its derivative -sinh/cosh**2): every cosh and
    sinh of the product written as exponentials, for `exp_sum` to scale: cosh overflows at
    |u| of about 710 where 1/cosh is finite."""
    divides = any(
        isinstance(f.as_base_exp()[0], (sp.cosh, sp.sinh)) and f.as_base_exp()[1].is_negative for f in factors
    )
    if not divides:
        return None
    as_exp = lambda n: n.rewrite(sp.exp)
    product = sp.Mul(*factors).replace(lambda n: isinstance(n, (sp.cosh, sp.sinh)), as_exp)
    return exp_sum(list(sp.Mul.make_args(product))) or product


def exp_sum(factors: list) -> sp.Expr | None:
    """1 / (sum_j c_j exp(a_j))**q with two or more exponents
    (a number counting as exp(0)) -> exp(-q*m) / (sum_j c_j exp(a_j - m))**q with m the largest
    a_j, exp(-q*m) merged into another factor's exponent: the sum is then at least its largest
    term, 1, and nothing overflows (the maximum subtracted, as in a softmax)."""
    for k, factor in enumerate(factors):
        base, power = factor.as_base_exp()
        done = base.has(stop_gradient, sp.Max)  # its maximum subtracted already
        terms = _exp_terms(base) if power.is_number and power.is_negative and not done else None
        if terms is None or len({a for _, a in terms}) < 2:
            continue
        exponents = set(a for _, a in terms)
        largest = stop_gradient(_largest(exponents))  # any value is exact: no derivative
        scaled = sp.Add(*[c * sp.exp(a - largest) for c, a in terms])
        rest = _times_exp(factors[:k] + factors[k + 1 :], power * largest)
        return rest * scaled**power
    return None


def _largest(exponents: set) -> sp.Expr:
    """The largest of `exponents`: |a| for {a, -a} (a cosh's), else their Max."""
    a, *rest = exponents
    return sp.Abs(a) if rest == [-a] else sp.Max(*exponents)


def _exp_terms(node) -> list[tuple[sp.Expr, sp.Expr]] | None:
    """(c, a) per term c*exp(a) of a sum of them and numbers, None for anything else."""
    if not isinstance(node, sp.Add):
        return None
    terms = []
    for term in node.args:
        if term.is_number:
            terms.append((term, sp.S.Zero))
            continue
        exps = [f for f in sp.Mul.make_args(term) if isinstance(f, sp.exp)]
        coefficient = term / exps[0] if len(exps) == 1 else None
        if coefficient is None or not coefficient.is_number:
            return None
        terms.append((coefficient, exps[0].args[0]))
    return terms if any(a != 0 for _, a in terms) else None


def _times_exp(factors: list, exponent: sp.Expr) -> sp.Expr:
    """The product of `factors` and exp(exponent), merged into a factor that is an exp or a
    sum of exp terms where there is one (so that a large and a small exp never meet)."""
    for k, factor in enumerate(factors):
        if isinstance(factor, sp.exp):
            return sp.Mul(*factors[:k], sp.exp(factor.args[0] + exponent), *factors[k + 1 :])
        terms = _exp_terms(factor)
        if terms is not None:
            merged = sp.Add(*[c * sp.exp(a + exponent) for c, a in terms])
            return sp.Mul(*factors[:k], merged, *factors[k + 1 :])
    return sp.Mul(*factors) * sp.exp(exponent)


def scaled_bessel(factors: list) -> sp.Expr | None:
    """I_n(u) * exp(-|u|) -> scaled_besseli(n, u): I_n overflows at |u| of about 710 (float64)
    where the product is finite."""
    for k, factor in enumerate(factors):
        if isinstance(factor, sp.exp) and isinstance(-factor.args[0], sp.Abs):
            u = (-factor.args[0]).args[0]
            for m, bessel in enumerate(factors):
                if isinstance(bessel, sp.besseli) and bessel.args[1] == u:
                    rest = [f for j, f in enumerate(factors) if j not in (k, m)]
                    return sp.Mul(*rest) * scaled_besseli(bessel.args[0], u)
    return None


def cumulative_logsumexp(node) -> sp.Expr | None:
    """log(Sum(exp(u), (k, lo, hi))) over a range ending at another index -> logsumexp(u, ...):
    a log-space scan. (Over a whole axis a declaration states the stable form itself, with
    the row maximum under `stop_gradient`; a running maximum is no cumulative sum.)"""
    if isinstance(node, sp.log) and isinstance(node.args[0], sp.Sum):
        total = node.args[0]
        u = _exponent(total.function)
        if u is not None and len(total.limits) == 1 and any(map(bounded_by_index, total.limits[0][1:])):
            return logsumexp(u, *total.limits)
    return None


def split_growth(factors: list) -> sp.Expr | None:
    """exp(u) * v**-p -> split_exp(v**-p, u), for p > 0 and u a polynomial in the tensor
    entry v that grows without bound as |v| does (Ei's derivative exp(x) / x): where exp(u)
    overflows, the power is below 1 and the product may still be finite. Not where u is bounded
    above (exp(-x**2) / x): exp(u) never overflows there, and one exp is cheaper than two."""
    for k, factor in enumerate(factors):
        u = _exponent(factor)
        if u is None:
            continue
        for m, power in enumerate(factors):
            base, exponent = power.as_base_exp()
            if m != k and exponent.is_number and exponent.is_negative and _grows_with(u, base):
                rest = [f for j, f in enumerate(factors) if j not in (k, m)]
                return sp.Mul(*rest) * split_exp(power, u)
    return None


def _grows_with(u, v) -> bool:
    """Whether `u` is a polynomial in the tensor entry (or symbol) `v` alone, with number
    coefficients, unbounded above as |v| grows: of odd degree, or of even degree with a
    positive leading coefficient."""
    if not isinstance(v, (sp.Symbol, sp.Indexed)) or not u.has(v) or u.free_symbols - v.free_symbols:
        return False
    try:
        polynomial = sp.Poly(u, v)
    except sp.PolynomialError:
        return False
    degree, leading = polynomial.degree(), polynomial.LC()
    return leading.is_number and (degree % 2 == 1 or bool(leading > 0))


def on_products(rewrite):
    """Node rules applying `rewrite` (of a product's factors) to products, then to powers
    outside a product: applied to a power inside one, it would miss the other factors."""
    return (
        lambda node: rewrite(list(node.args)) if isinstance(node, sp.Mul) else None,
        lambda node: rewrite([node]) if isinstance(node, sp.Pow) else None,
    )


def point_branch(node) -> sp.Expr | None:
    """Piecewise((c, Eq(u, v)), (e, True)), e a function of u alone, continuous at u = v with
    value c there and nowhere else -> Piecewise((c, Eq(e, c)), (e, True)): the same value, whose gradient is 0
    at the point and e' elsewhere."""
    if not isinstance(node, sp.Piecewise) or len(node.args) != 2:
        return None
    (c, condition), (e, last) = node.args
    if last != sp.true or not isinstance(condition, sp.Eq) or not c.is_number or condition == sp.Eq(e, c):
        return None
    u, v = condition.args if not condition.args[0].is_number else condition.args[::-1]
    at = sp.Dummy("at", real=True)
    value = e.xreplace({u: at})
    if value.free_symbols != {at} or value.atoms(sp.Indexed) or not v.is_number:
        return None  # a function of u alone: its roots are then known
    if sp.simplify(value.subs(at, v) - c) != 0:
        return None
    if sp.solveset(value - c, at, sp.S.Reals) != sp.FiniteSet(v):
        return None
    return sp.Piecewise((c, sp.Eq(e, c)), (e, True))


def point_value(node) -> sp.Expr | None:
    """e where `node` is `point_branch`'s result, Piecewise((c, Eq(e, c)), (e, True)): equal to e everywhere."""
    if isinstance(node, sp.Piecewise) and len(node.args) == 2:
        (c, condition), (e, last) = node.args
        if last == sp.true and condition == sp.Eq(e, c):
            return e
    return None


RULES = (
    softplus_rule, cumulative_logsumexp, *on_products(logistic), log_sigmoid, sigmoid_power, exp_ratio_rule,
    *on_products(hyperbolic),
    *on_products(exp_sum), on_products(scaled_bessel)[0], on_products(split_growth)[0], point_branch,
)


COMPLEX_RULES = on_products(whole_logistic)  # those whose rewrites are identities of complex values


def stabilized(expr: sp.Expr, rules: tuple = RULES) -> sp.Expr:
    """`expr` with every rule applied wherever it matches, innermost first."""
    if not isinstance(expr, sp.Basic):
        return expr
    for rule in rules:
        expr = expr.replace(lambda node: rule(node) is not None, rule)
    return expr


def stabilized_outputs(variant):
    """`variant` (an `OpVariant`) with its outputs' and stages' expressions stabilized; where
    the op is complex, by the rules whose rewrites hold for complex values."""
    rules = COMPLEX_RULES if variant.decl.complex_ok or variant.decl.wirtinger else RULES
    restate = lambda outputs: tuple(dataclasses.replace(o, expr=stabilized(o.expr, rules)) for o in outputs)
    return dataclasses.replace(variant, outputs=restate(variant.outputs), stages=restate(variant.stages))

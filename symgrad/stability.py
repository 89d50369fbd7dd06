"""Rewrites that keep a value finite where the math is finite, one rule each, in one table.

`exp(u)` overflows at u of about 89 in float32 and 710 in float64; a formula that divides two
such values, or multiplies one by something that vanishes there, gives inf/inf or inf * 0 = NaN
where its value is finite. Each rule below rewrites one such form into functions that do not
overflow; `stabilized` applies every rule to an expression of a real op, bottom-up:

* `softplus`: `log(1 + exp(u))` is `softplus(u)` (finite, and u itself for large u).
* `logistic`: `exp(u)**p / (1 + exp(u))**q` is `sigmoid(u)**p * sigmoid(-u)**(q - p)` for
  p <= q, else `exp((p - q)*u) * sigmoid(u)**q`: bounded factors only (Swish's derivative,
  `x*exp(-x)/(1 + exp(-x))**2`, is NaN at x = -1000 otherwise).
* `exp_ratio`: `exp(a) / (exp(a) + b)` is `1 / (1 + b*exp(-a))` (b not 1: the `logistic`
  rule takes b = 1), 1 rather than inf/inf for large a.

A declaration is rewritten before it is differentiated (its derivatives are then those of
`sigmoid` and `softplus`, which are bounded), and each derived gradient again (a derivative
may build the forms anew). Complex ops are left as declared: these identities are for reals.
"""

from __future__ import annotations

import dataclasses

import sympy as sp

from symgrad.functions import sigmoid, softplus


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


def logistic_rule(node) -> sp.Expr | None:
    """In a product, exp(u)**p / (1 + exp(u))**q -> sigmoid forms."""
    return _logistic_in(list(node.args)) if isinstance(node, sp.Mul) else None


def lone_logistic_rule(node) -> sp.Expr | None:
    """1 / (1 + exp(u))**q outside a product (after `logistic_rule`) -> sigmoid(-u)**q."""
    return _logistic_in([node]) if isinstance(node, sp.Pow) else None


def _logistic_in(factors: list) -> sp.Expr | None:
    for k, factor in enumerate(factors):
        base, power = factor.as_base_exp()
        u = _one_plus_exp(base)
        if u is None or not (power.is_number and power.is_negative):
            continue
        rest = factors[:k] + factors[k + 1 :]
        p, rest = _exp_power_of(u, rest)
        return sp.Mul(*rest) * _logistic(u, p, -power)
    return None


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
    if p <= q:
        return sigmoid(u) ** p * sigmoid(-u) ** (q - p)
    return sp.exp((p - q) * u) * sigmoid(u) ** q


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


RULES = (softplus_rule, logistic_rule, lone_logistic_rule, exp_ratio_rule)


def stabilized(expr: sp.Expr) -> sp.Expr:
    """`expr` with every rule applied wherever it matches, innermost first."""
    if not isinstance(expr, sp.Basic):
        return expr
    for rule in RULES:
        expr = expr.replace(lambda node: rule(node) is not None, rule)
    return expr


def stabilized_outputs(variant):
    """`variant` (an `OpVariant`) with its outputs' and stages' expressions stabilized; as
    declared where the op is complex."""
    if variant.decl.complex_ok:
        return variant
    restate = lambda outputs: tuple(dataclasses.replace(o, expr=stabilized(o.expr)) for o in outputs)
    return dataclasses.replace(variant, outputs=restate(variant.outputs), stages=restate(variant.stages))

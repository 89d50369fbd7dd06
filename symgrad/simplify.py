"""Simplification passes over a derivation, applied in order by `simplify`.

* `reuse_forward_outputs`: write partials in terms of the op's outputs where that is cheaper,
  as TensorFlow does (Sigmoid: `grad * y * (1 - y)`, Tanh: `grad * (1 - y**2)`, Exp: `grad * y`).
  SymPy's `simplify` does not find these (it turns sigmoid' into `1/(4*cosh(x/2)**2)`).
* `share_subexpressions`: SymPy's `cse` over all of an op's gradients at once.
"""

from __future__ import annotations

import dataclasses
import random

import sympy as sp

from symgrad.declare import ELEMENTWISE
from symgrad.derive import Derivation

SAMPLE_POINTS = (-1.7, -0.6, 0.35, 0.8, 1.3, 2.1)  # where a rewrite is checked numerically


def simplify(derivation: Derivation) -> Derivation:
    """Apply every pass, in order."""
    if derivation.variant.decl.kind == ELEMENTWISE:
        derivation = reuse_forward_outputs(derivation)
    return derivation


def reuse_forward_outputs(derivation: Derivation) -> Derivation:
    """Rewrite each elementwise gradient with the forward outputs wherever that is cheaper."""
    variant = derivation.variant
    outputs = [(sp.Symbol(o.name, real=True), derivation.forward[o.name]) for o in variant.outputs]
    inputs = [t.base for t in variant.inputs]
    vjp = {}
    for name, expr in derivation.vjp.items():
        for y, f in outputs:
            if expr is not None:
                expr = _cheapest(expr, _reuse_candidates(expr, y, f, inputs), inputs)
        vjp[name] = expr
    return dataclasses.replace(derivation, vjp=vjp)


def _reuse_candidates(expr, y, f, inputs) -> list[tuple[sp.Expr, dict]]:
    """Rewrites of `expr` in terms of output `y = f(inputs)`, each with how to evaluate `y`."""
    if isinstance(f, sp.Piecewise) or not f.free_symbols & set(inputs):
        return []
    candidates = [expr.subs(f, y)]
    if len(inputs) == 1:
        candidates += _by_inverse(expr, y, f, inputs[0])
    return [(c, {y: f}) for c in candidates if c != expr]


def _by_inverse(expr, y, f, x) -> list[sp.Expr]:
    """Substitute `x = f^-1(y)` where SymPy can invert `f` and the result has no functions left."""
    free_y = sp.Symbol(y.name)
    try:
        solutions = sp.solve(sp.Eq(free_y, f), x)
    except (NotImplementedError, ValueError):
        return []
    result = []
    for solution in solutions[:4]:
        simplified = sp.simplify(expr.subs(x, solution))
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
    """Operations (a function call counting 4), then whether the inputs are still needed."""
    calls = len(expr.atoms(sp.Function))
    return sp.count_ops(expr) + 3 * calls, int(bool(expr.free_symbols & set(inputs)))


def _agrees(expr, candidate, outputs: dict) -> bool:
    """True when `candidate` (with outputs substituted) equals `expr` wherever both are finite."""
    rng = random.Random(0)
    symbols = sorted(expr.free_symbols | set().union(*(f.free_symbols for f in outputs.values())), key=str)
    compared = 0
    for point in SAMPLE_POINTS:
        values = {s: point + 0.1 * rng.random() for s in symbols}
        try:
            exact = complex(expr.evalf(subs=values))
            other = complex(candidate.subs(outputs).evalf(subs=values))
        except TypeError:  # not a number at this point (zoo, nan)
            continue
        if not (_finite(exact) and _finite(other)):
            continue
        if abs(exact - other) > 1e-9 * (1 + abs(exact)):
            return False
        compared += 1
    return compared >= 2


def _finite(z: complex) -> bool:
    return abs(z.imag) < 1e-12 and abs(z.real) != float("inf") and z.real == z.real


def share_subexpressions(exprs: list[sp.Expr], prefix: str = "t") -> tuple[list, list[sp.Expr]]:
    """SymPy's `cse` over `exprs`: (temporaries as [(symbol, expr)], rewritten exprs)."""
    symbols = sp.numbered_symbols(prefix, real=True)
    replacements, reduced = sp.cse(exprs, symbols=symbols, order="canonical")
    return replacements, reduced

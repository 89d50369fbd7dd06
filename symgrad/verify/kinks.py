"""An elementwise op's kinks: the real points where its declaration changes branch or slope
(the roots of its branch conditions and of its `Abs`/`sign`/`Heaviside` arguments), per input,
where a condition or argument reads that input alone. `cases` probes each input at them."""

from __future__ import annotations

import sympy as sp

from symgrad.verify.ops_under_test import Variant


def kink_points(variant: Variant) -> dict[str, set[float]]:
    """Input name -> real points where the declaration's branch conditions or `Abs`/`sign`
    arguments change, for conditions and arguments of that input alone."""
    names = {sp.Symbol(n, real=True): n for n in variant.inputs}
    found: dict[str, set[float]] = {}
    for expr in variant.exprs:
        expr = expr.subs(variant.symbols)
        boundaries = [
            r.lhs - r.rhs
            for p in expr.atoms(sp.Piecewise)
            for _, c in p.args
            for r in sp.sympify(c).atoms(sp.core.relational.Relational)
        ]
        boundaries += [f.args[0] for f in expr.atoms(sp.Abs, sp.sign, sp.Heaviside)]
        for boundary in boundaries:
            free = boundary.free_symbols & set(names)
            if len(free) == 1 and boundary.free_symbols == free:
                symbol = free.pop()
                found.setdefault(names[symbol], set()).update(_real_roots(boundary, symbol))
    return found


def _real_roots(expr, symbol) -> set[float]:
    try:
        roots = sp.solveset(expr, symbol, domain=sp.S.Reals)
    except Exception:  # SymPy cannot solve it: no kink probes from this condition
        return set()
    if not isinstance(roots, sp.FiniteSet) or len(roots) > 4:
        return set()
    return {float(r) for r in roots if r.is_real}

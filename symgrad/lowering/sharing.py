"""Costly subexpressions that several statements of a branch compute alike, computed once.

A second order's terms, expanded by the derivation, repeat one `tanh(...)` twenty times, and
two gradients may be one array (an input's and its broadcast bias's). SymPy's `cse` over the
elementwise expressions of a branch's statements finds them; of its temporaries only those
that apply a function or a root, or that a statement computes whole, are kept, each computed
just before its first use, the rest written in place again (a hand-written gradient leaves
`x + y` inline). A temporary is kept only where nothing it reads is assigned again between its
first and last use; the statements inside a recomputation are left as they are.
"""

from __future__ import annotations

import dataclasses
import itertools
import re

import sympy as sp

from symgrad.functions import dawsn, scaled_besseli, sigmoid, softplus
from symgrad.ir import Assign, Elementwise, reads, statements

SMOOTH = (
    sp.exp, sp.log, sp.functions.elementary.trigonometric.TrigonometricFunction,
    sp.functions.elementary.hyperbolic.HyperbolicFunction, sigmoid, softplus, scaled_besseli, dawsn,
)


def share_costly(body: list, prefix: str) -> list:
    """`body` with the costly subexpressions its statements repeat computed once, into
    temporaries named `<prefix><n>` after those it has."""
    users = [n for n, s in enumerate(body) if isinstance(s, Assign) and _expressions(s.value)]
    owners = _owners(body, users)
    exprs = [e for n in users for e in _expressions(body[n].value)]
    if len(exprs) < 2:
        return body
    opaque, exprs = _branches_opaque(exprs)
    temps, reduced = sp.cse(exprs, symbols=_symbols("_cse", exprs), order="canonical")
    # what a statement computes whole (not an operand of a reduction or a scan: a mask there
    # is printed by its context)
    whole = {r for n, r in zip(owners, reduced) if r.is_Symbol and isinstance(body[n].value, Elementwise)}
    candidates = _candidates(temps, whole)
    dropped: set = set()
    while True:
        kept, rewritten = _substituted(exprs, candidates, dropped)
        placed = _placement(kept, rewritten, owners)
        invalid = {t for t, (first, last) in placed.items() if _reassigned(body, first, last, kept[t].xreplace(opaque))}
        if not invalid:
            break
        dropped |= invalid
    restored = {t: v.xreplace(opaque) for t, v in kept.items()}
    return _rewritten(body, users, [e.xreplace(opaque) for e in rewritten], restored, placed, prefix)


def _candidates(temps: list, whole: set) -> dict:
    """`cse`'s temporaries worth keeping -> their values, written out in full."""
    full, candidates = {}, {}
    for symbol, value in temps:
        full[symbol] = value.xreplace(full)
        if symbol in whole or _costly(full[symbol]):
            candidates[symbol] = full[symbol]
    return candidates


def _substituted(exprs: list, candidates: dict, dropped: set) -> tuple[dict, list]:
    """(the temporaries kept -> their values, reading kept ones; `exprs` reading them): each
    candidate not `dropped` that is read twice or more, replaced where it occurs as written
    (the rest of an expression keeps its form)."""
    chosen = {t: v for t, v in candidates.items() if t not in dropped}
    while True:
        mapping = {v: t for t, v in chosen.items()}
        inner = lambda v: v.func(*(a.xreplace(mapping) for a in v.args))
        kept = {t: inner(v) for t, v in chosen.items()}
        rewritten = [e.xreplace(mapping) for e in exprs]
        uses = {t: sum(e.count(t) for e in [*rewritten, *kept.values()]) for t in kept}
        once = {t for t, n in uses.items() if n < 2}
        if not once:
            return kept, rewritten
        chosen = {t: v for t, v in chosen.items() if t not in once}


def _expressions(value) -> list:
    """The elementwise expressions `value` computes (itself, or its fields'), worth sharing."""
    return [f.expr for f in _elementwise_fields(value).values()]


def _elementwise_fields(value) -> dict:
    """`value`'s fields holding an elementwise expression that is not a variable alone
    (`{"expr": value}` for an `Elementwise` itself)."""
    if isinstance(value, Elementwise):
        fields = {"expr": value}
    elif dataclasses.is_dataclass(value):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    else:
        fields = {}
    worth = lambda f: isinstance(f, Elementwise) and isinstance(f.expr, sp.Expr) and not f.expr.is_Atom
    return {name: f for name, f in fields.items() if worth(f)}


def _with_expressions(value, exprs: list):
    """`value` computing `exprs` in place of its own, in `_expressions`' order."""
    if isinstance(value, Elementwise):
        return Elementwise(exprs[0])
    return dataclasses.replace(value, **{name: Elementwise(e) for name, e in zip(_elementwise_fields(value), exprs)})


def _owners(body: list, users: list) -> list:
    """The position of the statement each expression belongs to, in `_expressions`' order."""
    return [n for n in users for _ in _expressions(body[n].value)]


def _symbols(stem: str, exprs: list):
    """Fresh names that no expression uses."""
    taken = {s.name for e in exprs for s in e.free_symbols}
    return (sp.Symbol(f"{stem}{n}") for n in itertools.count() if f"{stem}{n}" not in taken)


def _branches_opaque(exprs: list) -> tuple[dict, list]:
    """Each `Piecewise` as one symbol: a partial function a branch applies stays under its
    select (a framework that differentiates the code again guards it there)."""
    names = _symbols("_select", exprs)
    found = sorted({p for e in exprs for p in e.atoms(sp.Piecewise)}, key=sp.default_sort_key)
    stand_ins = {p: next(names) for p in found}
    opaque = {s: p for p, s in stand_ins.items()}
    return opaque, [e.xreplace(stand_ins) for e in exprs]


def _costly(expr) -> bool:
    """A smooth function applied (`tanh`, `exp`, `erf`, a sigmoid), or a root: what is worth
    computing once. Not what a printer prints by its context (an indicator, a mask, `Abs`),
    nor a function of numbers alone."""
    if not expr.free_symbols:
        return False
    if isinstance(expr, sp.Pow):
        return not expr.exp.is_Integer
    special = type(expr).__module__.startswith("sympy.functions.special.")
    return isinstance(expr, SMOOTH) or (special and not isinstance(expr, (sp.Heaviside, sp.DiracDelta)))


def _placement(kept: dict, reduced: list, at: list) -> dict:
    """Each kept temporary -> (the first, the last position of a statement that reads it,
    directly or through another temporary)."""
    uses = {t: [at[k] for k, r in enumerate(reduced) if r.has(t)] for t in kept}
    for t in reversed(list(kept)):  # a temporary's readers come after it
        for other, value in kept.items():
            if value.has(t):
                uses[t] += uses[other]
    return {t: (min(positions), max(positions)) for t, positions in uses.items()}


def _reassigned(body: list, first: int, last: int, value) -> bool:
    """Whether a variable `value` reads is assigned from the statement at `first` (which
    reads it first) up to the one at `last` (which reads it last): the temporary, computed
    before `first`, would hold another value there."""
    read = {s.name for s in value.free_symbols}
    assigned = {name.strip() for s in statements(body[first:last]) for name in s.target.split(",")}
    return bool(read & assigned)


def _rewritten(body: list, users: list, reduced: list, kept: dict, placed: dict, prefix: str) -> list:
    """`body` with each kept temporary assigned before its first reader, and its statements
    reading them; a temporary of `body` that held one whole now computes it there."""
    aliases = _aliases(body, users, reduced, kept, placed)
    names = {**_names(body, [t for t in kept if t not in aliases], placed, prefix), **aliases}
    exprs = iter(r.xreplace(names) for r in reduced)
    result = []
    for n, statement in enumerate(body):
        for t in kept:
            if placed[t][0] == n:
                result.append(Assign(str(names[t]), Elementwise(kept[t].xreplace(names))))
        if n in users:
            own = [next(exprs) for _ in _expressions(statement.value)]
            statement = Assign(statement.target, _with_expressions(statement.value, own))
        if not _copies_itself(statement):
            result.append(statement)
    return result


def _copies_itself(statement) -> bool:
    """`t0 = t0`: what a statement whose variable became a kept temporary's is left as."""
    return isinstance(statement, Assign) and statement.value == Elementwise(sp.Symbol(statement.target, real=True))


def _aliases(body: list, users: list, reduced: list, kept: dict, placed: dict) -> dict:
    """Kept temporaries that a statement computes whole and whose variable can hold from the
    first use on -> that variable: `grad_grad = t6` is `grad_grad` computing what `t6` did,
    where nothing between reads it before or assigns it again before `t6`'s last use."""
    aliases = {}
    for n, expr in zip(_owners(body, users), reduced):
        target = body[n].target
        if expr in kept and expr not in aliases and isinstance(body[n].value, Elementwise):
            first, last = placed[expr]
            before = statements(body[first:n])
            touched = {s.target for s in before} | set().union(*(reads(s.value) for s in before))
            if target not in touched | {s.target for s in statements(body[n + 1 : last])} | set(map(str, aliases.values())):
                aliases[expr] = sp.Symbol(target, real=True)
    return aliases


def _names(body: list, temporaries: list, placed: dict, prefix: str) -> dict:
    """A name for each of `temporaries`, numbered after `body`'s, in order of use."""
    pattern = re.compile(rf"{re.escape(prefix)}(\d+)$")
    numbers = [int(m.group(1)) for s in statements(body) for m in [pattern.match(s.target)] if m]
    start = max(numbers, default=-1) + 1
    order = sorted(temporaries, key=lambda t: (placed[t][0], temporaries.index(t)))
    return {t: sp.Symbol(f"{prefix}{start + k}", real=True) for k, t in enumerate(order)}

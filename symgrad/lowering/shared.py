"""Subexpressions an elementwise statement repeats, computed once before it, as a person
names them (a GELU gradient's tanh(u), x + bias): SymPy's `cse`, one statement at a time.
Then the temporaries a person would not write go: one that computes again what another
computed (`epsilon + variance` per output of a batch norm's second order), one that only
copies another, one that nothing reads, one that transposes an array only for a reduction
(`np.sum(np.transpose(x, (3, 0, 1, 2)), axis=(-3, -2, -1))` sums x over its first three axes).

Within one statement every variable means one array, so an equal subexpression is an equal
array. A statement with a branch (a `Piecewise`, a select) is left whole: TensorFlow's
printer guards each branch's partial functions (the double where), which a subexpression
moved out of its branch would escape.
"""

from __future__ import annotations

import dataclasses
import functools
import re

import sympy as sp

from symgrad.guards import safe_where
from symgrad.ir import Assign, Elementwise, IndexArith, Recompute, Reduce, Transpose, names_in, statements

BooleanFunction, Relational = sp.logic.boolalg.BooleanFunction, sp.core.relational.Relational


def share_within_statements(lowering) -> None:
    """`lowering.body` with the subexpressions each statement repeats computed once before
    it, in temporaries numbered after the lowering's own. One statement at a time: `cse`
    across statements would regroup their sums, and where the terms of a sum cancel (attention
    at saturated weights) the grouping decides whether the rounding does too."""
    symbols, number, body = sp.numbered_symbols("_shared"), lowering._temporaries(), []
    for statement in lowering.body:
        expr = _elementwise_of(statement)
        if expr is not None and not _branches(expr):
            temps, (expr,) = _shared([expr], symbols)
            pending = dict(temps)
            for symbol in _needed(expr, pending):
                name = sp.Symbol(f"{lowering.prefix}{number}")
                body.append(Assign(str(name), Elementwise(pending.pop(symbol))))
                pending = {s: v.xreplace({symbol: name}) for s, v in pending.items()}
                expr = expr.xreplace({symbol: name})
                number += 1
            statement = _with_elementwise(statement, expr)
        body.append(statement)
    lowering.body = body


def share_across_statements(lowering) -> bool:
    """`lowering.body` with a subexpression two elementwise statements both compute (a GELU
    gradient's `grad * (...)`, which its bias's gradient sums; a softmax's `exp(x - max)`)
    computed once, before the first, in a temporary. Only what each computes whole: a
    subexpression as it stands in both, or whole factors both products multiply. A sum is
    never regrouped, so what cancelled exactly in each statement still does. Whether it
    shared any."""
    number, shared = lowering._temporaries(), False
    while True:
        found = _shared_across(lowering.body)
        if found is None:
            return shared
        shared = True
        position, common = found
        name = sp.Symbol(f"{lowering.prefix}{number}")
        number += 1
        lowering.body = (lowering.body[:position] + [Assign(str(name), Elementwise(common))]
                         + _reading(lowering.body[position:], common, name))


def _reading(body: list, common: sp.Expr, name: sp.Symbol) -> list:
    """`body` reading `name` where it computes `common`, until a statement assigns what
    `common` reads."""
    reads, result = {str(s) for s in common.free_symbols}, []
    for n, statement in enumerate(body):
        if {s.target for s in statements([statement])} & reads:
            return result + body[n:]
        expr = _elementwise_of(statement) if _shareable(statement) else None
        result.append(statement if expr is None else _with_elementwise(statement, _read_through(expr, common, name)))
    return result


def _shareable(statement) -> bool:
    expr = _elementwise_of(statement)
    return expr is not None and not _branches(expr)


def _shared_across(body: list):
    """(the position of the first statement reading it, the largest subexpression two
    statements compute whole) where some are, the second reading the arrays it reads as the
    first does; else None."""
    shareable = [(n, _elementwise_of(s)) for n, s in enumerate(body) if _shareable(s)]
    assigned_at = _positions_assigning(body)
    best = None
    for i, (a, first) in enumerate(shareable):
        for b, second in shareable[i + 1 :]:
            for common in _common_parts(first, second):
                if any(a <= n < b for s in common.free_symbols for n in assigned_at.get(str(s), ())):
                    continue
                if best is None or _size(common) > _size(best[1]):
                    best = (a, common)
    return best


def _positions_assigning(body: list) -> dict:
    """Each name `body` assigns: the positions of the statements that assign it."""
    found = {}
    for n, statement in enumerate(body):
        for s in statements([statement]):
            for target in s.target.split(", "):
                found.setdefault(target, []).append(n)
    return found


def _common_parts(x: sp.Expr, y: sp.Expr) -> list:
    """What `x` and `y` both compute whole and is worth a temporary (an array operation at
    least): subexpressions as they stand in both, and the product of the factors both
    products multiply."""
    found = list(_parts_worth_sharing(x) & _parts_worth_sharing(y))
    factors = _common_factors(x, y)
    if factors is not None and _worth(factors):
        found.append(factors)
    return sorted(found, key=sp.default_sort_key)


@functools.lru_cache(maxsize=4096)
def _parts_worth_sharing(expr: sp.Expr) -> frozenset:
    """The subexpressions of `expr` worth a temporary, each once (a statement's, asked for
    once per other statement)."""
    return frozenset(e for e in sp.preorder_traversal(expr) if e.args and not e.is_number and _worth(e))


@functools.lru_cache(maxsize=4096)
def _size(expr: sp.Expr) -> int:
    return sp.count_ops(expr)


def _common_factors(x: sp.Expr, y: sp.Expr):
    """The product of the non-numeric factors `x`'s and `y`'s products share (as many of each
    as both have), where there are two or more; else None."""
    if not (isinstance(x, sp.Mul) or isinstance(y, sp.Mul)):
        return None
    left = [f for f in sp.Mul.make_args(x) if not f.is_number]
    right = list(sp.Mul.make_args(y))
    common = []
    for f in left:
        if f in right:
            right.remove(f)
            common.append(f)
    return sp.Mul(*common) if len(common) > 1 else None


def _worth(expr: sp.Expr) -> bool:
    """Computing `expr` costs an array operation: it reads an array and is no bare variable,
    no indexing of one."""
    return bool(expr.free_symbols) and not isinstance(expr, sp.Indexed) and _size(expr.as_coeff_Mul()[1]) >= 1


def _read_through(expr: sp.Expr, common: sp.Expr, name: sp.Symbol) -> sp.Expr:
    """`expr` reading `name` where it computes `common`: whole, or as factors of its product."""
    replaced = expr.xreplace({common: name})
    if replaced != expr or not isinstance(expr, sp.Mul):
        return replaced
    factors, wanted = list(sp.Mul.make_args(expr)), list(sp.Mul.make_args(common))
    if not all(factors.count(f) >= wanted.count(f) for f in set(wanted)):
        return expr
    for f in wanted:
        factors.remove(f)
    return sp.Mul(*factors, name)


def _needed(expr: sp.Expr, pending: dict) -> list:
    """The pending temporaries `expr` reads, directly or through one another, in the order
    `cse` made them (each after those it reads)."""
    needed, frontier = set(), set(expr.free_symbols) & set(pending)
    while frontier:
        needed |= frontier
        frontier = {s for f in frontier for s in pending[f].free_symbols & set(pending)} - needed
    return [s for s in pending if s in needed]


def _branches(expr: sp.Expr) -> bool:
    return bool(expr.has(sp.Piecewise, safe_where) or expr.atoms(BooleanFunction, Relational))


def _shared(exprs: list, symbols) -> tuple[list, list]:
    """(temporaries, `exprs` reading them): those over arrays only (a number stays inline)."""
    temps, reduced = sp.cse(exprs, symbols=symbols, order="canonical")
    inline, kept = {}, []
    for symbol, value in temps:
        value = value.xreplace(inline)
        if value.free_symbols:
            kept.append((symbol, value))
        else:
            inline[symbol] = value
    return kept, [e.xreplace(inline) for e in reduced]


def _elementwise_of(statement):
    """The expression of a statement's `Elementwise` value (itself, or the one field of the
    value that is one: a reduction's summand, a broadcast's operand), else None."""
    field = _elementwise_field(statement)
    if field is None:
        return None
    return statement.value.expr if field == "" else getattr(statement.value, field).expr


def _with_elementwise(statement: Assign, expr: sp.Expr) -> Assign:
    field = _elementwise_field(statement)
    if field == "":
        return Assign(statement.target, Elementwise(expr))
    return Assign(statement.target, dataclasses.replace(statement.value, **{field: Elementwise(expr)}))


def _elementwise_field(statement) -> str | None:
    """"" where a statement's value is an `Elementwise`, the name of its one field that is
    one, else None."""
    if not isinstance(statement, Assign):
        return None
    value = statement.value
    if isinstance(value, Elementwise):
        return ""
    fields = [f.name for f in dataclasses.fields(value)] if dataclasses.is_dataclass(value) else []
    found = [f for f in fields if isinstance(getattr(value, f), Elementwise)]
    return found[0] if len(found) == 1 else None


# --- temporaries a person would not write ----------------------------------------------------------


def without_idle_temporaries(lowering) -> None:
    """`lowering.body` without a temporary that computes what an earlier one did or only
    copies another (`t0 = t6`: it reads t6 instead), or that nothing after it reads."""
    lowering.body = idle_temporaries_dropped(lowering.body, lowering.prefix, lowering.numbered_from)


def idle_temporaries_dropped(body, prefix: str, start: int) -> list:
    """`body` without its idle temporaries (as `without_idle_temporaries`), the others
    named `prefix` and numbered from `start` in order."""
    is_temp = lambda name: re.fullmatch(rf"{prefix}\d+", name) is not None
    body, size = _reductions_untransposed(list(body), is_temp), None
    while size != len(body):  # a repeat read through its first may make another a repeat
        size = len(body)
        body = _copies_read_through(_repeats_as_copies(body, is_temp), is_temp)
    return _renumbered(unread_temporaries_dropped(body, is_temp, set()), is_temp, prefix, start)


def _reductions_untransposed(body: list, is_temp) -> list:
    """`body` with a reduction of a transposed temporary reducing the array it transposes, over
    the axes they are there, where the axes kept stay in their order (the same result)."""
    assigned = [s.target for s in statements(body)]
    transposes = {s.target: s.value for s in body if isinstance(s, Assign) and isinstance(s.value, Transpose)
                  and is_temp(s.target) and assigned.count(s.target) == 1 and assigned.count(s.value.x) == 0}
    return [_untransposed(s, transposes) if isinstance(s, Assign) else s for s in body]


def _untransposed(statement: Assign, transposes: dict) -> Assign:
    value = statement.value
    if not isinstance(value, Reduce) or value.keepdims or value.batch_before is not None or not value.axes:
        return statement
    x = value.x.expr if isinstance(value.x, Elementwise) else value.x
    transpose = transposes.get(str(x)) if isinstance(x, (str, sp.Symbol)) else None
    if transpose is None:
        return statement
    rank = len(transpose.perm)
    reduced = {transpose.perm[axis % rank] for axis in value.axes}
    kept = [transpose.perm[n] for n in range(rank) if transpose.perm[n] not in reduced]
    if kept != sorted(kept):
        return statement
    axes = tuple(axis - rank for axis in sorted(reduced))
    return Assign(statement.target, dataclasses.replace(value, x=transpose.x, axes=axes))


def unread_temporaries_dropped(body: list, is_temp, read: set) -> list:
    """`body` without the temporaries nothing after them reads (`read`: what is read after
    `body`), inside a recomputation too; `read` gains what the kept statements read."""
    kept = []
    for statement in reversed(body):
        if isinstance(statement, Recompute):
            statement = dataclasses.replace(statement, body=tuple(unread_temporaries_dropped(list(statement.body), is_temp, read)))
        elif isinstance(statement, Assign) and is_temp(statement.target) and statement.target not in read:
            continue
        else:
            read |= names_in(statement.value)
        kept.append(statement)
    return kept[::-1]


def _copies_read_through(body: list, is_temp) -> list:
    """`body` without a temporary that only copies another (assigned once): what reads it
    reads that one."""
    assigned = [s.target for s in statements(body)]
    n = 0
    while n < len(body):
        statement = body[n]
        copied = _copied(statement)
        renames = {statement.target: copied} if copied else {}
        if copied and is_temp(statement.target) and assigned.count(statement.target) == 1 and assigned.count(copied) <= 1 \
                and not _collapses(body[n + 1 :], renames):
            body = body[:n] + [_renamed(s, renames) for s in body[n + 1 :]]
            continue
        n += 1
    return body


def _repeats_as_copies(body: list, is_temp) -> list:
    """`body` with a temporary whose value an earlier one has (each assigned once) made a copy
    of that one, where nothing in between assigns what they read: the same statement on the
    same arrays, so the very same array, computed once. Of a recomputation, only the stages
    it computes count (passed or computed, a stage has its value; its temporaries may not
    have run)."""
    assigned = [s.target for s in statements(body)]
    result = list(body)
    for j, statement in enumerate(body):
        if not (isinstance(statement, Assign) and is_temp(statement.target) and assigned.count(statement.target) == 1):
            continue
        reads = names_in(statement.value)
        for i, earlier in enumerate(body[:j]):
            first = next((s.target for s in _always_assigned(earlier) if s.value == statement.value), None)
            if first is None or assigned.count(first) != 1:
                continue
            between = {s.target for s in statements(body[i + 1 : j])}
            if not between & (reads | {first}) and not _collapses(body[j + 1 :], {statement.target: first}):
                result[j] = Assign(statement.target, Elementwise(sp.Symbol(first)))
                break
    return result


def _collapses(body: list, names: dict) -> bool:
    """Reading `names` instead would cancel a term of a statement of `body` (`-sum1 + t3`
    with t3 the same sum: 0, an array no more): a variable it read would go, and with it the
    shape or dtype that variable broadcast the result to."""
    for statement in statements(body):
        for expr in _expressions(statement.value):
            before = {str(s) for s in expr.free_symbols}
            if {str(s) for s in _renamed(expr, names).free_symbols} != {names.get(n, n) for n in before}:
                return True
    return False


def _expressions(value):
    """The SymPy expressions in an IR value (its fields', and theirs)."""
    if isinstance(value, sp.Basic):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _expressions(v)
    elif dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            yield from _expressions(getattr(value, f.name))


def _always_assigned(statement) -> list:
    """The assignments of `statement` whose target holds their value after it."""
    if isinstance(statement, Recompute):
        return [s for s in statement.body if s.target in statement.stages]
    return [statement] if isinstance(statement, Assign) else []


def _renumbered(body: list, is_temp, prefix: str, start: int) -> list:
    """`body` with its temporaries numbered from `start` in the order they are assigned."""
    order = dict.fromkeys(s.target for s in statements(body) if is_temp(s.target))
    names = {old: f"{prefix}{start + n}" for n, old in enumerate(order)}
    return [_renamed(s, names, targets=True) for s in body] if any(k != v for k, v in names.items()) else body


def _copied(statement) -> str | None:
    """The variable a statement `a = b` copies (an array's or an integer's), else None."""
    if isinstance(statement, Assign) and isinstance(statement.value, (Elementwise, IndexArith)) and statement.value.expr.is_Symbol:
        return str(statement.value.expr)
    return None


def _renamed(value, names: dict, targets: bool = False):
    """`value` reading `names[old]` where it read `old`, all at once (and, with `targets`,
    assigning it)."""
    if isinstance(value, str):
        return re.sub(r"[A-Za-z_]\w*", lambda m: names.get(m.group(0), m.group(0)), value)
    if isinstance(value, sp.Basic):
        return value.xreplace({s: sp.Symbol(names[s.name], **s.assumptions0) for s in value.free_symbols if s.name in names})
    if isinstance(value, tuple):
        return tuple(_renamed(v, names, targets) for v in value)
    if dataclasses.is_dataclass(value):
        changes = {f.name: _renamed(getattr(value, f.name), names, targets) for f in dataclasses.fields(value)}
        if isinstance(value, Assign) and not targets:
            changes["target"] = value.target  # what it assigns stays
        return dataclasses.replace(value, **changes)
    return value

"""An if/elif chain over an op's variants, printed the way a person would write it.

Each variant (a combination of enumerated attribute values) comes printed as its own list of
statements. Two steps make the chain short:

1. **Parametrised bodies.** Variants that differ in one attribute only, whose code is the same
   but for literals explained by that attribute's value (the axis in `_gather(x, i, -1)`, the
   mode in `padding="SAME"`), become one body reading the attribute instead of the literal,
   under `if attr in (...)`. The statements are the very ones each variant ran: only where a
   number comes from changes, so the code is as fast.
2. **Shared bodies.** Variants that differ in one attribute only, whose statements are the
   same but for a few that assign the same name another way (how `align` places a diagonal),
   become one body that computes those few under an inner `if` on that attribute.
3. **Common statements hoisted.** A statement every remaining branch has, reading nothing a
   branch computes before it, is printed once before the chain; one every branch has, that
   nothing after it in a branch depends on (reducing a gradient to its input's shape), once
   after it.
4. **One value, tested once.** An attribute with the same value in every branch (a padding
   only 0 is declared for) is tested once before the chain, not in each branch's condition.

It works on printed Python (the same for every target), so it cannot change what a statement
computes: a literal is replaced only by an expression equal to it in every variant merged.
"""

from __future__ import annotations

import ast
import io
import keyword
import tokenize
from dataclasses import dataclass
from typing import Any

from symgrad import hoisting as hoist
from symgrad.arguments_apart import Arguments
from symgrad.runs_apart import inner_if, merged_apart

_UNARY_AFTER = {"(", "[", "{", ",", "=", ":", "**", "*", "/", "//", "%", "+", "-", "<", ">", "<=", ">=", "==", "!="}


@dataclass(frozen=True)
class Variants:
    """Branches sharing one body: the attribute values each branch was printed for."""

    values: tuple[tuple[tuple[str, Any], ...], ...]  # per variant merged: (name, value) pairs
    statements: tuple[str, ...]  # printed statements (a multi-line one as one string)

    def condition(self, omitted=frozenset()) -> str:
        """`name == value and ...`, a merged attribute as `name in (values)`; the attributes
        `omitted` (tested before the chain) left out."""
        parts = []
        for n, (name, value) in enumerate(self.values[0]):
            taken = tuple(dict.fromkeys(v[n][1] for v in self.values))
            if name not in omitted:
                parts.append(_test(name, taken))
        return " and ".join(parts)


def chain(branches: list[tuple[tuple[tuple[str, Any], ...], list[str]]], error: str, entries: list | None = None) -> list[str]:
    """Lines of the if/elif chain over `branches` ((attribute values, statements) each), with
    `error` raised when none applies; merged and hoisted as the module docstring says.
    `entries`: per branch, the statements it runs first (its inputs' shapes checked), apart
    from the merging: once before the chain where every branch's are the same, else first in
    each merged body (`_entered`)."""
    entries = entries or [()] * len(branches)
    if len(set(entries)) == 1 and entries[0]:
        return list(entries[0]) + chain(branches, error)
    groups = [Variants((values,), tuple(statements)) for values, statements in branches]
    for position in range(len(branches[0][0])):
        groups = _merged_over(groups, position, _unified)
    groups = _shared_greedily(groups, len(branches[0][0]))
    hoisted, groups = hoist.before_chain(groups, {name for name, _ in branches[0][0]})
    groups, tail = hoist.after_chain(groups)
    fixed = _one_value(branches) if len(groups) > 1 else {}
    lines = [f"if {' or '.join(_differs(n, v) for n, v in fixed.items())}:", f"    {error}"] if fixed else []
    lines += list(hoisted)
    conditions = [group.condition(frozenset(fixed)) for group in groups]
    every_value = _complementary(conditions)
    entered = dict(zip((values for values, _ in branches), entries))
    for n, (group, condition) in enumerate(zip(groups, conditions)):
        lines.append("else:" if every_value and n == len(groups) - 1 else f"{'if' if n == 0 else 'elif'} {condition}:")
        statements = _entered(group, entered, fixed) + group.statements
        lines += ["    " + line for s in statements for line in s.split("\n")] or ["    pass"]
    unsupported = [] if every_value else ["else:", f"    {error}"]
    return lines + unsupported + [line for s in tail for line in s.split("\n")]


def _entered(group: Variants, entered: dict, fixed: dict) -> tuple[str, ...]:
    """The statements each branch of `group` runs first: once where all are the same, else
    each under an inner if on its own attribute values."""
    runs = {}
    for values in group.values:
        runs.setdefault(entered[values], []).append(values)
    if len(runs) == 1:
        return next(iter(runs))
    tests = [Variants(tuple(values), ()).condition(frozenset(fixed)) for values in runs.values()]
    return (inner_if(list(zip(tests, map(list, runs))), complete=True),)


def _complementary(conditions: list[str]) -> bool:
    """Whether the chain's two tests are a boolean attribute and its negation (`not
    is_training`, `is_training`): every value takes one of the two branches, and the second is
    the chain's `else`."""
    if len(conditions) != 2 or not conditions[1].removeprefix("not ").isidentifier():
        return False
    first, second = conditions
    return first == f"not {second}" or second == f"not {first}"


def _one_value(branches) -> dict:
    """The attributes with the same value in every branch, and that value."""
    values = [dict(attrs) for attrs, _ in branches]
    return {name: value for name, value in branches[0][0] if all(v[name] == value for v in values)}


def _differs(name: str, value) -> str:
    """The test that `name` is not `value`."""
    if value is True:
        return f"not {name}"
    if value is False:
        return name
    return f"{name} != {value!r}"


def _test(name: str, values: tuple) -> str:
    if len(values) > 1:
        return f"{name} in ({', '.join(repr(v) for v in values)})"
    value = values[0]
    if value is True:
        return name
    if value is False:
        return f"not {name}"
    return f"{name} == {value!r}"


# --- parametrised bodies ---------------------------------------------------------------------


def _merged_over(groups: list[Variants], position: int, merge) -> list[Variants]:
    """`groups` with those that differ only in the attribute at `position` merged where
    `merge` makes them one body; in the order of each group's first variant."""
    clusters: list[list[Variants]] = []
    for group in groups:
        for cluster in clusters:
            if merge(cluster + [group], position) is not None:
                cluster.append(group)
                break
        else:
            clusters.append([group])
    return [merge(cluster, position) for cluster in clusters]


def _alike(groups: list[Variants], position: int) -> bool:
    """The groups differ only in the attribute at `position` (each may span several values
    already) and have as many statements each."""
    others = {frozenset(_others(v, position) for v in g.values) for g in groups}
    return len(others) == 1 and len({len(g.statements) for g in groups}) == 1


def _unified(groups: list[Variants], position: int) -> Variants | None:
    """`groups` as one, reading the attribute at `position` where their literals differ; None
    when they differ in another attribute or in anything but literals it explains."""
    values = tuple(v for g in groups for v in g.values)
    if len(groups) == 1:
        return groups[0]
    if not _alike(groups, position):
        return None
    name, attribute = values[0][position][0], [v[position][1] for v in values]
    statements = []
    for texts in zip(*(g.statements for g in groups)):
        statement = texts[0] if len(set(texts)) == 1 else _parametrised(texts, groups, name, attribute)
        if statement is None:
            return None
        statements.append(statement)
    return Variants(values, tuple(statements))


def _parametrised(texts, groups, name, attribute) -> str | None:
    """One statement for `texts` (one per group), each literal that differs between them
    replaced by an expression of the attribute giving it in every variant; else None."""
    pieces = [_tokens(t) for t in texts]
    if any(p is None for p in pieces) or len({len(p) for p in pieces}) != 1:
        return None
    columns = list(zip(*pieces))
    out = []
    for n, column in enumerate(columns):
        if len(set(column)) == 1:
            out.append(column[0])
            continue
        literals = [_literal(piece, len(g.values)) for piece, g in zip(column, groups)]
        if any(v is None for v in literals):
            return None
        expression = _expression(name, attribute, [v for vs in literals for v in vs])
        if expression is None:
            return None
        alone = _delimited(out[-1] if out else "", columns[n + 1][0] if n + 1 < len(columns) else "")
        spacing = column[0][len(column[0].rstrip()) :]
        out.append((expression if alone or " " not in expression else f"({expression})") + spacing)
    return "".join(out)


# --- shared bodies ---------------------------------------------------------------------------


def _shared(groups: list[Variants], position: int) -> Variants | None:
    """`groups` as one body, differing in the attribute at `position` only: the statements
    they all have, or have but for literals the attribute explains (read from it), in place,
    and each run of statements that differ otherwise as an inner if/elif on that attribute
    (`_in_place`, else `runs_apart.merged_apart`: bodies of different lengths); None when
    more than a third of their statements differ."""
    if len(groups) == 1:
        return groups[0]
    if len({frozenset(_others(v, position) for v in g.values) for g in groups}) != 1:
        return None
    values = tuple(v for g in groups for v in g.values)
    tests = [_test(values[0][position][0], tuple(dict.fromkeys(v[position][1] for v in g.values))) for g in groups]
    statements = _in_place(groups, position, tests) if _alike(groups, position) else None
    if statements is None:
        statements = merged_apart([g.statements for g in groups], tests)
    return None if statements is None else Variants(values, statements)


def _in_place(groups: list[Variants], position: int, tests: list[str]) -> tuple[str, ...] | None:
    """The one body of `groups` (as many statements each), statement by statement: a call
    differing only in keyword values reading variables set per group before it; each run of
    rows that differ (each assigning, in every group, the same name) under an inner if; None
    when more than a third differ."""
    values = tuple(v for g in groups for v in g.values)
    name, attribute = values[0][position][0], [v[position][1] for v in values]
    arguments = Arguments([g.statements for g in groups])
    rows: list = []  # per statement: the one text for all groups, or a tuple of one per group
    for texts in zip(*(g.statements for g in groups)):
        one = texts[0] if len(set(texts)) == 1 else _parametrised(texts, groups, name, attribute)
        split = arguments.shared(texts) if one is None else None
        if split is not None:
            one, assignments = split
            rows += assignments
        rows.append(texts if one is None else one)
    apart = [row for row in rows if isinstance(row, tuple)]
    if len(rows) - len(apart) < max(2 * len(apart), 3) or not all(_one_target(row) for row in apart):
        return None  # mostly apart: separate branches read better
    statements, run = [], []
    for row in rows + [None]:
        if isinstance(row, tuple):
            run.append(row)
            continue
        if run:
            statements.append(_inner_chain(tests, run))
            run = []
        if row is not None:
            statements.append(row)
    return tuple(statements)


def _shared_greedily(groups: list[Variants], positions: int) -> list[Variants]:
    """`groups` merged into shared bodies over one attribute after another, each time the one
    whose merge leaves the fewest lines."""
    remaining = set(range(positions))
    while remaining and len(groups) > 1:
        merged = {p: _merged_over(groups, p, _shared) for p in sorted(remaining)}
        best = min(merged, key=lambda p: (_size(merged[p]), p))
        if _size(merged[best]) >= _size(groups):
            break
        groups = merged[best]
        remaining.discard(best)
    return groups


def _size(groups: list[Variants]) -> int:
    """How much code the chain over `groups` is: its characters, each line's indentation
    counted once (a kernel call black spreads over eight lines is one line here)."""
    return sum(len(g.condition()) + sum(len(line.strip()) + 4 for s in g.statements for line in s.split("\n")) for g in groups)


def _one_target(row: tuple[str, ...]) -> bool:
    """Every statement of `row` assigns one and the same name."""
    targets = {hoist.assignment(s)[0] for s in row}
    return len(targets) == 1 and None not in targets


def _inner_chain(tests: list[str], run: list[tuple[str, ...]]) -> str:
    """The statements of `run` (rows of one per group) under `if test:` per group, the last
    group's as `else:` (the outer condition admits no other value)."""
    return inner_if([(test, [row[n] for row in run]) for n, test in enumerate(tests)], complete=True)


def _delimited(before: str, after: str) -> bool:
    """A value between `before` and `after` is a whole argument, subscript or right-hand side."""
    opened = not before.strip() or before.rstrip().endswith(("(", "[", ","))
    keyword_argument = before.rstrip().endswith("=") and not before.rstrip().endswith(("==", "<=", ">=", "!="))
    return (opened or keyword_argument) and (not after.strip() or after.lstrip().startswith((")", "]", ",")))


def _others(values, position):
    return values[:position] + values[position + 1 :]


def _tokens(text: str) -> list[str] | None:
    """`text` cut into pieces that keep its exact spelling, a literal (a negative number with
    its sign) one piece; None when it is not Python's tokens."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    offsets = [0]
    for line in text.split("\n"):
        offsets.append(offsets[-1] + len(line) + 1)
    starts = [offsets[t.start[0] - 1] + t.start[1] for t in tokens]
    pieces, n = [], 0
    while n < len(tokens):
        cut = n + 2 if _unary_minus(tokens, n) else n + 1
        end = starts[cut] if cut < len(tokens) else len(text)
        pieces.append(text[starts[n] : end])
        n = cut
    return pieces if "".join(pieces) == text else None


def _unary_minus(tokens, n) -> bool:
    token = tokens[n]
    if token.string != "-" or n + 1 >= len(tokens) or tokens[n + 1].type != tokenize.NUMBER:
        return False
    if tokens[n + 1].start != token.end:
        return False
    before = tokens[n - 1] if n else None
    if before is None or before.type in (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT):
        return True
    return before.string in _UNARY_AFTER or (before.type == tokenize.NAME and keyword.iskeyword(before.string))


def _literal(piece: str, count: int) -> list | None:
    """The value of a literal piece, once per variant of its group; None for anything else
    (an already parametrised piece stands for different values, and is not a literal)."""
    try:
        value = ast.literal_eval(piece.strip())
    except (ValueError, SyntaxError):
        return None
    return [value] * count if isinstance(value, (int, str)) else None


def _expression(name: str, attribute: list, literals: list) -> str | None:
    """An expression of the attribute `name` equal to `literals[k]` where it is
    `attribute[k]`, for every k: the attribute itself, an int attribute plus or minus an
    offset or its offset from a constant, or, for a mode (a string), a table by mode."""
    if literals == attribute and all(type(a) is type(v) for a, v in zip(attribute, literals)):
        return name
    if all(type(v) is int for v in attribute + literals):
        for sign in (1, -1):
            offset = literals[0] - sign * attribute[0]
            if all(v == sign * a + offset for a, v in zip(attribute, literals)):
                return _affine(name, sign, offset)
    if all(isinstance(a, tuple) for a in attribute):
        return _in_tuples(name, attribute, literals)
    table = dict(zip(attribute, literals))
    modes = all(isinstance(a, str) for a in attribute)  # a table of tuples would hide a formula
    if modes and all(table[a] == v for a, v in zip(attribute, literals)):
        return "{" + ", ".join(f"{a!r}: {v!r}" for a, v in table.items()) + "}[" + name + "]"
    return None


def _in_tuples(name: str, attribute: list[tuple], literals: list) -> str | None:
    """An entry of a tuple attribute (`perm[1]`, `axis[-1]`), plus or minus an offset or its
    offset from a constant (`k[1] - 1`: a band's), or where a value sits in it
    (`perm.index(0)`: an inverse permutation), equal to the literals; else None."""
    shortest = min(len(a) for a in attribute)
    entries = [*range(shortest), *range(-1, -shortest - 1, -1)]
    for k in entries:
        if all(a[k] == v for a, v in zip(attribute, literals)):
            return f"{name}[{k}]"
    for position in range(max(len(a) for a in attribute)):
        if all(position in a and a.index(position) == v for a, v in zip(attribute, literals)):
            return f"{name}.index({position})"
    if all(type(v) is int for v in literals) and all(type(a[k]) is int for a in attribute for k in entries):
        for k in entries:
            entry = _expression(f"{name}[{k}]", [a[k] for a in attribute], literals)
            if entry is not None:
                return entry
    return None


def _affine(name: str, sign: int, offset: int) -> str:
    if sign == 1:
        return f"{name} {'+' if offset > 0 else '-'} {abs(offset)}" if offset else name
    return f"{offset} - {name}" if offset else f"-{name}"

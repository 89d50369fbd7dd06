"""Variant bodies that differ in a few runs of statements, as one body.

SAME padding reads two sizes and subtracts an offset where VALID reads none: the two bodies
are the same statements but for those runs, with the temporaries numbered apart after the
first. Aligned on the statements they share up to the names of their temporaries (a longest
common subsequence, `difflib`), they become one body: the shared statements in place, each
run apart under an inner `if` on the attribute, the temporaries renamed to one numbering. A
recomputation of stages (`if s is None:` and its statements) aligns with the other bodies'
and is merged the same way inside.

Each variant still runs exactly its own statements in its own order, its temporaries renamed
one to one (a shared statement names in every variant what the first variant names), so the
merged body computes what each branch did, and as fast.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

_TEMP = re.compile(r"(?<![\w.'\"])t\d+\b")
_ASSIGNED = re.compile(r"^\s*(t\d+) = ", re.MULTILINE)
_RECOMPUTATION = re.compile(r"if \w+ is None( or \w+ is None)*:")


@dataclass(frozen=True)
class _Block:
    """`header:` and the statements under it (a recomputation of stages)."""

    header: str
    items: tuple


@dataclass(frozen=True)
class _Apart:
    """Runs of statements, each under its own test."""

    runs: tuple  # (test, items) per body with statements here
    complete: bool  # every body has statements here: the last run is the `else`


def merged_apart(bodies: list[tuple[str, ...]], tests: list[str]) -> tuple[str, ...] | None:
    """One body for `bodies` (statements each; `tests[k]` selects body k), the runs apart
    under inner `if`s; None where they share too little (more than a third of the statements
    apart read better as branches) or name their temporaries inconsistently."""
    everything = [{m for s in body for m in _ASSIGNED.findall(s)} for body in bodies]
    if any(set(_TEMP.findall(s)) - temps for body, temps in zip(bodies, everything) for s in body):
        return None  # reading a temporary from before the chain
    fresh = [max((int(t[1:]) for temps in everything for t in temps), default=-1) + 1]
    items = _merged([[_parsed(s) for s in body] for body in bodies], tests, fresh)
    if items is None:
        return None
    names = _numbering(items)
    return tuple(_renamed(s, names) for s in _render(items))


def _parsed(statement: str):
    """A statement, or a `_Block` where it recomputes stages, one statement a line."""
    header, *lines = statement.split("\n")
    if not lines or not _RECOMPUTATION.fullmatch(header) or not all(line.startswith("    ") and line[4] != " " for line in lines):
        return statement
    return _Block(header, tuple(line[4:] for line in lines))


def _merged(bodies: list[list], tests: list[str], fresh: list[int]) -> list | None:
    """The items of the one body (statements, blocks, runs apart), temporaries named as in
    the first body or fresh; None as `merged_apart` says."""
    temps = [{m for s in body if isinstance(s, str) for m in _ASSIGNED.findall(s)} for body in bodies]
    if any(_local_read_outside(body) for body in bodies):
        return None
    abstract = [tuple(_abstract(s, t) for s in body) for body, t in zip(bodies, temps)]
    anchors = _common(abstract)
    runs = _runs(anchors, [len(b) for b in bodies])
    if len(anchors) < max(2 * sum(1 for run in runs if _apart(run)), 3):
        return None
    names = _unified(bodies, temps, anchors, fresh)
    if names is None:
        return None
    renamed = [[_renamed_item(s, n) for s in body] for body, n in zip(bodies, names)]
    items = []
    for anchor, run in zip(anchors + [None], runs):
        if _apart(run):
            own = tuple((test, tuple(renamed[k][a:b])) for k, (test, (a, b)) in enumerate(zip(tests, run)) if b > a)
            items.append(_Apart(own, len(own) == len(run)))
        if anchor is not None:
            item = _anchored([renamed[k][i] for k, i in enumerate(anchor)], tests, fresh)
            if item is None:
                return None
            items.append(item)
    return items


def _local_read_outside(body: list) -> bool:
    """A temporary a recomputation assigns is read outside it (its statements are taken as
    its own: they are named apart from the rest)."""
    for n, item in enumerate(body):
        if isinstance(item, _Block):
            local = {m for s in item.items for m in _ASSIGNED.findall(s)}
            if local & {t for other in body[:n] + body[n + 1 :] for t in _TEMP.findall(_text(other))}:
                return True
    return False


def _anchored(versions: list, tests: list[str], fresh: list[int]):
    """The item one aligned statement becomes: itself, or its blocks merged inside."""
    if not isinstance(versions[0], _Block) or len(set(versions)) == 1:
        return versions[0]
    inner = _merged([list(v.items) for v in versions], tests, fresh)
    return None if inner is None else _Block(versions[0].header, tuple(inner))


def _text(item) -> str:
    return "\n".join(_render([item]))


def _abstract(item, temps: set[str]) -> str:
    """What must be alike to align: the statement with its temporaries unnamed; a block's header."""
    if isinstance(item, _Block):
        return "block " + item.header
    return _TEMP.sub(lambda m: "T" if m.group(0) in temps else m.group(0), item)


def _common(abstract: list[tuple[str, ...]]) -> list[tuple[int, ...]]:
    """The statements every body has alike, in order: per such statement, its index in each."""
    anchors = [(i,) for i in range(len(abstract[0]))]
    for body in abstract[1:]:
        first = [abstract[0][a[0]] for a in anchors]
        matcher = difflib.SequenceMatcher(None, first, body, autojunk=False)
        anchors = [anchors[m.a + n] + (m.b + n,) for m in matcher.get_matching_blocks() for n in range(m.size)]
    return anchors


def _runs(anchors: list[tuple[int, ...]], lengths: list[int]) -> list[list[tuple[int, int]]]:
    """Per gap before each anchor (and after the last), each body's (start, stop) there."""
    previous = [-1] * len(lengths)
    runs = []
    for anchor in anchors + [tuple(lengths)]:
        runs.append([(p + 1, a) for p, a in zip(previous, anchor)])
        previous = list(anchor)
    return runs


def _apart(run: list[tuple[int, int]]) -> bool:
    """Some body has statements in this gap."""
    return any(stop > start for start, stop in run)


def _unified(bodies, temps, anchors, fresh: list[int]) -> list[dict] | None:
    """Per body, its temporaries' names in the merged body: the first body's own; another's
    as the first names it in the statements they share, one to one, and a fresh name for one
    only its runs assign; None where a shared statement pairs names inconsistently."""
    names = [{t: t for t in temps[0]}]
    for k in range(1, len(bodies)):
        forward: dict = {}
        for anchor in anchors:
            own, first = (_temps_in(bodies[j][anchor[j]], temps[j]) for j in (k, 0))
            for a, b in zip(own, first):
                if forward.setdefault(a, b) != b:
                    return None
        if len(set(forward.values())) != len(forward):
            return None
        for t in sorted(temps[k] - set(forward), key=lambda t: int(t[1:])):
            forward[t], fresh[0] = f"t{fresh[0]}", fresh[0] + 1
        names.append(forward)
    return names


def _temps_in(item, temps: set[str]) -> list[str]:
    return [] if isinstance(item, _Block) else [t for t in _TEMP.findall(item) if t in temps]


def _renamed(statement: str, names: dict) -> str:
    return _TEMP.sub(lambda m: names.get(m.group(0), m.group(0)), statement)


def _renamed_item(item, names: dict):
    """A statement renamed; a block's header only (its temporaries are its own)."""
    if isinstance(item, _Block):
        return _Block(_renamed(item.header, names), item.items)
    return _renamed(item, names)


def _render(items) -> list[str]:
    """The statements of `items` as text: a block or the runs apart one multi-line statement."""
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, _Block):
            out.append("\n".join([item.header] + _indented(item.items)))
        else:
            out.append("\n".join(_chain_lines(item)))
    return out


def _chain_lines(apart: _Apart) -> list[str]:
    return inner_if([(test, _render(run)) for test, run in apart.runs], apart.complete).split("\n")


def inner_if(runs: list[tuple[str, list[str]]], complete: bool) -> str:
    """Each run of statements under `if test:` (`elif`), the last as `else:` where `complete`
    (the outer condition admits no other value)."""
    lines = []
    for n, (test, run) in enumerate(runs):
        last = n == len(runs) - 1 and n > 0 and complete
        lines.append("else:" if last else f"{'if' if n == 0 else 'elif'} {test}:")
        lines += ["    " + line for s in run for line in s.split("\n")]
    return "\n".join(lines)


def _indented(items) -> list[str]:
    return ["    " + line for s in _render(items) for line in s.split("\n")]


def _numbering(items, counter: list[int] | None = None, names: dict | None = None) -> dict:
    """Temporaries numbered from t0 as they are assigned; each run apart from the same count
    (only one of them runs), past the numbers of those it reads that are named already."""
    counter = [0] if counter is None else counter
    names = {} if names is None else names
    for item in items:
        if isinstance(item, str):
            _number(_ASSIGNED.findall(item), counter, names, set())
        elif isinstance(item, _Block):
            _numbering(item.items, counter, names)
        else:
            start, ends = counter[0], []
            for _, run in item.runs:
                text = "\n".join(_render(run))
                counter[0] = start
                _number(_ASSIGNED.findall(text), counter, names, {names[t] for t in _TEMP.findall(text) if t in names})
                ends.append(counter[0])
            counter[0] = max(ends)
    return names


def _number(temps: list[str], counter: list[int], names: dict, taken: set[str]) -> None:
    for t in temps:
        if t not in names:
            while f"t{counter[0]}" in taken:
                counter[0] += 1
            names[t], counter[0] = f"t{counter[0]}", counter[0] + 1

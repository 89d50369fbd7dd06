"""Variant statements that differ only in some keyword arguments' values, as one statement.

Conv2D's gradient under VALID, SAME and EXPLICIT padding calls the same kernels with other
`pads=` and `sizes=`: one call each, reading `pads` and `sizes`, which an inner `if` on the
padding sets, is what a person writes. A value the variants give alike to several calls is
one variable. Printed Python in, printed Python out: each variant computes what it did.
"""

from __future__ import annotations

import ast
import builtins
import keyword
import re


class Arguments:
    """The variables the statements of one body read for keyword values that differ between
    variants: per variable, its value text in each variant."""

    def __init__(self, statements: list[tuple[str, ...]]):
        self.statements = statements
        self.taken: set[str] | None = None  # the names in use, read when a variable is named
        self.values: dict[tuple[str, ...], str] = {}  # the values per variant -> variable

    def shared(self, texts: tuple[str, ...]) -> tuple[str, list[tuple[str, ...]]] | None:
        """One statement for `texts` (one per variant), each keyword value they differ in read
        from a variable, and the assignments (one per variant) of variables not set before;
        None where they differ otherwise."""
        try:
            trees = [ast.parse(t) for t in texts]
        except SyntaxError:
            return None
        if any(len(t.body) != 1 or "\n" in s for t, s in zip(trees, texts)):
            return None
        apart = _differing_keywords([t.body[0] for t in trees])
        if not apart:
            return None
        statement, assignments = texts[0], []
        for nodes in sorted(apart, key=lambda ns: ns[0].value.col_offset, reverse=True):
            values = tuple(ast.get_source_segment(text, n.value) for text, n in zip(texts, nodes))
            name = self.values.get(values)
            if name is None:
                name = self.values[values] = self._fresh(nodes[0].arg)
                assignments.insert(0, tuple(f"{name} = {v}" for v in values))
            value = nodes[0].value
            statement = statement[: value.col_offset] + name + statement[value.end_col_offset :]
        return statement, assignments

    def _fresh(self, stem: str) -> str:
        if self.taken is None:
            self.taken = {n for texts in self.statements for t in texts for n in _names(t)} | set(dir(builtins)) | set(keyword.kwlist)
        for n in range(1, 100):
            name = stem if n == 1 else f"{stem}{n}"
            if name not in self.taken:
                self.taken.add(name)
                return name
        raise ValueError(f"no free name for {stem}")


def _names(text: str) -> set[str]:
    """The variables `text` reads or assigns (a keyword argument's name is none: `pads=` may
    read a variable `pads`); every word where it is not Python."""
    try:
        return {n.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name)}
    except SyntaxError:
        return set(re.findall(r"[A-Za-z_]\w*", text))


def _differing_keywords(nodes: list) -> list[list[ast.keyword]] | None:
    """The keyword arguments (one per tree, at one place) whose values differ, the trees
    being alike elsewhere; None where they differ elsewhere."""
    dumps = {ast.dump(n) for n in nodes}
    if len(dumps) == 1:
        return []
    if all(isinstance(n, ast.keyword) for n in nodes) and len({n.arg for n in nodes}) == 1 and nodes[0].arg:
        return [nodes]
    if len({type(n) for n in nodes}) != 1:
        return None
    found = []
    for field, value in ast.iter_fields(nodes[0]):
        others = [getattr(n, field) for n in nodes]
        if isinstance(value, list):
            if len({len(o) for o in others}) != 1:
                return None
            pairs = [list(column) for column in zip(*others)]
        elif isinstance(value, ast.AST):
            pairs = [others]
        else:
            if len({repr(o) for o in others}) != 1:
                return None
            continue
        for column in pairs:
            if not all(isinstance(c, ast.AST) for c in column):
                if len({repr(c) for c in column}) != 1:
                    return None
                continue
            inner = _differing_keywords(column)
            if inner is None:
                return None
            found += inner
    return found

"""Statements every branch of a variant dispatch computes alike, printed once: before the
chain where they read nothing a branch computes first, after it where nothing later in a
branch depends on them (reducing each gradient to its input's shape). Printed Python in,
printed Python out, as `symgrad.dispatch` works."""

from __future__ import annotations

import ast
import dataclasses


def before_chain(groups: list, attributes: set[str]) -> tuple[list[str], list]:
    """The statements every group computes alike, in order, each reading only parameters or
    statements hoisted before it, and no attribute the chain tests (an unsupported value is
    the chain's error, not a failing statement's); and the groups without them."""
    if len(groups) < 2:
        return [], groups
    hoisted: list[str] = []
    for statement in groups[0].statements:
        if all(_hoistable(statement, g.statements, hoisted) for g in groups) and not assignment(statement)[1] & attributes:
            hoisted.append(statement)
    taken = set(hoisted)
    rest = [dataclasses.replace(g, statements=tuple(s for s in g.statements if s not in taken)) for g in groups]
    if any(not g.statements for g in rest):
        return [], groups  # a branch left empty: keep the chain as it was
    return hoisted, rest


def after_chain(groups: list) -> tuple[list, list[str]]:
    """The groups without the statements every one computes alike with nothing after them
    reading or changing what they assign or read (reducing each gradient to its input's
    shape), and those statements, in order, to run after the chain; no group is left empty."""
    if len(groups) < 2:
        return groups, []
    sunk: list[str] = []
    for statement in reversed(groups[0].statements):
        if all(_sinkable(statement, g.statements, sunk) for g in groups):
            sunk.insert(0, statement)
    rest = [dataclasses.replace(g, statements=tuple(s for s in g.statements if s not in sunk)) for g in groups]
    in_order = all([s for s in g.statements if s in sunk] == sunk for g in groups)
    if not sunk or not in_order or any(not g.statements for g in rest):
        return groups, []
    return rest, sunk


def _sinkable(statement: str, statements: tuple[str, ...], sunk: list[str]) -> bool:
    """`statement` is one of `statements` (once), a one-name assignment, and no statement
    after it but those already sunk reads or assigns its name or assigns what it reads."""
    target, reads = assignment(statement)
    if statements.count(statement) != 1 or target is None:
        return False
    for other in statements[statements.index(statement) + 1 :]:
        if other in sunk:
            continue
        if _interferes(target, reads, other):
            return False
    return True


def _hoistable(statement: str, statements: tuple[str, ...], hoisted: list[str]) -> bool:
    """`statement` is one of `statements` (once), assigns a name no other of them reads or
    assigns before it, and reads nothing they assign except statements already hoisted."""
    if statements.count(statement) != 1 or "\n" in statement:
        return False
    target, reads = assignment(statement)
    if target is None or target in reads:
        return False
    before = statements[: statements.index(statement)]
    for other in before:
        if other in hoisted:
            continue
        if _interferes(target, reads, other):
            return False
    later = {assignment(s)[0] for s in statements[statements.index(statement) + 1 :]}
    return target not in later


def _interferes(target: str, reads: set[str], other: str) -> bool:
    """`other` cannot trade places with a statement assigning `target` from `reads`: it is no
    one-name assignment, assigns what that statement reads or assigns, or reads its `target`."""
    other_target, other_reads = assignment(other)
    return other_target is None or other_target in reads | {target} or target in other_reads


def assignment(statement: str) -> tuple[str | None, set[str]]:
    """(the name a one-name assignment assigns, the names it reads); (None, ...) otherwise."""
    try:
        tree = ast.parse(statement.split("  #")[0] if "#" in statement else statement)
    except SyntaxError:
        return None, set()
    node = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
        return None, set()
    reads = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
    return node.targets[0].id, reads

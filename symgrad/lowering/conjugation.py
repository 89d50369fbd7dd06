"""Where a complex op's gradient conjugates its inputs.

The derived gradient reads its inputs conjugated (MatMul's `grad_a = grad @ conj(b)^T`), so
the gradient function conjugates each input it reads once, before its branches, as
TensorFlow's hand-written gradients do. A branch may read an input only as the conjugate of
that (`conj(conj(y)) = y`: BatchMatMul's `adj_y`, whose gradient reads y itself); then such
an input is conjugated in the branches that read it conjugated, and read as it is in the
others, instead of being conjugated twice.
"""

from __future__ import annotations

import dataclasses
import re

import sympy as sp

from symgrad.ir import Assign, Branch, Conj, Elementwise, Recompute, reads, statements
from symgrad.lowering.shared import idle_temporaries_dropped


def conjugations(names: tuple[str, ...], branches: tuple[Branch, ...]) -> tuple[tuple[Assign, ...], tuple[Branch, ...]]:
    """(the conjugations before the branches, the branches): each of `names` conjugated once
    before them, unless a branch reads it only conjugated again; then conjugated in the
    branches that read it otherwise."""
    apart = [n for n in names if any(_only_conjugated(n, branch) for branch in branches)]
    prologue = tuple(Assign(n, Conj(n)) for n in names if n not in apart)
    return prologue, tuple(_conjugated_in(apart, branch) for branch in branches)


def _only_conjugated(name: str, branch: Branch) -> bool:
    """`branch` reads `name`, and only as `t = conj(name)`."""
    if any(isinstance(s, Recompute) for s in branch.body):
        return False
    readers = [s for s in statements(branch.body) if name in reads(s.value)]
    return bool(readers) and all(_conjugate_of(name, s) for s in readers)


def _conjugate_of(name: str, statement: Assign) -> bool:
    """`statement` is `t = conj(name)`."""
    value = statement.value
    if isinstance(value, Elementwise) and isinstance(value.expr, sp.conjugate):
        return str(value.expr.args[0]) == name
    return value == Conj(name)


def _conjugated_in(names: list[str], branch: Branch) -> Branch:
    """`branch` reading each of `names` conjugated: conjugated first where it reads it, read
    as it is where it reads it only conjugated again."""
    first = []
    for name in names:
        if _only_conjugated(name, branch):
            guarded = branch.guarded_body and _as_read(name, branch.guarded_body)
            branch = dataclasses.replace(branch, body=_as_read(name, branch.body), guarded_body=guarded)
        elif any(name in reads(s.value) for s in statements(branch.body)):
            first.append(Assign(name, Conj(name)))
    guarded = tuple(first) + branch.guarded_body if branch.guarded_body is not None else None
    return dataclasses.replace(branch, body=tuple(first) + branch.body, guarded_body=guarded)


def _as_read(name: str, body: tuple) -> tuple:
    """`body` reading `name` where it read `t = conj(name)`, each such `t` gone."""
    copies = [Assign(s.target, Elementwise(sp.Symbol(name))) if _conjugate_of(name, s) else s for s in body]
    numbers = [int(m.group(1)) for s in copies if (m := re.fullmatch(r"t(\d+)", s.target))]
    return tuple(idle_temporaries_dropped(copies, "t", min(numbers, default=0)))

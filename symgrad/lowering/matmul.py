"""The plainest array operation for a contraction of plain tensor entries: an elementwise
product, a matmul with transpose flags, else an einsum.
"""

from __future__ import annotations

import sympy as sp

from symgrad.declare import BATCH
from symgrad.ir import Einsum, Elementwise, MatMul, Value


def lower_contraction(operands: list[tuple[str, tuple]], out: tuple, summed: tuple) -> Value:
    """The plainest array operation computing `Sum(prod(operands), summed)` indexed by `out`."""
    distinct = all(len(set(idx)) == len(idx) for _, idx in operands)
    if distinct and all(idx == tuple(out) for _, idx in operands) and not summed:
        return Elementwise(sp.Mul(*[sp.Symbol(name) for name, _ in operands]))
    matmul = _as_matmul(operands, out, summed)
    return matmul if matmul is not None else as_einsum(operands, out)


def _as_matmul(operands, out, summed) -> MatMul | None:
    """`MatMul` when this is a (batched) product of two matrices contracting one index."""
    if len(operands) != 2 or len(summed) != 1:
        return None
    (x, xi), (y, yi) = operands
    batched = bool(out) and out[0] == BATCH and xi[0] == BATCH and yi[0] == BATCH
    if batched:
        xi, yi, out = xi[1:], yi[1:], out[1:]
    (k,) = summed
    if len(out) != 2 or len(xi) != 2 or len(yi) != 2 or k not in xi or k not in yi:
        return None
    if not batched and BATCH in xi + yi:  # `...` as one axis: any rank, which TF's matmul refuses
        return None
    if len(set(xi)) != 2 or len(set(yi)) != 2:
        return None
    x_free, y_free = _other(xi, k), _other(yi, k)
    if (x_free, y_free) == tuple(out):
        return MatMul(x, y, xi[0] == k, yi[1] == k, batched)
    if (y_free, x_free) == tuple(out):
        return MatMul(y, x, yi[0] == k, xi[1] == k, batched)
    return None


def _other(pair, k):
    return pair[1] if pair[0] == k else pair[0]


def as_einsum(operands, out) -> Einsum:
    letters: dict = {BATCH: "..."}
    for _, idx in operands:
        for i in idx:
            letters.setdefault(i, "abcdefghijklmnopqrstuvwxyz"[len(letters) - 1])
    spec = ",".join("".join(letters[i] for i in idx) for _, idx in operands)
    spec += "->" + "".join(letters[i] for i in out)
    return Einsum(spec, tuple(name for name, _ in operands))

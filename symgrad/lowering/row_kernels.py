"""A framework's row kernels where a gradient computes exactly what one does: a softmax's
gradient `y * (g - sum(g * y, axis))`, a log-softmax's `g - exp(y) * sum(g, axis)`, each one
`SoftmaxBackward` (PyTorch's `_softmax_backward_data`, one pass over the rows instead of four).

Found by the form of the statements, never by the op's name: a reduction kept for broadcasting,
read by one elementwise statement alone, whose expression is the kernel's formula over the
reduction's operands. Applied to a gradient function just before it is printed, for a target
whose printer prints `SoftmaxBackward` (PyTorch's); the IR it reads is left as it is.
"""

from __future__ import annotations

import dataclasses

import sympy as sp

from symgrad import ir
from symgrad.lowering.requested import names_read


def with_row_kernels(function: ir.Function) -> ir.Function:
    """`function` with each softmax or log-softmax gradient found in a branch one `SoftmaxBackward`."""
    branches = tuple(dataclasses.replace(b, body=_body_with_kernels(b.body),
                                         guarded_body=b.guarded_body and _body_with_kernels(b.guarded_body))
                     for b in function.branches)
    return dataclasses.replace(function, branches=branches)


def _body_with_kernels(body: tuple) -> tuple:
    body = list(body)
    for n, statement in enumerate(body):
        if not _is_row_sum(statement):
            continue
        readers = [k for k, s in enumerate(body) if k != n and s is not None and statement.target in names_read(s)]
        if len(readers) != 1 or not isinstance(body[readers[0]], ir.Assign):
            continue
        reader = body[readers[0]]
        kernel = isinstance(reader.value, ir.Elementwise) and _softmax_backward(statement, reader.value.expr)
        if kernel:
            body[readers[0]] = ir.Assign(reader.target, kernel)
            body[n] = None
    return tuple(s for s in body if s is not None)


def _is_row_sum(statement) -> bool:
    """`t = sum(<elementwise>, one axis, keepdims)`."""
    return (isinstance(statement, ir.Assign) and isinstance(statement.value, ir.Reduce)
            and statement.value.kind == "sum" and len(statement.value.axes) == 1 and statement.value.keepdims
            and statement.value.batch_before is None and isinstance(statement.value.x, ir.Elementwise))


def _softmax_backward(row_sum: ir.Assign, expr: sp.Expr) -> ir.SoftmaxBackward | None:
    """The kernel computing `expr`, which reads `row_sum`'s reduction, where there is one."""
    t, summand, axis = sp.Symbol(row_sum.target), row_sum.value.x.expr, row_sum.value.axes[0]
    factors = [f for f in sp.Mul.make_args(summand) if f.is_Symbol]
    if summand.is_Symbol:  # sum(g): a log-softmax's, g - exp(y) * t
        g = summand
        for y in expr.free_symbols - {g, t}:
            if sp.expand(expr - (g - sp.exp(y) * t)) == 0:
                return ir.SoftmaxBackward(str(g), str(y), axis, log=True)
    elif len(factors) == 2 and sp.Mul(*factors) == summand:  # sum(g * y): a softmax's, y * (g - t)
        for g, y in (factors, factors[::-1]):
            if sp.expand(expr - y * (g - t)) == 0:
                return ir.SoftmaxBackward(str(g), str(y), axis)
    return None

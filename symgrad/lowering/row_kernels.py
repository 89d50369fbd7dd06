"""A framework's row kernels where a function computes exactly what one does: a softmax's
gradient `y * (g - sum(g * y, axis))`, a log-softmax's `g - exp(y) * sum(g, axis)`, each one
`SoftmaxBackward` (PyTorch's `_softmax_backward_data`, one pass over the rows instead of four);
a softmax `exp(x - m) / sum(exp(x - m))` with `m = max(x)` (a log-softmax
`x - m - log(sum(exp(x - m)))`; masked, `exp(x - m) * mask` over its sum), one `Softmax`
(`torch.softmax`, one pass instead of five), where nothing else reads its maximum,
exponentials or sum.

Found by the form of the statements, never by the op's name: a reduction kept for broadcasting,
read by one elementwise statement alone, whose expression is the kernel's formula over the
reduction's operands. Applied to an op's functions just before PyTorch's module prints them
(`symgrad.backends.torch`); the IR it reads is left as it is.
"""

from __future__ import annotations

import dataclasses

import sympy as sp

from symgrad import ir
from symgrad.functions import holds, indicator
from symgrad.lowering.requested import names_read


def with_row_kernels(function: ir.Function, kept: tuple = ()) -> ir.Function:
    """`function` with each softmax or log-softmax, and each one's gradient, found in a branch
    one `Softmax` (`SoftmaxBackward`); `kept`: what the function returns besides its results
    (a forward's stages), whose computation stays."""
    kept = set(kept) | {r for r in function.results if r}
    with_kernels = lambda body: _body_with_softmaxes(_body_with_kernels(body), kept)
    branches = tuple(dataclasses.replace(b, body=with_kernels(b.body),
                                         guarded_body=b.guarded_body and with_kernels(b.guarded_body))
                     for b in function.branches)
    return dataclasses.replace(function, branches=branches)


def _body_with_softmaxes(body: tuple, kept: set) -> tuple:
    """`body` with each softmax (log-softmax) it computes whole one `Softmax`, the statements
    only it read gone."""
    by_target = {s.target: s for s in body if isinstance(s, ir.Assign)}
    for n, statement in enumerate(body):
        found = _softmax(statement, by_target) if isinstance(statement, ir.Assign) else None
        if found is None:
            continue
        kernel, inner = found
        others = [s for s in body if s is not statement and getattr(s, "target", None) not in inner]
        if any(names_read(s) & inner for s in others) or inner & kept:
            continue
        body = tuple(s for s in body if getattr(s, "target", None) not in inner)
        return _body_with_softmaxes(tuple(ir.Assign(s.target, kernel) if s is statement else s for s in body), kept)
    return body


def _softmax(statement: ir.Assign, by_target: dict):
    """(the `Softmax` `statement` computes, the names of the statements it reads for it), where
    its value is a softmax (log-softmax) of one variable along one axis, else None."""
    if not isinstance(statement.value, ir.Elementwise):
        return None
    expr = statement.value.expr
    for total_view in expr.free_symbols:
        total = _expanded_reduction(str(total_view), "sum", by_target)
        if total is None:
            continue
        axis, summand, total_name = total
        if summand.is_Symbol:  # a softmax's sum(e), e = exp(x - m) its numerator
            numerator, via = _elementwise_value(str(summand), by_target), {str(summand)}
        else:  # inline: a log-softmax's sum(exp(x - m)), or a softmax's
            numerator, via = summand, set()
        exponential, mask = _unmasked(numerator)
        found = exponential is not None and _shifted_by_maximum(exponential, axis, by_target)
        if not found:
            continue
        x, maximum_view, inner = found
        inner |= via | {str(total_view), total_name}
        if expr == summand / total_view:
            return ir.Softmax(str(x), axis, mask=mask), inner
        if mask is None and not via and sp.expand(expr - (x - maximum_view - sp.log(total_view))) == 0:
            return ir.Softmax(str(x), axis, log=True), inner
    return None


def _unmasked(numerator: sp.Expr | None) -> tuple:
    """(the exponential, the mask's name) where `numerator` is `exp(...) * indicator(mask)`, a
    masked softmax's (any maximum along the row may be subtracted: the masked row's, which the
    kernel subtracts, gives the same quotient); else (`numerator`, None)."""
    factors = sp.Mul.make_args(numerator) if numerator is not None else ()
    masks = [f for f in factors if isinstance(f, indicator) and _bool_variable(f.args[0])]
    if len(factors) != 2 or len(masks) != 1:
        return numerator, None
    return numerator / masks[0], _bool_variable(masks[0].args[0])


def _bool_variable(condition) -> str | None:
    """The name of the bool variable `condition` is (a comparison's, a bool input's), or None."""
    if isinstance(condition, holds):
        condition = condition.args[0]
    return str(condition) if condition.is_Symbol else None


def _expanded_reduction(name: str, kind: str, by_target: dict):
    """(axis, the summand, the reduction's name) where `name` is the reduction `kind` of an
    elementwise value over one axis, expanded back along it; else None."""
    view = by_target.get(name)
    if view is None or not isinstance(view.value, ir.Expand):
        return None
    reduced = by_target.get(view.value.x)
    value = reduced.value if reduced is not None else None
    if not (isinstance(value, ir.Reduce) and value.kind == kind and len(value.axes) == 1 and not value.keepdims
            and value.batch_before is None and isinstance(value.x, ir.Elementwise)):
        return None
    axis = value.axes[0]
    if axis >= 0 or view.value.subscript != ("None",) + (":",) * (-axis - 1):
        return None
    return axis, value.x.expr, view.value.x


def _elementwise_value(name: str, by_target: dict):
    statement = by_target.get(name)
    return statement.value.expr if statement is not None and isinstance(statement.value, ir.Elementwise) else None


def _shifted_by_maximum(exponential: sp.Expr, axis: int, by_target: dict):
    """(x, the maximum's view, the names read for it) where `exponential` is
    `exp(x - max(x, axis))` of one variable x, else None."""
    if exponential.func != sp.exp:
        return None
    for view in exponential.args[0].free_symbols:
        maximum = _expanded_reduction(str(view), "max", by_target)
        if maximum is None or maximum[0] != axis or not maximum[1].is_Symbol:
            continue
        x = maximum[1]
        if sp.expand(exponential.args[0] - (x - view)) == 0:
            return x, view, {str(view), maximum[2]}
    return None


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

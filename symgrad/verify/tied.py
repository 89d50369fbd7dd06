"""Inputs tied to the others (`tensor(..., equals=(indices, expr))`, MaxPoolGrad's
`orig_output`): drawn as the value `expr` has on a case's other inputs, never on their own.

The value is computed entry by entry by a brute-force evaluation of the declared expression
(sums, products and extrema as loops, reads outside a tensor as their fill): independent of
the lowering and the generated code it verifies, and small, since cases are.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import sympy as sp

from symgrad.functions import product, read_outside, selected
from symgrad.extrema import _Extremum


class _Outside(Exception):
    """A read at a position outside its tensor (padding), caught by `read_outside`."""


def with_tied_values(tied: tuple, names: tuple, shapes: tuple, inputs: tuple, symbols: dict) -> tuple:
    """`inputs` with each tied input (name, indices, expr) replaced by the value of `expr`;
    `shapes` the inputs' symbolic shapes, `symbols` attribute symbol -> value."""
    if not tied:
        return inputs
    arrays = dict(zip(names, map(np.asarray, inputs)))
    sizes = {d: n for shape, x in zip(shapes, inputs) for d, n in zip(shape, np.shape(x)) if isinstance(d, sp.Symbol)}
    env = {**symbols, **sizes}
    values = list(inputs)
    for name, indices, expr in tied:
        k = names.index(name)
        value = np.empty(np.shape(inputs[k]), dtype=arrays[name].dtype)
        for position in np.ndindex(value.shape):
            value[position] = evaluate(expr, {**env, **dict(zip(indices, position))}, arrays)
        values[k] = value
        arrays[name] = value
    return tuple(values)


def evaluate(expr, env: dict, arrays: dict):
    """The number `expr` (a declaration's expression) is at index and size values `env`."""
    if expr.is_Number:
        return _numeric(expr)
    if expr.is_Symbol:
        return env[expr]
    if isinstance(expr, sp.Indexed):
        return _read(expr, env, arrays)
    if isinstance(expr, read_outside):
        try:
            return evaluate(expr.args[0], env, arrays)
        except _Outside:
            return evaluate(expr.args[1], env, arrays)
    if isinstance(expr, (sp.Sum, product, _Extremum)):
        return _reduced(expr, env, arrays)
    if isinstance(expr, selected):
        condition, value, fill = expr.args
        return evaluate(value if _holds(condition, env, arrays) else fill, env, arrays)
    if isinstance(expr, sp.Piecewise):
        return next(evaluate(v, env, arrays) for v, c in expr.args if _holds(c, env, arrays))
    if isinstance(expr, sp.Add):
        return sum(evaluate(a, env, arrays) for a in expr.args)
    if isinstance(expr, sp.Mul):
        return math.prod(evaluate(a, env, arrays) for a in expr.args)
    return _numeric(expr.func(*(sp.sympify(evaluate(a, env, arrays)) for a in expr.args)))


def _read(entry: sp.Indexed, env: dict, arrays: dict):
    array = arrays[str(entry.base.label)]
    position = tuple(int(evaluate(i, env, arrays)) for i in entry.indices)
    if any(not 0 <= p < n for p, n in zip(position, array.shape)):
        raise _Outside(entry)
    return array[position]


def _reduced(expr, env: dict, arrays: dict):
    """A sum, product or extremum over its ranges, as loops."""
    ranges = [range(int(evaluate(low, env, arrays)), int(evaluate(high, env, arrays)) + 1) for _, low, high in expr.limits]
    names = [limit[0] for limit in expr.limits]
    terms = [evaluate(expr.function, {**env, **dict(zip(names, at))}, arrays) for at in itertools.product(*ranges)]
    if isinstance(expr, sp.Sum):
        return sum(terms)
    if isinstance(expr, product):
        return math.prod(terms)
    return (max if expr.kind == "max" else min)(terms, default=-math.inf if expr.kind == "max" else math.inf)


def _holds(condition, env: dict, arrays: dict) -> bool:
    if condition in (sp.true, sp.false):
        return bool(condition)
    if isinstance(condition, (sp.And, sp.Or)):
        parts = (_holds(c, env, arrays) for c in condition.args)
        return all(parts) if isinstance(condition, sp.And) else any(parts)
    if isinstance(condition, sp.Not):
        return not _holds(condition.args[0], env, arrays)
    return bool(condition.func(*(sp.sympify(evaluate(a, env, arrays)) for a in condition.args)))


def _numeric(value: sp.Expr):
    value = sp.sympify(value)
    return int(value) if value.is_Integer else complex(value) if value.has(sp.I) else float(value)

"""The lowering rules, in the order they are tried: the first that lowers an expression wins.

A rule is one entry: what it builds, which expressions it applies to, and a function
`(lowering, expr, axes)` returning the expression aligned to `axes` (over the variables it
made), or None to pass the expression on to the next rule. A rule builds arrays through the
`TensorLowering` it is given (temporaries, sizes, expanded views) and lowers the parts of
`expr` with `lowering.array`. Adding a rule is one entry here and one function in the module
of its kind of math.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import sympy as sp

from symgrad.functions import at_position, logsumexp, product, read_outside
from symgrad.extrema import Position, first_attained, maximum, minimum
from symgrad.lowering import contraction, convolution, entries, indices, pooling, recurrences, reductions, scatters, sums
from symgrad.lowering.symbols import free_indices, is_index


@dataclass(frozen=True)
class Rule:
    """One way to lower an expression to array statements."""

    name: str  # what it builds, as a reader of the table would call it
    applies: Callable[[sp.Expr], bool]  # a cheap test of the expression's kind
    lower: Callable  # (lowering, expr, axes) -> aligned expression, or None: the next rule


def lower(lowering, table: tuple[Rule, ...], expr, axes: tuple) -> sp.Expr:
    """`expr` aligned to `axes` by the first rule of `table` that lowers it."""
    for rule in table:
        if rule.applies(expr):
            result = rule.lower(lowering, expr, axes)
            if result is not None:
                return result
    lowering.fail(f"cannot lower {expr}")  # formatted here only: printing every expression costs seconds


def lower_sum(lowering, expr: sp.Sum, axes) -> sp.Expr:
    return lower(lowering, SUM_RULES, expr, axes)


def _kind(*classes) -> Callable[[sp.Expr], bool]:
    return lambda expr: isinstance(expr, classes)


def _always(expr) -> bool:
    return True


def _constant(expr) -> bool:
    return not free_indices(expr) and not expr.has(sp.Indexed)


def _index_condition(expr) -> bool:
    return isinstance(expr, (sp.core.relational.Relational, sp.And, sp.Or, sp.Not)) and not expr.has(sp.Indexed)


def _elementwise(lowering, expr, axes) -> sp.Expr:
    """Arithmetic and functions of lowered arguments, applied elementwise."""
    return expr.func(*[lowering.array(arg, axes) for arg in expr.args])


EXPRESSION_RULES = (
    Rule("a number, attribute or size", _constant, lambda lowering, expr, axes: lowering.scalar(expr)),
    Rule("a tensor entry, gathered where its subscripts are maps", _kind(sp.Indexed), entries.aligned_entry),
    Rule("an entry filled outside the tensor", _kind(read_outside), entries.read_outside_entry),
    Rule("a value over an axis, read at positions", _kind(at_position), entries.at_position_entry),
    Rule("a sum, by the sum rules below", _kind(sp.Sum), lower_sum),
    Rule("a product, maximum or minimum over the entries ids select", _kind(product, maximum, minimum), scatters.segment_extremum),
    Rule("a product, maximum, minimum or log-sum-exp", _kind(product, maximum, minimum, logsumexp), reductions.reduction),
    Rule("the first position of a maximum or minimum (argmax)", _kind(Position), reductions.position),
    Rule("a scatter-add at positions other axes name", _kind(sp.Mul, sp.KroneckerDelta), scatters.scatter_term),
    Rule("an identity or one-hot", _kind(sp.KroneckerDelta), indices.delta),
    Rule("an index's positions (iota)", is_index, indices.iota),
    Rule("a mask of indices", _index_condition, indices.index_condition),
    Rule("the first entry attaining a maximum", _kind(first_attained), lambda lowering, expr, axes: lowering.array(expr.expanded(), axes)),
    Rule("a stack of the pieces at each position", _kind(sp.Add), indices.stacked),
    Rule("elementwise arithmetic and functions", lambda expr: bool(expr.args), _elementwise),
)

SUM_RULES = (
    Rule("constant factors moved out", _always, sums.constant_factors_out),
    Rule("(an error: indices that are not axes here)", _always, sums.indices_outside),
    Rule("a product of sums over separate indices", _always, sums.separable),
    Rule("a sum inside a sum whose index bounds its range", _always, sums.nested),
    Rule("a mask applied after the sum", _always, sums.into_branches),
    Rule("a sum of expanded terms", _always, sums.expanded_terms),
    Rule("a convolution kernel", _always, convolution.convolution),
    Rule("a max-pooling gradient kernel", _always, pooling.max_pool_backprop),
    Rule("a scatter-add at mapped positions", _always, scatters.scatter),
    Rule("a sum over an index whose range ends at another: that index first", _always,
         reductions.dependent_range_first),
    Rule("a sum weighted by running products (a linear recurrence)", _always, recurrences.running_product_sum),
    Rule("a cumulative sum of exponentials, in log space", _always, reductions.cumulative_exp_sum),
    Rule("a sum up to an index its summand reads, masked (triangular)", _always, reductions.triangular_sum),
    Rule("a sum masked up to (from) an index its summand does not read: cumulative", _always,
         reductions.masked_cumulative_sum),
    Rule("a cumulative sum", _always, reductions.cumulative_sum),
    Rule("a matmul or einsum", _always, contraction.contraction),
    Rule("a reduction", _always, sums.plain_sum),
)

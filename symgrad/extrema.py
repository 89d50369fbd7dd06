"""Extrema symgrad adds to SymPy, each with the derivative TensorFlow's hand-written gradients
have (`symgrad.functions` holds the other reductions and the selections these build on):

* `maximum(f, (k, lo, hi))`, `minimum(...)`: the gradient goes to the entries equal to the
  result, split equally among ties, as TensorFlow's reduce_max gradient does; `where=` selects
  the entries, `initial=` adds one more (`maximum_from`).
* `first_maximum(...)`: the gradient goes to the first entry attaining it (MaxPool's).
* `argmax(f, (k, lo, hi))`, `argmin(...)`: the first position of the extremum, an integer
  whose derivative is zero.
"""

from __future__ import annotations

import sympy as sp
from sympy.concrete.expr_with_limits import ExprWithLimits

from symgrad.functions import fresh_index, indicator, indicator_equal, logsumexp, product, selected, single_limit


class _Extremum(ExprWithLimits):
    """max or min of `function` over index ranges (a window); subclasses name which.

    `where=condition` takes it over the entries where the condition holds only (a segment's,
    `where=sp.Eq(segment_ids[i], s)`): a `selected` function, which an extremum over no entry
    is the lowest (highest) value of, as TensorFlow's segment maximum (minimum).
    `initial=value` takes `value` as one more entry (TensorScatterMax's tensor entry): an
    `extremum_from`, whose gradient ties share with the entries."""

    kind: str

    def __new__(cls, function, *limits, where=None, initial=None, **assumptions):
        if where is not None:
            function = selected(where, function, -sp.oo if cls.kind == "max" else sp.oo)
        extremum = super().__new__(cls, function, *limits, **assumptions)
        if initial is None:
            return extremum
        return (maximum_from if cls.kind == "max" else minimum_from)(initial, extremum)

    def _eval_derivative(self, x):
        if any(len(limit) != 3 for limit in self.limits):
            raise ValueError(f"{type(self).__name__} takes (index, lowest, highest) ranges, got {self.limits}")
        fresh = {limit[0]: fresh_index() for limit in self.limits}
        entry = self.function.xreplace(fresh)
        value = entry.value if isinstance(entry, selected) else entry
        ties = sp.Sum(self.is_attained(self.function), *self.limits)
        ranges = [(fresh[k], low, high) for k, low, high in self.limits]
        return sp.Sum(self.is_attained(entry) * sp.diff(value, x), *ranges) / ties

    def is_attained(self, entry) -> sp.Expr:
        """1 where `entry` equals the extremum (and is selected), else 0."""
        if isinstance(entry, selected):
            return entry.holds * indicator_equal(entry.value, self)
        return indicator_equal(entry, self)


class extremum_from(sp.Function):
    """`extremum_from(initial, extremum)`: the maximum (minimum) of `initial` and of the entries
    `extremum` reduces, elementwise max(initial, extremum) forward. Its gradient goes to
    `initial` and to the entries equal to the result, split equally among all of them, as
    TensorFlow's TensorScatterMax gradient does."""

    nargs = 2
    kind: str  # "max" or "min"

    def _eval_derivative(self, x):
        initial, extremum = self.args
        fresh = {limit[0]: fresh_index() for limit in extremum.limits}
        at_initial = indicator_equal(initial, self)
        ties = at_initial + sp.Sum(self._attained(extremum.function), *extremum.limits)
        ranges = [(fresh[k], low, high) for k, low, high in extremum.limits]
        entry = extremum.function.xreplace(fresh)
        value = entry.value if isinstance(entry, selected) else entry
        moved = at_initial * sp.diff(initial, x) + sp.Sum(self._attained(entry) * sp.diff(value, x), *ranges)
        return moved / ties

    def _attained(self, entry) -> sp.Expr:
        """1 where `entry` (selected) equals the result, else 0."""
        if isinstance(entry, selected):
            return entry.holds * indicator_equal(entry.value, self)
        return indicator_equal(entry, self)


class maximum_from(extremum_from):
    kind = "max"


class minimum_from(extremum_from):
    kind = "min"


class maximum(_Extremum):
    """The maximum over an index range: `maximum(x[i, k], (k, 0, N - 1))`."""

    kind = "max"


class first_maximum(maximum):
    """The maximum, its gradient going to the first entry attaining it in row-major order of
    the ranges (TensorFlow's MaxPool), not split among ties."""

    def _eval_derivative(self, x):
        if any(len(limit) != 3 for limit in self.limits):
            raise ValueError(f"first_maximum takes (index, lowest, highest) ranges, got {self.limits}")
        fresh = {limit[0]: fresh_index() for limit in self.limits}
        entry = self.function.xreplace(fresh)
        first = first_attained(self.is_attained(entry), self._attained_before(fresh))
        ranges = [(fresh[k], low, high) for k, low, high in self.limits]
        return sp.Sum(first * sp.diff(entry, x), *ranges)

    def _attained_before(self, position: dict) -> sp.Expr:
        """How many entries before `position` (row-major) attain the maximum: per range m,
        those equal to `position` in the ranges before m and below it in range m, as
        cumulative sums (exclusive) of counts over the ranges after m."""
        total = sp.S.Zero
        for m, (k, low, high) in enumerate(self.limits):
            earlier = {kk: position[kk] for kk, _, _ in self.limits[:m]}
            count = self.is_attained(self.function.xreplace(earlier))
            later = self.limits[m + 1 :]
            if later:
                count = sp.Sum(count, *later)
            total += sp.Sum(count, (k, low, position[k] - 1))
        return total


class first_attained(sp.Function):
    """1 where an entry attains its window's maximum (`attained`, an `indicator_equal` of the
    entry and the maximum) and none before it in row-major order does (`before`, their count,
    is 0), else 0; derivative zero. A function of its own, not the product it stands for, so
    that lowering can see a window's gradient routed to its first maximum (a pooling kernel)."""

    nargs = 2

    def fdiff(self, argindex=1):
        return sp.S.Zero

    @property
    def attained(self) -> sp.Expr:
        return self.args[0]

    def expanded(self) -> sp.Expr:
        """The indicator product it stands for."""
        return self.attained * indicator(sp.Eq(self.args[1], 0))


class minimum(_Extremum):
    """The minimum over an index range: `minimum(x[i, k], (k, 0, N - 1))`."""

    kind = "min"


class Position(ExprWithLimits):
    """The position along one index range of the first entry attaining the extremum (numpy's
    `argmax`, TensorFlow's ArgMax): an integer, piecewise constant in the entries, so its
    derivative is zero. Subclasses name which extremum."""

    kind: str
    is_integer = True

    def __new__(cls, function, *limits, **assumptions):
        extremum = super().__new__(cls, function, *limits, **assumptions)
        single_limit(extremum)
        return extremum

    def _eval_derivative(self, x):
        return sp.S.Zero


class argmax(Position):
    """The first position of the maximum over an index range: `argmax(x[i, k], (k, 0, N - 1))`."""

    kind = "argmax"


class argmin(Position):
    """The first position of the minimum over an index range."""

    kind = "argmin"


# over index ranges: what lowers to a reduction or a scan
REDUCTIONS = (sp.Sum, product, maximum, minimum, logsumexp, Position)

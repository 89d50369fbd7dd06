"""Reductions symgrad adds to SymPy, each with the derivative a careful hand would write.

* `product(f, (k, lo, hi))`: d/dx of prod_k f(k) is sum_j (prod_{k<j} f) f'(j) (prod_{k>j} f),
  never the product divided by f(j) (NaN where f(j) = 0, the classic bug); the partial
  products lower to exclusive cumulative products, or, for a cumulative product's gradient,
  to a linear recurrence. With `where=` (a segment's entries), the product of the other
  selected entries, exact at zeros (three segment reductions, as TensorFlow's).
* `maximum`, `minimum`, `first_maximum`, `argmax`, `argmin`: in `symgrad.extrema`, built on
  the selections here (`selected`, `indicator_equal`).
* `logsumexp(f, (k, lo, hi))`: log(sum_k exp(f)), whose derivative is the softmax
  exp(f(j) - logsumexp), finite where exp(f) is not (`symgrad.stability` writes a cumulative
  log-sum-exp so).

And one value with two spellings, for the simplification passes:

* `recomputed_or_reused(recomputed, reused)`: one value, computed again from the inputs or read
  off the forward's outputs; each backend's printer prints the spelling that is cheaper there.

Which functions are total, and the guard of a branch that applies a partial one, are in
`symgrad.guards`.
"""

from __future__ import annotations

import sympy as sp
from sympy.concrete.expr_with_limits import ExprWithLimits

# the elementwise ones, in a module of their own; importable from here, as before
from symgrad.special_functions import dawsn, nextafter, rint, scaled_besseli, sigmoid, softplus, split_exp  # noqa: F401

_fresh = sp.numbered_symbols("j", integer=True)


def restart_fresh_indices() -> None:
    """Number the indices derivatives bind from j0 again: called before each op is derived,
    so that its gradient's docstring does not depend on which ops a worker derived before."""
    global _fresh
    _fresh = sp.numbered_symbols("j", integer=True)


def fresh_index() -> sp.Symbol:
    """A new index for a derivative to bind (j0, j1, ...)."""
    return next(_fresh)


def single_limit(expr) -> tuple:
    if len(expr.limits) != 1 or len(expr.limits[0]) != 3:
        raise ValueError(f"{type(expr).__name__} takes exactly one (index, lowest, highest), got {expr.limits}")
    return expr.limits[0]


class product(sp.Product):
    """`Product` whose derivative never divides by an entry that may be zero.

    `where=condition` takes it over the entries where the condition holds only (a segment's,
    `where=sp.Eq(segment_ids[i], s)`): a `selected` function, 1 where it does not hold, so
    a product over no entry is 1, as TensorFlow's segment product."""

    def __new__(cls, function, *limits, where=None, **assumptions):
        if where is not None:
            function = selected(where, function, sp.S.One)
        return super().__new__(cls, function, *limits, **assumptions)

    def _eval_derivative(self, x):
        """sum_j (prod_{k<j} f) f'(j) (prod_{k>j} f), division-free: a polynomial in the
        entries, so exact where entries are 0 and differentiable again. Over a whole axis the
        two partial products are cumulative ones; for a cumulative product (a range ending at
        another index i) the second runs from j + 1 to i, a linear recurrence once the
        gradient sums it over i (`symgrad.lowering.recurrences`). Over the entries a
        condition selects, the product of the others (`_others`)."""
        if isinstance(self.function, selected):
            return self._selected_derivative(x)
        k, low, high = single_limit(self)
        j = next(_fresh)
        entry = self.function.subs(k, j)
        before = product(self.function, (k, low, j - 1))
        after = product(self.function, (k, j + 1, high))
        return sp.Sum(before * sp.diff(entry, x) * after, (j, low, high))


    def _selected_derivative(self, x):
        k, low, high = single_limit(self)
        j = next(_fresh)
        entry = self.function.xreplace({k: j})
        return sp.Sum(entry.holds * sp.diff(entry.value, x) * self._others(entry), (j, low, high))

    def _others(self, entry) -> sp.Expr:
        """The product of the selected entries but `entry`, exact at zeros, as TensorFlow's
        segment product gradient: the product divided by the entry where it is not 0; where
        it is, the product of the nonzero entries if it is the only zero, else 0. Four
        reductions over the selection (the product, its nonzero entries' product, its zeros'
        count and sum), never one per entry. Where the selection holds two zeros, the value
        0 is written as the nonzero entries' product times the other zero, so that its
        derivative (in that zero) is exact: differentiated again, by autodiff of the code or
        by symgrad, the gradient is the product of all but the two."""
        (k, low, high), function = self.limits[0], self.function
        condition, value = function.args[0], function.value
        nonzero = product(selected(sp.Ne(value, 0), value, 1), (k, low, high), where=condition)  # zeros as 1
        zeros = sp.Sum(function.holds * indicator(sp.Eq(value, 0)), (k, low, high))
        zeros_sum = sp.Sum(function.holds * selected(sp.Eq(value, 0), value, 0), (k, low, high))  # 0, but not its derivative
        return sp.Piecewise(
            (self / entry.value, sp.Ne(entry.value, 0)),
            (nonzero, sp.Eq(zeros, 1)),
            (nonzero * (zeros_sum - entry.value), sp.Eq(zeros, 2)),
            (0, True),
        )


def bounded_by_index(bound) -> bool:
    return any(s.is_integer and s.is_positive is not True for s in sp.sympify(bound).free_symbols)


class logsumexp(ExprWithLimits):
    """`log(Sum(exp(f), (k, lo, hi)))`, computed without overflow: a cumulative one (a range
    ending at another index) as a log-space scan, `np.logaddexp.accumulate`. Its derivative
    is the softmax of the entries, `exp(f(j) - logsumexp)`, never exp(f(j)) / sum (inf / inf
    for large f)."""

    def _eval_derivative(self, x):
        k, low, high = single_limit(self)
        j = next(_fresh)
        entry = self.function.subs(k, j)
        return sp.Sum(sp.exp(entry - self) * sp.diff(entry, x), (j, low, high))


class indicator_equal(sp.Function):
    """1 where its two arguments are equal, else 0; derivative zero.

    Not a `Piecewise`: SymPy moves a Piecewise out of a Sum even when its condition depends
    on the summation index, which would count ties wrongly.
    """

    nargs = 2

    def fdiff(self, argindex=1):
        return sp.S.Zero

    def as_piecewise(self) -> sp.Piecewise:
        return sp.Piecewise((1, sp.Eq(*self.args)), (0, True))


class indicator(sp.Function):
    """1 where its condition holds, else 0; derivative zero. Not a `Piecewise`, which SymPy
    would move out of an enclosing Sum (a window's count of entries inside the input)."""

    nargs = 1

    def fdiff(self, argindex=1):
        return sp.S.Zero

    def _eval_derivative(self, s):
        return sp.S.Zero  # its argument is a condition, which SymPy cannot differentiate

    def as_piecewise(self) -> sp.Piecewise:
        return sp.Piecewise((1, self.args[0]), (0, True))


class holds(sp.logic.boolalg.BooleanFunction):
    """An entry of a bool tensor (a `tensor(..., boolean=True)`) used as a condition, which a
    plain `Indexed` cannot be: `indicator(mask[k])`, `sp.Piecewise((x[i], mask[i]), (0, True))`."""

    nargs = 1

    @property
    def entry(self):
        return self.args[0]


class selected(sp.Function):
    """`value` where `condition` holds, else `fill` (never an extremum's: -oo in a maximum):
    the entries an extremum's `where` selects. Not a `Piecewise`, which SymPy folds out of a
    Sum (the ties counted)."""

    nargs = 3

    @property
    def value(self):
        return self.args[1]

    @property
    def holds(self) -> sp.Expr:
        """1 where the condition holds, else 0: a delta where it equates an index with a
        position (`sp.Eq(segment_ids[i], s)`)."""
        condition = self.args[0]
        equalities = condition.args if isinstance(condition, sp.And) else (condition,)
        if all(isinstance(e, sp.Eq) and any(a.is_Symbol and a.is_integer for a in e.args) for e in equalities):
            return sp.Mul(*[sp.KroneckerDelta(*e.args) for e in equalities])  # a position's row and column
        return indicator(condition)

    def fdiff(self, argindex=1):
        return self.holds if argindex == 2 else sp.S.Zero

    def _eval_derivative(self, x):
        return self.holds * sp.diff(self.value, x)  # the fill is a constant; the condition has none

    def as_piecewise(self) -> sp.Piecewise:
        condition, value, fill = self.args
        return sp.Piecewise((value, condition), (fill, True))


class at_position(sp.Function):
    """`expr` (a reduction over other indices) at `index` = `position`, computed over all of
    `index`'s axis (`lowest` to `highest`) and gathered at `position` (a segment's count or
    total, read back at each entry's segment id): substituted into the reduction, it would be
    computed once per entry for every entry (a pairwise matrix)."""

    nargs = 5

    @classmethod
    def eval(cls, expr, index, position, lowest, highest):
        if index not in expr.free_symbols:
            return expr  # the same at every position
        return None

    def _eval_derivative(self, x):
        expr, *rest = self.args
        return at_position(sp.diff(expr, x), *rest)

    def doit(self, **hints):
        expr, index, position = self.args[:3]
        return expr.xreplace({index: position})

    @property
    def free_symbols(self) -> set:
        """Those of `position` and of `expr` but `index`, which is bound here."""
        expr, index, *rest = self.args
        return (expr.free_symbols - {index}).union(*(r.free_symbols for r in rest))


class mask(indicator):
    """`indicator(c)` made from `Piecewise((a, c), (0, True))` (a relu's derivative): a factor
    of a product, printed in the smallest integer dtype, which the product's dtype absorbs."""


class exact_div(sp.Function):
    """`m / c` where `c` divides `m`, else no position at all (-1, read as zero): the index
    `i` with `i * c + rest = m`, for a stride `c` (SymPy alone would give `m / c` for every m)."""

    is_integer = True

    @classmethod
    def eval(cls, m, c):
        if c == 1:
            return m
        if c == -1:
            return -m
        if m.is_Integer and c.is_Integer:
            return m // c if m % c == 0 else sp.S.NegativeOne
        return None


class read_outside(sp.Function):
    """`read_outside(x[E], fill)`: the entry, with positions outside `x` reading `fill`
    instead of zero (a window's maximum pads with -oo). Its derivative is the entry's."""

    nargs = 2

    def fdiff(self, argindex=1):
        return sp.S.One if argindex == 1 else sp.S.Zero


class recomputed_or_reused(sp.Function):
    """`recomputed` (from the inputs) or, equal to it, `reused` (from the forward's outputs).

    GELU's `(1 + erf(x/sqrt(2)))/2` is `y/x` (guarded at 0): scipy's erf costs numpy ten times
    a division, while TensorFlow's erf kernel costs about what the guarded division does.
    """

    nargs = 2

    @property
    def recomputed(self) -> sp.Expr:
        return self.args[0]

    @property
    def reused(self) -> sp.Expr:
        return self.args[1]

    def _eval_evalf(self, prec):
        return self.reused._eval_evalf(prec)


class python_float(sp.Function):
    """A scalar computed from sizes and attributes (`sqrt(D)`), as a Python float: numpy's
    float64 scalar would promote a float32 array (Python's float adapts to the array)."""

    nargs = 1


class like_dtype(sp.Function):
    """`value` in the dtype of the array `like` (its real part where `like` is real): a
    gradient returned in its input's dtype (`symgrad.dtypes`)."""

    nargs = 2


class as_dtype(sp.Function):
    """`value` in the dtype an attribute names (its real part for a real dtype, as
    TensorFlow's Cast): an output of a `DType()` attribute's dtype."""

    nargs = 2


class modulus(sp.Function):
    """|z| of a complex z in z's own dtype (TensorFlow's `abs` of a complex tensor is real,
    and its arithmetic does not mix dtypes): what a Wirtinger gradient reads of |z|."""

    nargs = 1

    def _eval_conjugate(self):
        return self


class promoted(sp.Function):
    """`value` in the complex dtype of `like` where `like` is complex and `value` real, else
    `value`: a real output's upstream gradient, multiplied with complex inputs."""

    nargs = 2

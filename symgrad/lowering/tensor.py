"""The object that owns alignment and temporaries while the rules lower tensor values.

An array is *aligned* to a tuple of index symbols `axes`: its axis n runs over `axes[n]`, or
has size 1 where the value does not depend on that index, so numpy-style broadcasting combines
values. Axes are numbered from the last (negative), so a leading batch index (`...`) stands
for any number of leading axes. `TensorLowering.array` hands each expression to the first rule
of `rules.EXPRESSION_RULES` that lowers it; the rules ask this object for the variables they
need (a dimension's size, an index's values, an expanded view), which it computes once. No
array has more axes than the indices in play: never a Jacobian.
"""

from __future__ import annotations

import dataclasses

import sympy as sp

from symgrad.declare import BATCH
from symgrad.derivation import TensorValue, Term
from symgrad.errors import LoweringError
from symgrad.extrema import REDUCTIONS
from symgrad.functions import python_float
from symgrad.ir import (
    Arange,
    Assign,
    BroadcastTo,
    BroadcastToShape,
    Constant,
    DimSize,
    Elementwise,
    Expand,
    Gather,
    IndexArith,
    IntSize,
    Iota,
    MergeAxes,
    Recompute,
    SplitAxis,
    Value,
    names_in,
    statements,
)
from symgrad.lowering import rules
from symgrad.lowering.signature import OpSignature
from symgrad.lowering.symbols import free_indices, sizes_in, transcendental


def as_expression(value: TensorValue) -> sp.Expr:
    """One expression for a sum of terms, with factors that do not vary moved out of Sums."""
    total = sp.S.Zero
    for term in value.terms:
        summed = {s[0] for s in term.sums}
        inside, outside = [], []
        for factor in sp.Mul.make_args(term.factor):
            (inside if factor.free_symbols & summed else outside).append(factor)
        total += sp.Mul(*outside) * dataclasses.replace(term, factor=sp.Mul(*inside)).as_sum()
    return sp.factor_terms(total)


def viewed(value, views: dict):
    """`value` reading the split views of its inputs."""
    if value is None or not views:
        return value
    return TensorValue(value.indices, tuple(Term(t.factor.xreplace(views), t.sums) for t in value.terms))


class TensorLowering:
    """Lowers the tensor values of one function branch; equal subexpressions share a temporary."""

    def __init__(self, op: OpSignature, dims: dict | None = None, ranges: dict | None = None, prefix: str = "t"):
        self.op = op
        self.dims = dims or {}  # dimension symbol -> (variable, negative axis) it is read from
        self.ranges = dict(ranges or {})  # index -> (lowest, highest)
        self.prefix = prefix
        self.body: list[Assign] = []
        self.largest_rank = 0  # most axes of any array built (a leading `...` counts as one)
        self.largest: tuple = ()  # (expression, its axes) of the array with the most axes
        self.memo: dict = {}  # what was built once -> its variable (or aligned expression)
        self.numbered_from = 0  # temporaries before this lowering's own (see `apart`)

    # --- statements for a whole value ---

    def assign(self, target: str, value: TensorValue, like: str | None = None, dtype_of: str | None = None) -> None:
        """Append statements computing `target[value.indices]`, broadcast to `like` if needed;
        a constant in `like`'s dtype, else `dtype_of`'s (an output that reads no input)."""
        expr = as_expression(value)
        array = self.array(expr, tuple(value.indices))
        constant_along = set(value.indices) - free_indices(expr)
        if array.is_number and (like or dtype_of) is not None:  # in the dtype of what it is like (a gradient of 0)
            array = sp.Symbol(self.temp(Constant(array, like or dtype_of)))
        if like is not None and constant_along:
            self.body.append(Assign(target, BroadcastTo(Elementwise(array), like)))
        elif (constant_along or array.is_number) and value.indices and BATCH not in value.indices:
            # constant along an axis: an output's sizes come from elsewhere, or a stage cancelled
            sizes = ", ".join(self.size_of(i) for i in value.indices)
            self.body.append(Assign(target, BroadcastToShape(Elementwise(array), f"({sizes},)")))
        elif self._last_is(array) and self.is_temp(array):
            self._rename_last(target)
        else:
            self.body.append(Assign(target, Elementwise(array)))

    def assign_merged(self, target: str, value: TensorValue, groups: tuple) -> None:
        """`target[value.indices]` with each group of indices (first position, count) one
        axis, row-major: computed over separate axes, then reshaped."""
        expr = as_expression(value)
        array = self.array(expr, tuple(value.indices))
        leading = value.indices[0] == BATCH  # `...`: any number of axes first, kept as they are
        if leading and BATCH not in free_indices(expr):
            self.fail(f"output {target} is constant along `...`, whose axes it cannot know")
        if leading:
            groups = tuple((first - 1, count) for first, count in groups)
        sizes = tuple(self.size_of(i) for i in value.indices[int(leading):])
        broadcast = bool(set(value.indices) - free_indices(expr))
        # after `...` the reshape reads the array's shape: a variable, not the expression twice
        x = self.variable(array) if leading else str(array) if array.is_Symbol else Elementwise(array)
        self.body.append(Assign(target, MergeAxes(x, sizes, groups, broadcast, leading)))

    def split_upstream(self, grad: str, indices: tuple, groups: tuple) -> None:
        """Reshape the upstream gradient of an output with index groups so that each index
        has its own axis, as the derivation reads it (first group first: the negative axes
        of the later ones do not move)."""
        for first, count in groups:
            after = _axes_after(len(indices), first, count, groups)
            inner = tuple(self.size_of(i) for i in indices[first + 1 : first + count])
            self.body.append(Assign(grad, SplitAxis(grad, -after - 1, inner)))

    def split_input(self, name: str, view: str, shape: tuple, groups: tuple) -> None:
        """`view`: input `name`, whose axes declared as groups of sizes are split so that each
        size has its own axis, as the declaration indexes it (the dimension among them is
        inferred); the input itself is left as it is (a wrapper's backward reads it)."""
        source = name
        for first, count in groups:
            after = _axes_after(len(shape), first, count, groups)
            members = shape[first : first + count]
            inferred = next(n for n, m in enumerate(members) if m.is_Symbol and m.is_positive)
            known = lambda ms: tuple(self.int_value(m) for m in ms)
            split = SplitAxis(source, -after - 1, known(members[inferred + 1 :]), known(members[:inferred]))
            self.body.append(Assign(view, split))
            source = view

    def apart(self) -> TensorLowering:
        """A lowering of its own (nothing shared, temporaries numbered after these), for
        statements that run apart from this one's (`include`)."""
        other = TensorLowering(self.op, self.dims, self.ranges, self.prefix)
        other.numbered_from = self._temporaries()
        return other

    def include(self, other: TensorLowering, stages: tuple[str, ...], conj: bool) -> None:
        """Append `other`'s statements as the recomputation of `stages`, run when a caller
        did not pass them."""
        self.body.append(Recompute(stages, tuple(other.body), conj))
        if other.largest_rank > self.largest_rank:
            self.largest_rank, self.largest = other.largest_rank, other.largest

    # --- aligned arrays, by the rules ---

    def array(self, expr: sp.Expr, axes: tuple) -> sp.Expr:
        """An elementwise expression over variables whose value is `expr` aligned to `axes`."""
        key = (expr, axes)
        if key not in self.memo:
            # the axes it varies along: a broadcast (size-1) axis holds nothing
            varying = tuple(a for a in axes if a in free_indices(expr))
            if len(varying) > self.largest_rank:
                self.largest_rank = len(varying)
                self.largest = (expr, varying)
            self.memo[key] = self._lowered(expr, axes)
        return self.memo[key]

    def _lowered(self, expr, axes):
        if isinstance(expr, REDUCTIONS):
            clashes = {lim[0] for lim in expr.limits} & set(axes)
            if clashes:  # an inner Sum's own index named like an axis here: rename it
                return self.array(expr.xreplace({k: self.fresh(k, axes) for k in clashes}), axes)
            for limit in expr.limits:  # ranges of renamed indices
                self.ranges.setdefault(limit[0], (limit[1], limit[2]))
        return rules.lower(self, rules.EXPRESSION_RULES, expr, axes)

    # --- variables built once ---

    def once(self, key, build) -> str | sp.Expr:
        """The variable `build()` made the first time `key` was asked for."""
        if key not in self.memo:
            self.memo[key] = build()
        return self.memo[key]

    def variable(self, array: sp.Expr) -> str:
        """A variable holding `array` (an aligned expression): itself where it is one, else a
        temporary computing it elementwise."""
        return str(array) if array.is_Symbol else self.temp(Elementwise(array))

    def temp(self, value: Value) -> str:
        """A temporary holding `value`: the one that already does (equal statements from
        terms whose bound indices were named apart), else a new one."""
        known = self._holding(value)
        if known is not None:
            return known
        name = f"{self.prefix}{self._temporaries()}"
        self.body.append(Assign(name, value))
        return name

    def _holding(self, value: Value) -> str | None:
        """The temporary this body assigned `value` to, where nothing it reads was assigned
        again after it."""
        for n, statement in enumerate(self.body):
            if isinstance(statement, Assign) and statement.value == value and statement.target.startswith(self.prefix):
                later = {s.target for s in statements(self.body[n + 1 :])}
                return statement.target if not later & names_in(value) else None
        return None

    def _temporaries(self) -> int:
        """How many temporaries there are: the next one's number."""
        return self.numbered_from + sum(s.target.startswith(self.prefix) for s in statements(self.body))

    def _last_is(self, array) -> bool:
        last = self.body[-1] if self.body else None
        return isinstance(last, Assign) and array == sp.Symbol(last.target)

    def gather(self, gather: Gather) -> str:
        """A temporary holding `gather`, computed once: the gathers of a sum of mapped reads
        (MirrorPad's mirror images, axis by axis) share their first steps."""
        return self.once(gather, lambda: self.temp(gather))

    def expand(self, name: str, order: tuple, axes: tuple) -> str:
        """`name` (axes `order`) with size-1 axes inserted where `axes` has others after its
        first; missing leading axes need nothing, broadcasting adds them."""
        present = [axes.index(i) for i in order]
        needed = [m for m in range(min(present, default=len(axes)), len(axes)) if axes[m] not in order]
        if not needed:
            return name
        subscript = tuple(":" if axes[m] in order else "None" for m in range(needed[0], len(axes)))
        return self.once(("expand", name, subscript), lambda: self.temp(Expand(name, subscript)))

    def scalar(self, expr) -> sp.Expr:
        """A number or numeric attribute; dimension sizes are read from the arrays' shapes (a
        Sum of constants is its closed form, `Sum(1, (k, 0, N - 1))` is N)."""
        if expr.has(sp.Sum):
            expr = expr.doit()
        value = expr.xreplace({d: self.dim(d) for d in sizes_in(expr)})
        if not value.is_number and transcendental(value) and not self._reads_arrays(value):
            return python_float(value)  # a Python float, not numpy's float64
        return value

    def _reads_arrays(self, value) -> bool:
        """`value` reads a 0-d array (a scalar stage, a scalar output's upstream gradient), not
        only attributes and sizes: it stays an array of the op's dtype, which JAX traces and
        PyTorch differentiates."""
        attributes = {a.name for a in self.op.attrs}
        sizes = {v for key, v in self.memo.items() if key[0] == "dim"}
        return any(s not in sizes and s.name.split("[")[0] not in attributes for s in value.free_symbols)

    def dim(self, dim) -> sp.Symbol:
        """A variable holding dimension `dim`, as the arrays' dtype reads it."""
        self._require_dim(dim)
        return self.once(("dim", dim), lambda: sp.Symbol(self.temp(DimSize(*self.dims[dim]))))

    def int_size(self, dim) -> sp.Symbol:
        """A variable holding dimension `dim` as an integer."""
        self._require_dim(dim)
        return self.once(("int size", dim), lambda: sp.Symbol(self.temp(IntSize(*self.dims[dim]))))

    def int_value(self, expr) -> str:
        """An integer variable holding `expr`, of attributes and numbers (a block size)."""
        return self.once(("int value", expr), lambda: self.temp(IndexArith(self.int_scalars(expr))))

    def int_scalars(self, expr):
        """`expr` with sizes read as integers, and each rounded size (a padding) computed once."""
        expr = expr.xreplace({d: self.int_size(d) for d in sizes_in(expr)})

        def hoisted(e):
            return self.once(("scalar", e), lambda: sp.Symbol(self.temp(IndexArith(e))))

        rounded = (sp.floor, sp.ceiling, sp.Max, sp.Min)
        return expr.replace(lambda e: isinstance(e, rounded) and not free_indices(e), hoisted)

    def index_values(self, index) -> str:
        """0, 1, ..., n - 1 for `index`: an axis's iota, or a range of a computed size."""

        def build():
            source = self.axis_source(index)
            return self.temp(Iota(*source) if source is not None else Arange(self.size_of(index)))

        return self.once(("index values", index), build)

    def size_of(self, index) -> str:
        """An integer variable holding how many values `index` takes."""
        if index not in self.ranges:
            self.fail(f"index {index} has no known range")
        low, high = self.ranges[index]
        size = high - low + 1
        if self.dims.get(size) is not None:
            return str(self.int_size(size))
        return self.once(("size", size), lambda: self.temp(IndexArith(self.int_scalars(size))))

    def axis_source(self, index) -> tuple | None:
        """(variable, negative axis) whose size is the number of values `index` takes."""
        size = self.ranges.get(index, (None, None))[1]
        return self.dims.get(size + 1) if size is not None else None

    def numeric_size(self, index) -> int | None:
        """How many values `index` takes, when that is a known number."""
        low, high = self.ranges.get(index, (None, None))
        return int(high - low + 1) if low == 0 and high is not None and high.is_Integer else None

    def like(self) -> str:
        """A variable whose dtype new constants take."""
        return next(iter(v for v, _ in self.dims.values()))

    def fresh(self, index, axes) -> sp.Symbol:
        """An index named after `index` that is neither an axis nor a known index."""
        n = 0
        while sp.Symbol(f"{index}{n}", integer=True) in set(axes) | set(self.ranges):
            n += 1
        return sp.Symbol(f"{index}{n}", integer=True)

    @property
    def largest_term(self) -> str:
        """What the array with the most axes holds, and its axes (printed for an error only:
        printing every candidate cost seconds)."""
        if not self.largest:
            return ""
        expr, varying = self.largest
        return f"{expr} over ({', '.join(map(str, varying))})"

    def is_temp(self, symbol) -> bool:
        return str(symbol).startswith(self.prefix) and str(symbol)[len(self.prefix) :].isdigit()

    def fail(self, what: str):
        raise LoweringError(what, self.op.name, self.op.location)

    def _require_dim(self, dim) -> None:
        if dim not in self.dims:
            self.fail(f"dimension {dim} is not the size of any input axis")

    def _rename_last(self, target: str) -> None:
        """Name the last temporary `target`, and read it so wherever it is reused: its number
        is free again, for the next temporary."""
        old = self.body[-1].target
        self.body[-1] = Assign(target, self.body[-1].value)
        for key, value in self.memo.items():
            if value == sp.Symbol(old) or value == old:
                self.memo[key] = sp.Symbol(target) if isinstance(value, sp.Symbol) else target


def _axes_after(rank: int, first: int, count: int, groups: tuple) -> int:
    """How many axes follow the group of `count` indices at `first` (of `rank` indices) while
    the groups after it are still merged, one axis each."""
    return rank - first - count - sum(c - 1 for f, c in groups if f > first)

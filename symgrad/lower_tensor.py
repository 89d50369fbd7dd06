"""Lower tensor-valued index expressions to array statements, aligning arrays by index.

An array is *aligned* to a tuple of index symbols `axes`: its axis n runs over `axes[n]`, or
has size 1 where the value does not depend on that index, so numpy-style broadcasting combines
values. Axes are numbered from the last (negative), so a leading batch index (`...`) stands
for any number of leading axes. A Sum becomes a matmul or einsum when it contracts a product
of different tensors, a cumulative sum when its range ends at another index, and otherwise a
reduction with keepdims; arithmetic and functions become elementwise expressions. No array
has more axes than the indices in play: never a Jacobian.
"""

from __future__ import annotations

import sympy as sp

from symgrad.conv_kernels import find_convolution
from symgrad.declare import BATCH, OpDecl
from symgrad.derive import TensorValue
from symgrad.errors import LoweringError
from symgrad.functions import exact_div, maximum, minimum, product, python_float, read_outside
from symgrad.ir import (
    Arange,
    Assign,
    Convolution,
    axis_size,
    Gather,
    IndexArith,
    IntArray,
    IntSize,
    MergeAxes,
    ScatterAdd,
    SplitAxis,
    Stack,
    BroadcastTo,
    BroadcastToShape,
    DiagPart,
    Constant,
    DimSize,
    Eye,
    Iota,
    Einsum,
    Elementwise,
    Expand,
    MatMul,
    Reduce,
    Scan,
    Squeeze,
    Transpose,
    Value,
)


def is_index(symbol) -> bool:
    """Index symbols are integers not known positive (dimension sizes are positive)."""
    return isinstance(symbol, sp.Symbol) and bool(symbol.is_integer) and symbol.is_positive is not True


def free_indices(expr) -> set:
    return {s for s in expr.free_symbols if is_index(s)}


def as_expression(value: TensorValue) -> sp.Expr:
    """One expression for a sum of terms, with factors that do not vary moved out of Sums."""
    total = sp.S.Zero
    for term in value.terms:
        summed = {s[0] for s in term.sums}
        inside, outside = [], []
        for factor in sp.Mul.make_args(term.factor):
            (inside if factor.free_symbols & summed else outside).append(factor)
        total += sp.Mul(*outside) * (sp.Sum(sp.Mul(*inside), *term.sums) if term.sums else sp.Mul(*inside))
    return sp.factor_terms(total)


class TensorLowering:
    """Lowers the tensor values of one function branch; equal subexpressions share a temporary."""

    def __init__(self, decl: OpDecl, dims: dict | None = None, ranges: dict | None = None, prefix: str = "t"):
        self.decl = decl
        self.dims = dims or {}  # dimension symbol -> (variable, negative axis) it is read from
        self.ranges = dict(ranges or {})  # index -> (lowest, highest)
        self.prefix = prefix
        self.body: list[Assign] = []
        self.largest_rank = 0  # most axes of any array built (a leading `...` counts as one)
        self.largest_term = ""  # what the array with the most axes holds
        self._memo: dict = {}

    def assign(self, target: str, value: TensorValue, like: str | None = None) -> None:
        """Append statements computing `target[value.indices]`, broadcast to `like` if needed."""
        expr = as_expression(value)
        array = self.array(expr, tuple(value.indices))
        constant_along = set(value.indices) - free_indices(expr)
        if like is not None and constant_along:
            self.body.append(Assign(target, BroadcastTo(Elementwise(array), like)))
        elif (constant_along or array.is_number) and value.indices and BATCH not in value.indices:
            # constant along an axis: an output's sizes come from elsewhere, or a stage cancelled
            sizes = ", ".join(self._size_of(i) for i in value.indices)
            self.body.append(Assign(target, BroadcastToShape(Elementwise(array), f"({sizes},)")))
        elif self.body and array == sp.Symbol(self.body[-1].target) and self._is_temp(array):
            self._rename_last(target)
        else:
            self.body.append(Assign(target, Elementwise(array)))

    def assign_merged(self, target: str, value: TensorValue, groups: tuple) -> None:
        """`target[value.indices]` with each group of indices (first position, count) one
        axis, row-major: computed over separate axes, then reshaped."""
        expr = as_expression(value)
        array = self.array(expr, tuple(value.indices))
        sizes = tuple(self._size_of(i) for i in value.indices)
        broadcast = bool(set(value.indices) - free_indices(expr))
        x = str(array) if array.is_Symbol else Elementwise(array)
        self.body.append(Assign(target, MergeAxes(x, sizes, groups, broadcast)))

    def split_upstream(self, grad: str, indices: tuple, groups: tuple) -> None:
        """Reshape the upstream gradient of an output with index groups so that each index
        has its own axis, as the derivation reads it (first group first: the negative axes
        of the later ones do not move)."""
        for first, count in groups:
            after = _axes_after(len(indices), first, count, groups)
            inner = tuple(self._size_of(i) for i in indices[first + 1 : first + count])
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
            known = lambda ms: tuple(self._int_value(m) for m in ms)
            split = SplitAxis(source, -after - 1, known(members[inferred + 1 :]), known(members[:inferred]))
            self.body.append(Assign(view, split))
            source = view

    def _int_value(self, expr) -> str:
        """An integer variable holding `expr`, of attributes and numbers (a block size)."""
        if ("int value", expr) not in self._memo:
            self._memo[("int value", expr)] = self._temp(IndexArith(self._int_scalars(expr)))
        return self._memo[("int value", expr)]

    def array(self, expr: sp.Expr, axes: tuple) -> sp.Expr:
        """An elementwise expression over variables whose value is `expr` aligned to `axes`."""
        key = (expr, axes)
        if key not in self._memo:
            # the axes it varies along: a broadcast (size-1) axis holds nothing
            varying = tuple(a for a in axes if a in free_indices(expr))
            if len(varying) > self.largest_rank:
                self.largest_rank = len(varying)
                self.largest_term = f"{expr} over ({', '.join(map(str, varying))})"
            self._memo[key] = self._array(expr, axes)
        return self._memo[key]

    def _array(self, expr, axes):
        if isinstance(expr, (sp.Sum, product, maximum, minimum)):
            clashes = {lim[0] for lim in expr.limits} & set(axes)
            if clashes:  # an inner Sum's own index named like an axis here: rename it
                return self.array(expr.xreplace({k: self._fresh(k, axes) for k in clashes}), axes)
            for limit in expr.limits:  # ranges of renamed indices
                self.ranges.setdefault(limit[0], (limit[1], limit[2]))
        if not free_indices(expr) and not expr.has(sp.Indexed):
            return self._scalar(expr)
        if isinstance(expr, sp.Indexed):
            return self._entry(expr, axes)
        if isinstance(expr, read_outside):
            entry, fill = expr.args
            if not isinstance(entry, sp.Indexed) or fill.free_symbols:
                self._fail(f"{expr}: read_outside takes a tensor entry and a number")
            return self._entry(entry, axes, fill)
        if isinstance(expr, sp.Sum):
            return self._sum(expr, axes)
        if isinstance(expr, (product, maximum, minimum)):
            return self._reduction(expr, axes)
        if isinstance(expr, sp.KroneckerDelta):
            if any(not free_indices(a) for a in expr.args):
                return self._one_hot(expr, axes)
            return self._identity(expr, axes)
        if is_index(expr):
            return self._iota(expr, axes)
        if isinstance(expr, (sp.core.relational.Relational, sp.And, sp.Or, sp.Not)) and not expr.has(sp.Indexed):
            return sp.Symbol(self._index_condition(expr, axes))
        if not expr.args:
            self._fail(f"cannot lower {expr}")
        stacked = self._stacked(expr, axes) if isinstance(expr, sp.Add) else None
        if stacked is not None:
            return stacked
        return expr.func(*[self.array(arg, axes) for arg in expr.args])

    def _stacked(self, expr: sp.Add, axes) -> sp.Symbol | None:
        """`Sum_k KroneckerDelta(b, k) * T_k` over every position k of axis b (a stack, an
        unstack's gradient): the T_k stacked along b, not each times a one-hot; else None."""
        pieces, axis = {}, None
        for term in sp.Add.make_args(expr):
            deltas = [f for f in sp.Mul.make_args(term) if isinstance(f, sp.KroneckerDelta)]
            b, k = _axis_at_position(deltas[0]) if len(deltas) == 1 else (None, None)
            if b is None or b not in axes or axis not in (None, b) or k in pieces:
                return None
            axis, pieces[k] = b, term / deltas[0]
        low, high = self.ranges.get(axis, (None, None))
        if low != 0 or high != len(pieces) - 1 or sorted(pieces) != list(range(len(pieces))):
            return None  # not every position of a known number of them
        rest = tuple(a for a in axes if a != axis)
        if any(free_indices(piece) != set(rest) for piece in pieces.values()):
            return None  # a piece broadcast along an axis: not one shape
        names = []
        for k in range(len(pieces)):
            array = self.array(pieces[k], rest)
            names.append(str(array) if array.is_Symbol else self._temp(Elementwise(array)))
        return sp.Symbol(self._temp(Stack(tuple(names), axes.index(axis) - len(axes))))

    def _scalar(self, expr) -> sp.Expr:
        """A number or numeric attribute; dimension sizes are read from the arrays' shapes."""
        sizes = {d: self._dim(d) for d in _sizes_in(expr)}
        value = expr.xreplace(sizes)
        if not value.is_number and _transcendental(value):  # a Python float, not numpy's float64
            return python_float(value)
        return value

    def _dim(self, dim) -> sp.Symbol:
        if dim not in self.dims:
            self._fail(f"dimension {dim} is not the size of any input axis")
        if ("dim", dim) not in self._memo:
            self._memo[("dim", dim)] = sp.Symbol(self._temp(DimSize(*self.dims[dim])))
        return self._memo[("dim", dim)]

    def _axis_source(self, index) -> tuple | None:
        """(variable, negative axis) whose size is the number of values `index` takes."""
        size = self.ranges.get(index, (None, None))[1]
        return self.dims.get(size + 1) if size is not None else None

    def _iota(self, index, axes) -> sp.Expr:
        """An index used as a value (MatrixBandPart's `i - j`): 0, 1, ..., aligned."""
        if index not in axes:
            self._fail(f"cannot use index {index} as a value: it is not an axis here")
        return sp.Symbol(self._expand(self._index_values(index), (index,), axes))

    def _index_condition(self, condition, axes) -> str:
        """A condition on indices alone (a window inside the input), in integer arithmetic."""
        indices = tuple(a for a in axes if a in free_indices(condition))
        values = {i: sp.Symbol(self._expand(self._index_values(i), (i,), indices)) for i in indices}
        mask = self._temp(IndexArith(self._int_scalars(condition).xreplace(values)))
        return self._expand(mask, indices, axes)

    def _one_hot(self, delta: sp.KroneckerDelta, axes) -> sp.Expr:
        """KroneckerDelta(u, position) with the position free of indices (an axis StridedSlice
        shrinks away): 1 where the axis u is at that position, else 0."""
        u, position = delta.args if free_indices(delta.args[0]) else delta.args[::-1]
        if not is_index(u) or u not in axes:
            self._fail(f"cannot lower {delta}: not an axis at a position")
        position = sp.Symbol(self._temp(IndexArith(self._int_scalars(position))))
        return self.array(sp.Piecewise((1, sp.Eq(u, position)), (0, True)), axes)

    def _identity(self, delta: sp.KroneckerDelta, axes) -> sp.Expr:
        """KroneckerDelta(p, q) of two axes: an identity matrix, aligned."""
        p, q = delta.args
        source = self._axis_source(p)
        if p not in axes or q not in axes or source is None:
            self._fail(f"cannot lower {delta}: not a diagonal over two axes of known size")
        name = self._temp(Eye(*source))
        order = tuple(a for a in axes if a in (p, q))
        return sp.Symbol(self._expand(name, order, axes))

    # --- tensor entries ---

    def _entry(self, entry: sp.Indexed, axes, fill=0) -> sp.Expr:
        name, idx, shape = self._selected(str(entry.base.label), tuple(entry.indices), getattr(entry.base, "shape", None))
        narrowed = self._off_axis(idx, shape)
        idx = _kept_axes_aligned(idx, axes)
        if narrowed or any(_is_map(i) for i in idx):
            name, idx = self._gathered(name, idx, axes, fill, narrowed)
        if len(set(idx)) < len(idx):  # a diagonal: x[..., i, i]
            name, idx = self._diagonal(name, idx)
        kept = [n - len(idx) for n, i in enumerate(idx) if not isinstance(i, sp.Symbol)]
        if kept:  # literal 0: a size-1 axis kept by a reduction, with nothing to stand for
            name = self._temp(Squeeze(name, tuple(kept)))
            idx = tuple(i for i in idx if isinstance(i, sp.Symbol))
        if len(set(idx)) != len(idx) or not all(i in axes for i in idx):
            self._fail(f"cannot align {entry} to axes {axes}")
        order = tuple(a for a in axes if a in idx)
        if idx != order:
            name = self._temp(_permutation(name, idx, order))
        return sp.Symbol(self._expand(name, order, axes))

    def _selected(self, name: str, idx: tuple, shape) -> tuple[str, tuple, tuple | None]:
        """Literal subscripts along axes longer than 1 (a column of GatherNd's indices, an
        unstacked tensor's entry): the entries there, that axis gone (a literal 0 along a
        size-1 axis is a kept axis). (variable, subscripts, shape) of what is left."""
        for n in reversed(range(len(idx))):
            if idx[n].is_Integer and shape is not None and sp.sympify(shape[n]) != 1:
                name = self._gather(Gather(name, self._int_value(idx[n]), n - len(idx)))
                idx, shape = idx[:n] + idx[n + 1 :], tuple(shape[:n]) + tuple(shape[n + 1 :])
        return name, idx, shape

    # --- index maps: gathers and their adjoint, scatter-adds ---

    def _off_axis(self, idx: tuple, shape) -> frozenset:
        """The axes subscripted by a plain index whose range is not the axis (a piece of a
        concatenation, read at the joined axis's positions, zero outside): read as maps, each
        position it names."""
        found = set()
        for n, i in enumerate(idx):
            if shape is None or not isinstance(i, sp.Symbol) or i not in self.ranges:
                continue
            low, high = self.ranges[i]
            if free_indices(sp.sympify(low) + high):
                continue  # a range ending at another index: a cumulative sum's, not a piece's
            if not _spans_axis(i, shape[n], self.ranges):
                found.add(n)
        return frozenset(found)

    def _gathered(self, name: str, idx: tuple, axes: tuple, fill=0, off_axis=frozenset()) -> tuple[str, tuple]:
        """Read each mapped subscript (`i*s + k - p`, `indices[i]`, a plain index off its
        axis) with a gather, last axis first: (variable, plain indices), the map's indices in
        place of each mapped axis."""
        key = ("gather", name, idx, axes, fill, off_axis)
        if key in self._memo:
            return self._memo[key]
        result = list(idx)
        n = len(idx) - 1
        while n >= 0:
            if _is_map(idx[n]) or n in off_axis:
                group = _map_indices(idx[n], axes)
                first = _joint_start(idx, n, group, axes)
                if first < n:  # several axes read at positions from one tensor (GatherNd)
                    name, positions = self._merged_for_joint(name, result, first, n, group, idx)
                else:
                    positions = self._positions(idx[n], group)
                name = self._gather(Gather(name, positions, first - len(result) + (n - first), fill))
                result[first : n + 1] = group
                n = first
            n -= 1
        self._memo[key] = (name, tuple(result))
        return self._memo[key]

    def _merged_for_joint(self, name, result, first, last, group, idx) -> tuple[str, str]:
        """Axes first..last of `name` merged into one, and the positions there of the entries
        that subscripts `idx[first..last]` name: a gather along several axes jointly."""
        if BATCH in result:
            self._fail(f"cannot read {name} at positions along several axes: it has leading axes `...`")
        sizes = tuple(self._temp(IntSize(name, k - len(result))) for k in range(len(result)))
        merged = self._temp(MergeAxes(name, sizes, ((first, last - first + 1),)))
        components = [sp.Symbol(self._positions(idx[k], group)) for k in range(first, last + 1)]
        return merged, self._linear_positions(components, [sp.Symbol(s) for s in sizes[first : last + 1]])

    def _linear_positions(self, components: list, sizes: list) -> str:
        """Row-major positions in the merged axes (sizes `sizes`) of the positions
        `components`, -1 (outside) where a component is outside its own axis."""
        # positions read from an integer tensor (int32) meet sizes (int64): cast them
        components = [sp.Symbol(self._temp(IntArray(str(c)))) for c in components]
        linear, inside = components[0], []
        for position, size in zip(components[1:], sizes[1:]):
            linear = linear * size + position
            inside += [position >= 0, position < size]
        return self._temp(IndexArith(sp.Piecewise((linear, sp.And(*inside)), (-1, True))))

    def _positions(self, expr, group: tuple) -> str:
        """An integer array aligned to `group` holding the position `expr` names."""
        key = ("positions", expr, group)
        if key in self._memo:
            return self._memo[key]
        if isinstance(expr, sp.Indexed):  # an integer tensor's entries: the positions as given
            value = self._entry(expr, group)
            self._memo[key] = str(value)
            return self._memo[key]
        values = {i: sp.Symbol(self._expand(self._index_values(i), (i,), group)) for i in group}
        expr = self._int_scalars(expr).xreplace(values)
        if expr.is_Symbol:  # a plain index read off its axis: its positions as they are
            self._memo[key] = str(expr)
            return self._memo[key]
        if expr.is_Integer:  # one position, as a 0-d integer array: the axis is dropped
            self._memo[key] = self._temp(IntArray(str(expr)))
            return self._memo[key]
        expr = expr.replace(
            lambda e: isinstance(e, exact_div) and not e.args[0].is_Symbol,
            lambda e: exact_div(sp.Symbol(self._temp(IndexArith(e.args[0]))), e.args[1]),
        )
        self._memo[key] = self._temp(IndexArith(expr))
        return self._memo[key]

    def _int_scalars(self, expr):
        """`expr` with sizes read as integers, and each rounded size (a padding) computed once."""
        expr = expr.xreplace({d: self._int_size(d) for d in _sizes_in(expr)})

        def hoisted(e):
            if ("scalar", e) not in self._memo:
                self._memo[("scalar", e)] = sp.Symbol(self._temp(IndexArith(e)))
            return self._memo[("scalar", e)]

        rounded = (sp.floor, sp.ceiling, sp.Max, sp.Min)
        return expr.replace(lambda e: isinstance(e, rounded) and not free_indices(e), hoisted)

    def _index_values(self, index) -> str:
        """0, 1, ..., n - 1 for `index`: an axis's iota, or a range of a computed size."""
        key = ("index values", index)
        if key not in self._memo:
            source = self._axis_source(index)
            if source is not None:
                self._memo[key] = self._temp(Iota(*source))
            else:
                self._memo[key] = self._temp(Arange(self._size_of(index)))
        return self._memo[key]

    def _size_of(self, index) -> str:
        """An integer variable holding how many values `index` takes."""
        if index not in self.ranges:
            self._fail(f"index {index} has no known range")
        low, high = self.ranges[index]
        size = high - low + 1
        source = self.dims.get(size)
        if source is not None:
            return str(self._int_size(size))
        key = ("size", size)
        if key not in self._memo:
            self._memo[key] = self._temp(IndexArith(self._int_scalars(size)))
        return self._memo[key]

    def _int_size(self, dim) -> sp.Symbol:
        if dim not in self.dims:
            self._fail(f"dimension {dim} is not the size of any input axis")
        if ("int size", dim) not in self._memo:
            self._memo[("int size", dim)] = sp.Symbol(self._temp(IntSize(*self.dims[dim])))
        return self._memo[("int size", dim)]

    def _scatter(self, expr: sp.Sum, delta, axes) -> sp.Expr:
        """`Sum(KroneckerDelta(u, E) * rest, ...)` for an index map E with no inverse here:
        `rest` over E's indices (in u's place), summed into the slots E names."""
        u, positions_expr = (delta.args if delta.args[0] in axes else delta.args[::-1])
        summed = [lim[0] for lim in expr.limits]
        group = tuple(i for i in summed if i in free_indices(positions_expr))
        # deltas of adjacent axes at positions of the same indices: one scatter (ScatterNd's)
        joint = _joint_deltas(expr.function, axes, summed, u, group)
        us = [d_u for d_u, _, _ in joint]
        place, last = axes.index(us[0]), axes.index(us[-1])
        inner_axes = axes[:place] + group + axes[last + 1 :]
        rest = sp.Mul(*[a for a in sp.Mul.make_args(expr.function) if a not in [d for _, _, d in joint]])
        remaining = tuple(lim for lim in expr.limits if lim[0] not in group)
        if set(us) & free_indices(rest):
            self._fail(f"{expr}: {u} is both a scattered position and an index of the summand")
        values = self.array(sp.Sum(rest, *remaining) if remaining else rest, inner_axes)
        values = str(values) if values.is_Symbol else self._temp(Elementwise(values))
        sizes = [self._size_of(d_u) for d_u in us]
        trailing = len(axes) - last - 1
        if len(joint) == 1:
            positions, size = self._positions(positions_expr, group), sizes[0]
        else:
            components = [sp.Symbol(self._positions(e, group)) for _, e, _ in joint]
            positions = self._linear_positions(components, [sp.Symbol(s) for s in sizes])
            size = self._temp(IndexArith(sp.Mul(*[sp.Symbol(s) for s in sizes])))
        scattered = self._temp(ScatterAdd(values, positions, trailing, size))
        if len(joint) > 1:
            scattered = self._temp(SplitAxis(scattered, -trailing - 1, tuple(sizes[1:])))
        return sp.Symbol(scattered)

    def _diagonal(self, name: str, idx: tuple) -> tuple[str, tuple]:
        """Take the diagonal of repeated subscripts: (variable, its distinct indices)."""
        if len(idx) >= 2 and idx[-1] == idx[-2] and len(set(idx[:-1])) == len(idx) - 1:
            return self._temp(DiagPart(name)), idx[:-1]
        distinct = tuple(dict.fromkeys(idx))
        return self._temp(_as_einsum([(name, idx)], distinct)), distinct

    def _expand(self, name: str, order: tuple, axes: tuple) -> str:
        """`name` (axes `order`) with size-1 axes inserted where `axes` has others after its
        first; missing leading axes need nothing, broadcasting adds them."""
        present = [axes.index(i) for i in order]
        needed = [m for m in range(min(present, default=len(axes)), len(axes)) if axes[m] not in order]
        if not needed:
            return name
        subscript = tuple(":" if axes[m] in order else "None" for m in range(needed[0], len(axes)))
        key = ("expand", name, subscript)
        if key not in self._memo:
            self._memo[key] = self._temp(Expand(name, subscript))
        return self._memo[key]

    # --- sums ---

    def _sum(self, expr: sp.Sum, axes) -> sp.Expr:
        summed = tuple(lim[0] for lim in expr.limits)
        inside, outside = [], []
        for factor in sp.Mul.make_args(expr.function):
            (inside if factor.free_symbols & set(summed) else outside).append(factor)
        if outside:
            return self.array(sp.Mul(*outside), axes) * self.array(sp.Sum(sp.Mul(*inside), *expr.limits), axes)
        if not free_indices(expr) <= set(axes):
            self._fail(f"{expr} depends on indices outside {axes}")
        branched = self._sum_into_branches(expr, axes)
        if branched is not None:
            return branched
        distributed = _sum_of_expanded_terms(expr)
        if distributed is not None:
            return self.array(distributed, axes)
        convolution = self._convolution(expr, axes)
        if convolution is not None:
            return convolution
        scatter = next((d for d in _scatter_deltas(expr.function, axes, summed)), None)
        if scatter is not None:
            return self._scatter(expr, scatter, axes)
        if any(free_indices(sp.sympify(b)) for lim in expr.limits for b in lim[1:]):
            return self._scan("sum", expr, axes)
        function = self._gather_operands(self._constants_as_tensors(expr.function), axes)
        function = self._operands_materialised(function, axes, summed)
        coefficient, operands = _plain_product(function)
        if operands and len({idx for _, idx in operands}) > 1:
            out = tuple(a for a in axes if a in free_indices(expr))
            name = self._temp(lower_contraction(operands, out, summed))
            return self._scalar(coefficient) * sp.Symbol(self._expand(name, out, axes))
        return self._reduce("sum", expr.function, summed, axes)

    # --- convolutions ---

    def _sum_into_branches(self, expr: sp.Sum, axes) -> sp.Expr | None:
        """`Sum(Piecewise((a, c), (0, True)) * r)` with `c` free of the summed indices is
        `Piecewise((Sum(a * r), c), (0, True))`: a relu's mask applied after the matmul, not
        a masked product over every index. None when no such Piecewise is a factor."""
        summed = {lim[0] for lim in expr.limits}
        factors = sp.Mul.make_args(expr.function)
        for n, factor in enumerate(factors):
            if isinstance(factor, sp.Piecewise) and not any(c.free_symbols & summed for _, c in factor.args):
                rest = sp.Mul(*factors[:n], *factors[n + 1 :])  # not a division: SymPy keeps Piecewise / Piecewise
                branches = [
                    (self.array(sp.Sum(v * rest, *expr.limits), axes) if v != 0 else v, self.array(c, axes))
                    for v, c in factor.args
                ]
                return sp.Piecewise(*branches, evaluate=False)  # SymPy would move c into the Sums
        return None

    def _convolution(self, expr: sp.Sum, axes) -> sp.Expr | None:
        """A sum of two tensor entries that a convolution kernel computes (`conv_kernels`),
        over whole axes, as that kernel: no window is gathered."""
        coefficient, entries = sp.S.One, []
        for factor in sp.Mul.make_args(expr.function):
            if isinstance(factor, sp.Indexed):
                entries.append(factor)
            elif free_indices(factor) or factor.has(sp.Indexed):
                return None
            else:
                coefficient *= factor
        out = tuple(a for a in axes if a in free_indices(expr))
        ranges = {**self.ranges, **{lim[0]: (lim[1], lim[2]) for lim in expr.limits}}
        found = find_convolution(entries, out, tuple(lim[0] for lim in expr.limits), is_index)
        if found is None or not all(_whole_axes(entry, ranges) for entry in found.operands):
            return None
        spatial = found.result_spatial()
        if any(ranges[i][0] != 0 for i in spatial) or not self._sizes_known(found, spatial, ranges):
            return None
        static = self._static_sizes
        name = self._temp(
            Convolution(
                found.kernel.name,
                tuple(str(entry.base.label) for entry in found.operands),
                tuple(static(s) for s in found.strides),
                tuple(static(d) for d in found.dilations),
                tuple(static(p) for p in found.pads),
                tuple(static(ranges[i][1] + 1) for i in spatial),
            )
        )
        return self._scalar(coefficient) * sp.Symbol(self._expand(name, out, axes))

    def _sizes_known(self, found, spatial, ranges) -> bool:
        sizes = [found.strides, found.dilations, found.pads, [ranges[i][1] for i in spatial]]
        return all(d in self.dims for group in sizes for e in group for d in _sizes_in(sp.sympify(e)))

    def _static_sizes(self, expr) -> sp.Expr:
        """`expr` with each dimension size read from an array's shape as `axis_size`."""
        expr = sp.sympify(expr)
        return expr.xreplace({d: axis_size(sp.Symbol(self.dims[d][0]), self.dims[d][1]) for d in _sizes_in(expr)})

    def _operands_materialised(self, product: sp.Expr, axes, summed) -> sp.Expr:
        """Elementwise functions of tensor entries (`tanh(h[i, k])`) as arrays of their own,
        when that makes the product a contraction (a matmul, not a product broadcast over
        every index and then summed)."""
        factors = sp.Mul.make_args(product)
        plain = lambda f: isinstance(f, sp.Indexed) and all(is_index(i) for i in f.indices)
        constant = lambda f: not free_indices(f) and not f.has(sp.Indexed)
        computed = [f for f in factors if not plain(f) and not constant(f)]
        if not computed or any(not f.has(sp.Indexed) or _has_reduction(f) for f in computed):
            return product
        order = tuple(axes) + tuple(summed)
        # computed factors over the same indices are one array (a relu's mask times its input)
        groups: dict = {}
        for f in computed:
            groups.setdefault(frozenset(free_indices(f)), []).append(f)
        for f in factors:  # an entry over the same indices joins them (one array, not two)
            if plain(f) and frozenset(f.indices) in groups and len(set(f.indices)) == len(f.indices):
                groups[frozenset(f.indices)].append(f)
                computed.append(f)
        merged = {sp.Mul(*fs): _laid_out(sp.Mul(*fs), order) for fs in groups.values()}
        tuples = set(merged.values()) | {tuple(f.indices) for f in factors if plain(f)}
        if len(tuples) < 2 or not all(set(free_indices(f)) <= set(order) for f in computed):
            return product
        result = [f for f in factors if f not in computed]
        for f, idx in merged.items():
            array = self.array(f, idx)
            name = str(array) if array.is_Symbol else self._temp(Elementwise(array))
            result.append(sp.IndexedBase(name)[idx])
        return sp.Mul(*result)

    def _gather_operands(self, product: sp.Expr, axes) -> sp.Expr:
        """Tensor entries with mapped subscripts as entries of gathered arrays, plainly
        indexed, so the product can still be a contraction (a convolution: an einsum)."""
        factors = []
        for factor in sp.Mul.make_args(product):
            if isinstance(factor, sp.Indexed) and any(_is_map(i) for i in factor.indices):
                name, idx = self._gathered(str(factor.base.label), tuple(factor.indices), axes)
                factor = sp.IndexedBase(name)[idx]
            factors.append(factor)
        return sp.Mul(*factors)

    def _reduction(self, expr, axes) -> sp.Expr:
        """A product, maximum or minimum: over a whole axis, or cumulative (products only)."""
        kind = "prod" if isinstance(expr, product) else expr.kind
        if any(free_indices(sp.sympify(b)) for lim in expr.limits for b in lim[1:]):
            if kind != "prod":
                self._fail(f"{expr}: only sums and products may have a range that depends on an index")
            return self._scan(kind, expr, axes)
        return self._reduce(kind, expr.function, tuple(lim[0] for lim in expr.limits), axes)

    def _reduce(self, kind, body, summed, axes) -> sp.Expr:
        """Reduce `body` over `summed`, each taking the place of an axis `body` does not vary
        along (keepdims), or else laid out as `body`'s own tensors are (no transpose)."""
        # a slot before the body's first axis would not exist in its (broadcast) array
        first = min((n for n, a in enumerate(axes) if a in free_indices(body)), default=len(axes))
        unused = [n for n, a in enumerate(axes) if a not in free_indices(body) and a != BATCH and n > first]
        if BATCH not in summed and len(unused) >= len(summed):
            extended = list(axes)
            for index, slot in zip(summed, reversed(unused)):
                extended[slot] = index
            positions, keepdims = [extended.index(i) for i in summed], True
        else:
            extended, keepdims = _layout(body, axes, summed), False
            positions = [extended.index(i) for i in summed if i != BATCH]
        inner = Elementwise(self.array(body, tuple(extended)))
        negative = tuple(sorted(p - len(extended) for p in positions))
        if extended == [BATCH]:  # every axis: a reduction to a scalar
            return sp.Symbol(self._temp(Reduce(kind, inner, ())))
        if BATCH in summed:  # every leading axis too: the reduction needs the array's rank
            inner = str(inner.expr) if inner.expr.is_Symbol else self._temp(inner)
            return sp.Symbol(self._temp(Reduce(kind, inner, negative, False, len(extended) - 1)))
        return sp.Symbol(self._temp(Reduce(kind, inner, negative, keepdims)))

    def _scan(self, kind, expr, axes) -> sp.Expr:
        """A sum or product over k whose range starts or ends at another index i: cumulative
        along i (exclusive when the range stops one short of i)."""
        dependent = [lim for lim in expr.limits if free_indices(sp.sympify(lim[1]) - sp.sympify(lim[2]))]
        if len(dependent) != 1:
            self._fail(f"{expr}: only one summation index may have a range that depends on another")
        k, low, high = dependent[0]
        others = [lim for lim in expr.limits if lim is not dependent[0]]
        function = sp.Sum(expr.function, *others) if others else expr.function  # summed first
        bound = free_indices(sp.sympify(low) - sp.sympify(high)) or {None}
        (i,) = bound if len(bound) == 1 else (None,)
        if i is None or i not in axes or i in free_indices(function):
            self._fail(f"{expr}: a cumulative sum needs exactly one bounding index, not in the summand")
        reverse = bool(low.has(i))
        offset = (low - i) if reverse else (i - high)
        if offset not in (0, 1) or (reverse and high.has(i)) or (not reverse and low != 0):
            self._fail(f"{expr}: range {low}..{high} is not a (reverse) cumulative range over {i}")
        extended = tuple(k if a == i else a for a in axes)
        inner = self.array(function, extended)
        axis = axes.index(i) - len(axes)
        return sp.Symbol(self._temp(Scan(kind, Elementwise(inner), axis, offset == 1, reverse)))

    def _constants_as_tensors(self, product: sp.Expr) -> sp.Expr:
        """Factors that depend on indices alone (LeviCivita(i, j, k)) over ranges of known
        size become small constant tensors, so the product can still be a contraction."""
        factors = []
        for factor in sp.Mul.make_args(product):
            idx = tuple(sorted(free_indices(factor), key=str))
            if idx and not factor.has(sp.Indexed) and not isinstance(factor, sp.KroneckerDelta):
                sizes = [self._numeric_size(i) for i in idx]
                if None not in sizes and sum(sizes) <= 64:
                    constant = Constant(_tabulate(factor, idx, sizes), self._like())
                    if constant not in self._memo:
                        self._memo[constant] = self._temp(constant)
                    factor = sp.IndexedBase(self._memo[constant])[idx]
            factors.append(factor)
        return sp.Mul(*factors)

    def _numeric_size(self, index) -> int | None:
        low, high = self.ranges.get(index, (None, None))
        return int(high - low + 1) if low == 0 and high is not None and high.is_Integer else None

    def _like(self) -> str:
        return next(iter(v for v, _ in self.dims.values()))

    # --- helpers ---

    def _fresh(self, index, axes) -> sp.Symbol:
        n = 0
        while sp.Symbol(f"{index}{n}", integer=True) in set(axes) | set(self.ranges):
            n += 1
        return sp.Symbol(f"{index}{n}", integer=True)

    def _gather(self, gather: Gather) -> str:
        """A temporary holding `gather`, computed once: the gathers of a sum of mapped reads
        (MirrorPad's mirror images, axis by axis) share their first steps."""
        if gather not in self._memo:
            self._memo[gather] = self._temp(gather)
        return self._memo[gather]

    def _temp(self, value: Value) -> str:
        name = f"{self.prefix}{sum(s.target.startswith(self.prefix) for s in self.body)}"
        self.body.append(Assign(name, value))
        return name

    def _rename_last(self, target: str) -> None:
        """Name the last temporary `target`, and read it so wherever it is reused: its number
        is free again, for the next temporary."""
        old = self.body[-1].target
        self.body[-1] = Assign(target, self.body[-1].value)
        for key, value in self._memo.items():
            if value == sp.Symbol(old) or value == old:
                self._memo[key] = sp.Symbol(target) if isinstance(value, sp.Symbol) else target

    def _is_temp(self, symbol) -> bool:
        return str(symbol).startswith(self.prefix) and str(symbol)[len(self.prefix) :].isdigit()

    def _fail(self, what: str):
        raise LoweringError(what, self.decl.name, self.decl.location)


def _layout(body, axes: tuple, summed: tuple) -> list:
    """Axes for reducing `body`: the order of its first tensor entry that holds them all and
    keeps `axes` in order (no transpose needed), else `axes` then the summed indices."""
    wanted = set(axes) | set(summed)
    for entry in sorted(body.atoms(sp.Indexed), key=str):
        order = list(dict.fromkeys(i for i in entry.indices if i in wanted))
        if set(order) == wanted and [i for i in order if i in axes] == list(axes):
            return order
    return [BATCH] * (BATCH in summed) + list(axes) + [i for i in summed if i != BATCH]


def _whole_axes(entry: sp.Indexed, ranges: dict) -> bool:
    """Whether each plain index of `entry` runs over its whole axis (0 to the size - 1)."""
    shape = getattr(entry.base, "shape", None)
    if shape is None:
        return False
    return all(_spans_axis(i, size, ranges) for i, size in zip(entry.indices, shape) if is_index(i))


def _spans_axis(index, size, ranges: dict) -> bool:
    """Whether `index` runs over the whole axis of `size` entries: 0 to size - 1."""
    low, high = ranges.get(index, (None, None))
    return low == 0 and high is not None and sp.simplify(high - size + 1) == 0


def _axes_after(rank: int, first: int, count: int, groups: tuple) -> int:
    """How many axes follow the group of `count` indices at `first` (of `rank` indices) while
    the groups after it are still merged, one axis each."""
    return rank - first - count - sum(c - 1 for f, c in groups if f > first)


def _sizes_in(expr) -> list:
    """The dimension sizes in `expr`, in a fixed order (temporaries are numbered by it)."""
    return sorted((d for d in expr.free_symbols if d.is_integer and d.is_positive), key=str)


def _is_map(subscript) -> bool:
    """An affine or indirect subscript (not an index, not a literal 0 for a kept axis)."""
    return not isinstance(subscript, sp.Symbol) and not subscript.is_Integer


def _map_indices(subscript, axes: tuple) -> tuple:
    """The indices a mapped subscript depends on, in `axes` order, then by name."""
    found = free_indices(subscript)
    return tuple(sorted(found, key=lambda i: (axes.index(i) if i in axes else len(axes), str(i))))


def _scatter_deltas(function, axes: tuple, summed: tuple) -> list:
    """`KroneckerDelta(u, E)` factors with u an axis and E a map of summed indices."""
    found = []
    for delta in sp.Mul.make_args(function):
        if isinstance(delta, sp.KroneckerDelta):
            a, b = delta.args
            u, e = (a, b) if a in axes and _is_map(b) else (b, a) if b in axes and _is_map(a) else (None, None)
            if u is not None and free_indices(e) and free_indices(e) <= set(summed):
                found.append(delta)
    return found


def _joint_start(idx: tuple, last: int, group: tuple, axes: tuple) -> int:
    """The first of the adjacent subscripts ending at `last` that are entries of integer
    tensors over the same indices `group` (GatherNd's `indices[k, 0], indices[k, 1]`)."""
    first = last
    while (
        isinstance(idx[last], sp.Indexed)
        and first > 0
        and isinstance(idx[first - 1], sp.Indexed)
        and _map_indices(idx[first - 1], axes) == group
    ):
        first -= 1
    return first


def _joint_deltas(function, axes: tuple, summed, u, group: tuple) -> list[tuple]:
    """(axis, positions, delta) of u's scatter delta and of those of the axes next to it whose
    positions are, as u's, entries of integer tensors over the indices `group` (ScatterNd's)."""
    deltas = {}
    for delta in _scatter_deltas(function, axes, summed):
        a, b = delta.args
        d_u, e = (a, b) if a in axes else (b, a)
        deltas[axes.index(d_u)] = (d_u, e, delta)
    grouped = lambda e: tuple(i for i in summed if i in free_indices(e)) == group
    jointly = lambda k: k in deltas and isinstance(deltas[k][1], sp.Indexed) and grouped(deltas[k][1])
    first = last = axes.index(u)
    if not jointly(first):
        return [deltas[first]]
    while jointly(first - 1):
        first -= 1
    while jointly(last + 1):
        last += 1
    return [deltas[k] for k in range(first, last + 1)]


def _kept_axes_aligned(idx: tuple, axes: tuple) -> tuple:
    """Let a literal 0 subscript (a kept size-1 axis) stand for the index at its place in
    `axes`, counted from the last, when that index is not used otherwise: it broadcasts."""
    result = list(idx)
    for n, i in enumerate(idx):
        place = n - len(idx) + len(axes)
        if i.is_Integer and 0 <= place and axes[place] not in idx and is_index(axes[place]):
            result[n] = axes[place]
    return tuple(result)


def _axis_at_position(delta: sp.KroneckerDelta) -> tuple:
    """(b, k) for `KroneckerDelta(b, k)` with b an index and k a literal position, else
    (None, None)."""
    a, b = delta.args
    if is_index(a) and b.is_Integer:
        return a, int(b)
    if is_index(b) and a.is_Integer:
        return b, int(a)
    return None, None


def _sum_of_expanded_terms(expr: sp.Sum) -> sp.Expr | None:
    """`Sum((x[i, d] - y[j, d])**2, d)`, whose body no single entry's indices hold (an (i, j, d)
    array), as the Sums of its expanded terms: `Sum(x**2) + Sum(y**2) - 2*Sum(x*y)`, each an
    entry's reduction or a contraction. None when the body is held by an entry, or is no
    polynomial of entries."""
    body = expr.function
    entries = body.atoms(sp.Indexed)
    indices = free_indices(body)
    if not entries or any(indices <= set(e.indices) for e in entries) or not body.is_polynomial(*entries):
        return None
    expanded = sp.expand(body)
    if not isinstance(expanded, sp.Add):
        return None
    return sp.Add(*[sp.Sum(term, *expr.limits) for term in expanded.args])


def _transcendental(scalar) -> bool:
    """A scalar with a root, an exponential, a logarithm or a trigonometric function in it."""
    if any(not p.exp.is_Integer for p in scalar.atoms(sp.Pow)):
        return True
    kinds = (sp.exp, sp.log, sp.functions.elementary.trigonometric.TrigonometricFunction,
             sp.functions.elementary.hyperbolic.HyperbolicFunction)
    return any(isinstance(f, kinds) for f in scalar.atoms(sp.Function))


def _laid_out(factor, order: tuple) -> tuple:
    """`factor`'s indices in the order its tensors' axes have them (no transpose to compute
    it), the others as in `order`."""
    seen = [BATCH]  # the leading `...` axes lead (other arrays broadcast against them)
    seen += [i for e in sorted(factor.atoms(sp.Indexed), key=str) for i in e.indices if is_index(i)]
    seen += [i for i in order if i in free_indices(factor)]
    return tuple(i for i in dict.fromkeys(seen) if i in free_indices(factor))


def _has_reduction(expr) -> bool:
    return bool(expr.atoms(sp.Sum, product, maximum, minimum))


def _tabulate(factor, idx, sizes) -> tuple:
    """The values of `factor` over every combination of its indices, as nested tuples."""
    if not idx:
        return factor
    return tuple(_tabulate(factor.subs(idx[0], n), idx[1:], sizes[1:]) for n in range(sizes[0]))


def _plain_product(expr) -> tuple[sp.Expr, list]:
    """(coefficient, [(tensor, indices)]) when `expr` is a product of plain tensor entries."""
    coefficient, operands = sp.S.One, []
    for factor in sp.Mul.make_args(expr):
        if isinstance(factor, sp.Indexed) and all(is_index(i) for i in factor.indices):
            operands.append((str(factor.base.label), tuple(factor.indices)))
        elif not free_indices(factor) and not factor.has(sp.Indexed):
            coefficient *= factor
        else:
            return sp.S.One, []
    return coefficient, operands


def _permutation(name: str, idx: tuple, order: tuple) -> Value:
    if BATCH in idx:
        return _as_einsum([(name, idx)], order)
    return Transpose(name, tuple(idx.index(i) for i in order))


def lower_contraction(operands: list[tuple[str, tuple]], out: tuple, summed: tuple) -> Value:
    """The plainest array operation computing `Sum(prod(operands), summed)` indexed by `out`."""
    distinct = all(len(set(idx)) == len(idx) for _, idx in operands)
    if distinct and all(idx == tuple(out) for _, idx in operands) and not summed:
        return Elementwise(sp.Mul(*[sp.Symbol(name) for name, _ in operands]))
    matmul = _as_matmul(operands, out, summed)
    return matmul if matmul is not None else _as_einsum(operands, out)


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


def _as_einsum(operands, out) -> Einsum:
    letters: dict = {BATCH: "..."}
    for _, idx in operands:
        for i in idx:
            letters.setdefault(i, "abcdefghijklmnopqrstuvwxyz"[len(letters) - 1])
    spec = ",".join("".join(letters[i] for i in idx) for _, idx in operands)
    spec += "->" + "".join(letters[i] for i in out)
    return Einsum(spec, tuple(name for name, _ in operands))

"""Stages of a composed op: the intermediate tensors its gradient is taken through.

A hand-written gradient of a composed op (a layer norm, attention, an MLP block) keeps the
forward's intermediates and applies the chain rule one stage at a time. Here a stage is an
`Output`-like value `name[indices] = expr` over the op's inputs and earlier stages:

* declared with `stage()` (attention's scores), or
* made automatically from a reduction (`Sum`, `product`, `maximum`, `minimum`) nested inside
  another reduction's body, where differentiating the whole would couple the two reductions'
  indices (a product of sums over different bound indices, built jointly: a Jacobian). Each
  such reduction is staged over the indices of its context it depends on; equal reductions
  (up to the names of their indices) are one stage, wherever they occur; or
* made automatically from the normalised weights of a weighted sum (attention's softmax
  weights, masked or not, in `sum_j w[i, j] * v[j, e]`), whose gradient is then a matmul and
  a softmax's, not a product of three tensors.

Reductions at the top of an expression (Softmax's denominator) are left in place: the
single-stage engine differentiates them exactly, in O(n), and output reuse then reads them
as the hand-written gradient does. An index bound again inside a reduction that binds it
(a maximum over l inside a Sum over l) is renamed: one letter bound twice is two indices.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import sympy as sp

from symgrad.declare import BATCH, BATCH_DIM, Tensor
from symgrad.declaration import OpVariant, Output, TensorInput
from symgrad.derivation import TensorValue, Term
from symgrad.functions import indicator, logsumexp
from symgrad.extrema import _Extremum, extremum_from
from symgrad.validate import index_ranges, index_symbols

REDUCTIONS = (sp.Sum, sp.Product, _Extremum, logsumexp)
AUTO_NAMES = {sp.Sum: "sum", sp.Product: "prod", _Extremum: "ext", logsumexp: "lse"}


@dataclass(frozen=True)
class Staged:
    """An op variant split into stages (forward order) and outputs that read them."""

    stages: tuple[Output, ...]  # each reads the op's inputs and earlier stages
    tensors: tuple[TensorInput, ...]  # one per stage: how later expressions read it
    outputs: tuple[Output, ...]  # the op's outputs, reading stages

    def part(self, variant: OpVariant, n: int | None) -> OpVariant:
        """Stage n (None: the outputs) as a single-stage variant whose inputs are the op's
        inputs and the stages its expression reads."""
        outputs = self.outputs if n is None else (self.stages[n],)
        read = set().union(*(tensors_read(o.expr) for o in outputs))
        stages = tuple(t for t in self.tensors if t.name in read)
        return dataclasses.replace(variant, inputs=variant.inputs + stages, outputs=outputs, stages=())


def tensors_read(expr) -> set[str]:
    """The names of the tensors `expr` reads: entries, and scalars (a stage or upstream
    gradient with no indices is read as a symbol, as a scalar output's is)."""
    names = {str(e.base.label) for e in expr.atoms(sp.Indexed)}
    return names | {s.name for s in expr.free_symbols if isinstance(s, sp.Symbol) and not s.is_integer}


def is_read_of(factor, name: str) -> bool:
    """`factor` is an entry of tensor `name`, or the scalar `name`."""
    if isinstance(factor, sp.Indexed):
        return str(factor.base.label) == name
    return isinstance(factor, sp.Symbol) and factor.name == name and not factor.is_integer


def scalar_entry(name: str) -> sp.Symbol:
    """How an expression reads a stage with no indices (a mean over every axis, inside a function)."""
    return sp.Symbol(name)


def split_stages(variant: OpVariant) -> Staged:
    """The stages of `variant`: those declared, then nested reductions, with bound indices
    renamed apart in every expression."""
    ranges = index_ranges(_with_declared_stages(variant))
    stager = _Stager(variant, ranges)
    for declared in variant.stages:
        stager.add(dataclasses.replace(declared, expr=stager.staged(declared.expr, declared.indices)))
    outputs = tuple(dataclasses.replace(o, expr=stager.staged(o.expr, o.indices)) for o in variant.outputs)
    return Staged(tuple(stager.stages), tuple(stager.tensors), outputs)


def _with_declared_stages(variant: OpVariant) -> OpVariant:
    """`variant` with its declared stages as inputs and outputs, to validate them all at once."""
    tensors = tuple(TensorInput(s.name, _tensor(s.name, s.indices, dict(s.sizes), {})) for s in variant.stages)
    if not tensors:
        return variant
    return dataclasses.replace(variant, inputs=variant.inputs + tensors, outputs=variant.stages + variant.outputs)


def _tensor(name: str, indices: tuple, sizes: dict, ranges: dict) -> sp.IndexedBase:
    shape = []
    for index in indices:
        if index == BATCH:
            shape.append(BATCH_DIM)
        elif index in sizes:
            shape.append(sizes[index])
        else:
            shape.append(ranges[index][1] + 1)
    return Tensor(name, shape=tuple(shape))  # as `stage()` returns it: one symbol


class _Stager:
    """Collects stages while rewriting expressions to read them."""

    def __init__(self, variant: OpVariant, ranges: dict):
        self.variant = variant
        self.ranges = dict(ranges)
        self.stages: list[Output] = []
        self.tensors: list[TensorInput] = []
        self.keys: dict = {}  # canonical form -> (stage tensor, its indices)
        self.normalisers: set[str] = set()  # the stages made of a reduction
        self.taken = {t.name for t in variant.inputs} | {o.name for o in variant.outputs}
        self.taken |= {a.name for a in variant.decl.attrs} | {s.name for s in variant.stages}
        differentiable = {t.name for t in variant.inputs if not t.integer} | {s.name for s in variant.stages}
        self.differentiable = differentiable

    def add(self, stage: Output) -> None:
        shape = _tensor(stage.name, stage.indices, dict(stage.sizes), self.ranges)
        self.stages.append(stage)
        self.tensors.append(TensorInput(stage.name, shape))
        self.differentiable.add(stage.name)

    def staged(self, expr: sp.Expr, indices: tuple) -> sp.Expr:
        """`expr` with nested reductions read from stages (twice: a reduction met first at
        the top, then staged inside another, is read from its stage at both places)."""
        context = tuple(i for i in indices if isinstance(i, sp.Symbol))
        expr = _counted(_unshadowed(expr, set(context)))
        self._visit(expr, context, linear=True)
        return self._visit(expr, context, linear=True)

    def _visit(self, expr, context: tuple, linear: bool):
        """`linear`: `expr` is a term of the whole expression, or a factor of one whose other
        factors are constants (a mean's `1/N`): a reduction there is no stage."""
        if isinstance(expr, REDUCTIONS):
            bound = tuple(lim[0] for lim in expr.limits)
            for lim in expr.limits:
                self.ranges.setdefault(lim[0], (lim[1], lim[2]))
            body = self._visit(expr.function, context + bound, linear=False)
            limits = expr.limits
            if isinstance(expr, sp.Sum):
                body, limits = self._weights_staged(body, context, limits)
            expr = expr.func(body, *limits)
            # a cumulative log-sum-exp, even at the top: its gradient reads it inside a sum
            return self._as_stage(expr, context, create=not linear)
        if not expr.args or isinstance(expr, sp.Indexed):
            return expr
        if isinstance(expr, extremum_from):  # its extremum in place: the derivative reads its entries
            initial, extremum = expr.args
            return expr.func(self._visit(initial, context, False), self._visit(extremum, context, True))
        if isinstance(expr, sp.Add) and not linear and self._is_affine_hull(expr):
            # a reduction plus terms over no other index (`x @ w1 + b1`): staged whole, as a
            # pre-activation or attention's scores, so its terms' gradients are reductions of its own
            inner = expr.func(*[self._visit(a, context, True) for a in expr.args])
            return self._as_stage(inner, context, create=True)
        if isinstance(expr, sp.Add):
            return expr.func(*[self._visit(a, context, linear) for a in expr.args])
        if isinstance(expr, sp.Mul) and linear:
            args = []
            for a in expr.args:
                constant_rest = not any(self._reads_differentiable(b) for b in expr.args if b is not a)
                args.append(self._visit(a, context, constant_rest))
            return expr.func(*args)
        return expr.func(*[self._visit(a, context, False) for a in expr.args])

    def _weights_staged(self, body: sp.Expr, context: tuple, limits: tuple) -> tuple:
        """(`body`, `limits`), a Sum's summand and limits, with the summand's weights read from
        a stage where the Sum is a weighted contraction, as attention's `sum_j w[i, j] * v[j, e]`
        with `w[i, j] = exp(s[i, j] - m[i]) / sum_l exp(s[i, l] - m[i])`, masked or not:

        * the weights: the summand's factors over indices that are not plain entries, together,
          reading a summed index;
        * a contraction: another factor reads an index the weights do not;
        * normalised: the weights read a staged reduction over the summed index (a row's sum or
          maximum; `tanh(sum1[i, h])` in `sum_h tanh(sum1[i, h]) * w[h, j]` is no weights).

        Differentiated in place, such weights' row sum couples the summed index with the other
        factor's (a product of three tensors, or an intermediate over both); through a stage the
        gradient is a matmul and a softmax's row kernel, as a hand-written one is. A range
        bounded by another index (`(j, 0, i)`) is the stage's mask, the stage 0 outside it, and
        the Sum then runs over the whole axis."""
        bound = tuple(lim[0] for lim in limits)
        weighted = [f for f in sp.Mul.make_args(body) if index_symbols(f) and not isinstance(f, sp.Indexed)]
        weights = sp.Mul(*weighted)
        axes = index_symbols(weights)
        summed = axes & set(bound)
        if not summed or axes >= index_symbols(body) or not self._reads_normaliser(weights, summed):
            return body, limits
        masked = weights * sp.Mul(*(_range_mask(lim) for lim in limits if lim[0] in axes))
        read = self._as_stage(masked, context + bound, create=True, kind="weights")
        if read is masked:
            return body, limits
        whole = tuple((i, 0, self._highest(i)) if i in axes else (i, low, high) for i, low, high in limits)
        return sp.Mul(*(f for f in sp.Mul.make_args(body) if f not in weighted)) * read, whole

    def _reads_normaliser(self, weights: sp.Expr, summed: set) -> bool:
        """`weights` read a staged reduction over the summed indices: a stage indexed by
        neither of them (a row's sum or maximum), where the weights read them elsewhere."""
        reads = [e for e in weights.atoms(sp.Indexed) if str(e.base.label) in self.normalisers]
        scalars = {s.name for s in weights.free_symbols if isinstance(s, sp.Symbol)} - {str(e.base.label) for e in reads}
        return bool(scalars & self.normalisers) or any(not summed & index_symbols(read) for read in reads)

    def _as_stage(self, reduction, context: tuple, create: bool, kind: str | None = None):
        """A read of the stage `reduction` is (made if `create`), else `reduction` itself;
        `kind` names it (by default, the kind of reduction)."""
        free = index_symbols(reduction)
        indices = self._laid_out(tuple(i for i in context if i in free))
        if set(indices) != free or not self._reads_differentiable(reduction) or _running(reduction):
            return reduction
        key = _canonical(reduction, indices)
        if key not in self.keys:
            if not create or not all(self._rectangular(i) for i in indices):
                return reduction
            name = self._fresh_name(kind or next((AUTO_NAMES[c] for c in AUTO_NAMES if isinstance(reduction, c)), "affine"))
            if isinstance(reduction, REDUCTIONS):
                self.normalisers.add(name)
            own = {i: self._own_axis(i, name) for i in indices}  # computed over 0 to its highest
            sizes = tuple((own[i], self._highest(i) + 1) for i in indices if not self._subscripts_axis(reduction, i))
            self.add(Output(name, tuple(own.values()), reduction.xreplace(own), sizes))
            self.keys[key] = (self.tensors[-1].base, indices)
        base, _ = self.keys[key]
        return base[indices] if indices else scalar_entry(str(base.label))

    def _laid_out(self, indices: tuple) -> tuple:
        """`indices` (in the order of the context) in the order an input lays out their sizes,
        where one input has each of those sizes once: a cumulative log-sum-exp inside a sum over
        the scanned axis is then stored as the input is, not with the scanned axis last."""
        sizes = {i: self._highest(i) for i in indices if i != BATCH}
        if len(sizes) < 2 or None in sizes.values():
            return indices
        for tensor in self.variant.inputs:
            shape = [s - 1 for s in getattr(tensor.base, "shape", None) or ()]
            if all(shape.count(size) == 1 for size in sizes.values()):
                return tuple(sorted(indices, key=lambda i: -1 if i == BATCH else shape.index(sizes[i])))
        return indices

    def _is_affine_hull(self, expr: sp.Add) -> bool:
        """A sum one of whose terms is a reduction (times constants) over all its indices."""
        free = index_symbols(expr)
        for term in expr.args:
            reductions = [f for f in sp.Mul.make_args(term) if isinstance(f, REDUCTIONS)]
            rest = [f for f in sp.Mul.make_args(term) if not isinstance(f, REDUCTIONS)]
            if len(reductions) == 1 and not any(self._reads_differentiable(f) or index_symbols(f) for f in rest):
                if index_symbols(reductions[0]) == free:
                    return True
        return False

    def _reads_differentiable(self, expr) -> bool:
        return bool(tensors_read(expr) & self.differentiable)

    def _rectangular(self, index) -> bool:
        """A staged index needs a range from 0, or from another index's value, to a bound of
        no other index, or to another index's value: the stage is computed over 0 to the
        highest value (a cumulative log-sum-exp read in a sum from another index on)."""
        if index == BATCH:
            return True
        low = self.ranges.get(index, (None, None))[0]
        return (low == 0 or low in self.ranges) and self._highest(index) is not None

    def _own_axis(self, index, stage: str):
        """`index`, or where its range is narrower than 0 to its highest value, an index of
        the stage's own over that (its range would clash with the context's)."""
        if index == BATCH or self.ranges[index] == (0, self._highest(index)):
            return index
        axis = sp.Symbol(f"{stage}_{index}", integer=True)
        self.ranges[axis] = (0, self._highest(index))
        return axis

    def _highest(self, index) -> sp.Expr | None:
        """The highest value of `index`: its range's bound, or the highest of the index it
        ends at; None where that is neither."""
        high = self.ranges.get(index, (None, None))[1]
        if high is None or not index_symbols(sp.sympify(high)):
            return high
        return self._highest(high) if high in self.ranges and high != index else None

    @staticmethod
    def _subscripts_axis(expr, index) -> bool:
        return any(index in e.indices for e in expr.atoms(sp.Indexed))

    def _fresh_name(self, kind: str) -> str:
        for n in itertools.count(1):
            name = f"{kind}{n}"
            if name not in self.taken:
                self.taken.add(name)
                return name


def _range_mask(limit) -> sp.Expr:
    """1 inside the range of `limit` where a bound names another index (`indicator(j <= i)`),
    else 1."""
    index, low, high = limit
    mask = sp.S.One
    if index_symbols(sp.sympify(low)):
        mask *= indicator(index >= low)
    if index_symbols(sp.sympify(high)):
        mask *= indicator(index <= high)
    return mask


def _running(reduction) -> bool:
    """A product from one index to another (`prod_{m < k <= i} x[k]` in a sum over i): staged,
    it would be a pairwise (m, i) array; in place, the sum around it is a linear recurrence
    (`symgrad.lowering.recurrences`)."""
    return isinstance(reduction, sp.Product) and any(
        len(index_symbols(sp.sympify(lim[1]) - sp.sympify(lim[2]))) == 2 for lim in reduction.limits
    )


def _canonical(reduction, free: tuple):
    """`reduction` with its free indices (in order) and bound indices named by position, so
    that equal reductions written with other letters have one key."""
    placeholders = {f: sp.Symbol(f"_f{n}", integer=True) for n, f in enumerate(free)}
    counter = itertools.count()

    def walk(e):
        if isinstance(e, REDUCTIONS):
            renames = {lim[0]: sp.Symbol(f"_b{next(counter)}", integer=True) for lim in e.limits}
            e = e.xreplace(renames)
            return e.func(walk(e.function), *e.limits)
        if not e.args or isinstance(e, sp.Indexed):
            return e
        return e.func(*[walk(a) for a in e.args])

    return walk(reduction.xreplace(placeholders))


def _counted(expr):
    """`expr` with every reduction over an index its body does not read written out: a sum
    is a count times its body (`Sum(mean, (k, 0, N - 1))` is `N*mean`), a product a power,
    an extremum its body. (No other limit's bounds may name the index.)"""
    if not expr.args or isinstance(expr, sp.Indexed):
        return expr
    if not isinstance(expr, REDUCTIONS):
        return expr.func(*[_counted(a) for a in expr.args])
    body = _counted(expr.function)
    bounding = {lim[0] for lim in expr.limits if any(b.has(lim[0]) for other in expr.limits for b in other[1:])}
    if isinstance(expr, sp.Sum) and isinstance(body, sp.Add) and not bounding:
        reading = sp.Add(*[t for t in body.args if any(t.has(lim[0]) for lim in expr.limits)])
        if reading != body:  # Sum(x[i, k] + b[i], k) is Sum(x[i, k], k) + N*b[i]
            count = sp.Mul(*[lim[2] - lim[1] + 1 for lim in expr.limits])
            return _counted(expr.func(reading, *expr.limits)) + count * (body - reading)
    kept, count = [], sp.Integer(1)
    for lim in expr.limits:
        if body.has(lim[0]) or lim[0] in bounding:
            kept.append(lim)
        else:
            count *= lim[2] - lim[1] + 1
    if len(kept) == len(expr.limits):
        return expr.func(body, *expr.limits)
    inner = expr.func(body, *kept) if kept else body
    if isinstance(expr, sp.Sum):
        return count * inner
    if isinstance(expr, sp.Product):
        return inner ** count
    return inner


def _unshadowed(expr, bound: set):
    """`expr` with every reduction binding indices that no enclosing reduction binds and that
    are not free around it: a letter bound again inside is another index (`l`, then `l_1`)."""
    if isinstance(expr, REDUCTIONS):
        renames = {}
        for lim in expr.limits:
            if lim[0] in bound:
                renames[lim[0]] = next(
                    s for n in itertools.count(1)
                    if (s := sp.Symbol(f"{lim[0]}_{n}", integer=True)) not in bound and not expr.has(s)
                )
        expr = expr.xreplace(renames) if renames else expr
        inner = bound | {lim[0] for lim in expr.limits}
        return expr.func(_unshadowed(expr.function, inner), *expr.limits)
    if not expr.args or isinstance(expr, sp.Indexed):
        return expr
    return expr.func(*[_unshadowed(a, bound) for a in expr.args])


# --- terms that vanish by a stage's definition -------------------------------------------------


def without_vanishing_terms(value: TensorValue, stages: tuple[Output, ...]) -> TensorValue:
    """`value` without the terms that are identically zero once each sum a stage is defined
    as reads that stage: a layer norm's `sum_k (x[k] - sum1 / N)`, its mean's gradient through
    the variance, is `sum1 - sum1`. Reverse mode over stages treats a stage as a variable of
    its own, so it cannot see that; a hand-written gradient leaves such a term out."""
    terms = tuple(t for t in value.terms if not _vanishes(t, stages))
    return dataclasses.replace(value, terms=terms) if len(terms) < len(value.terms) else value


def _vanishes(term: Term, stages: tuple[Output, ...]) -> bool:
    """`term` sums to zero: each monomial of its factor summed in closed form (over the summed
    indices it does not read: times their counts; over those it reads: the stage defined as
    their sum, up to a factor free of them, as batch norm's mean is over b, h and w)."""
    summed = {index for index, _, _ in term.sums}
    if not term.sums or any(sp.Tuple(low, high).has(*summed) for _, low, high in term.sums):
        return False  # a range bounded by another summed index: no count in closed form
    total = sp.S.Zero
    for monomial in sp.Add.make_args(sp.expand(term.factor)):
        read = [s for s in term.sums if monomial.has(s[0])]
        count = sp.Mul(*(high - low + 1 for index, low, high in term.sums if (index, low, high) not in read))
        if not read:
            total += monomial * count
            continue
        coefficient, summand = monomial.as_independent(*(s[0] for s in read), as_Add=False)
        entry = _stage_summing(summand, read, stages, term.factor)
        if entry is None:
            return False
        total += coefficient * count * entry
    return sp.expand(total) == 0


def _stage_summing(read: sp.Expr, limits: list, stages: tuple[Output, ...], factor: sp.Expr) -> sp.Expr | None:
    """`Sum(read, *limits)` as an entry of the stage defined as that sum (up to its indices'
    names and their order, times a factor free of them), as `factor` reads it; else None."""
    for stage in stages:
        defined = _scaled_sum(stage.expr)
        if defined is None or len(defined[1]) != len(limits):
            continue
        function, bounds, scale = defined
        wilds = {i: sp.Wild(f"w_{n}") for n, i in enumerate(stage.indices)}
        for order in itertools.permutations(bounds):
            if [tuple(b[1:]) for b in order] != [tuple(lim[1:]) for lim in limits]:
                continue
            renamed = read.xreplace({lim[0]: b[0] for lim, b in zip(limits, order)})
            found = renamed.match(function.xreplace(wilds))
            if found is None or not all(w in found for w in wilds.values()):
                continue
            if not stage.indices:
                return scalar_entry(stage.name) / scale
            at = tuple(found[w] for w in wilds.values())
            entry = next((e for e in factor.atoms(sp.Indexed) if str(e.base.label) == stage.name and e.indices == at), None)
            return None if entry is None else entry / scale
    return None


def _scaled_sum(expr: sp.Expr) -> tuple | None:
    """(summand, limits, scale) where `expr` is `scale * Sum(summand, *limits)` (nested sums
    as one), the scale free of the summed indices; else None."""
    scale, sums = sp.S.One, expr
    if isinstance(expr, sp.Mul):
        found = [a for a in expr.args if isinstance(a, sp.Sum)]
        if len(found) != 1:
            return None
        sums = found[0]
        scale = expr / sums
    if not isinstance(sums, sp.Sum):
        return None
    limits = []
    while isinstance(sums, sp.Sum):
        limits += list(sums.limits)
        sums = sums.function
    if scale.has(*(lim[0] for lim in limits)):
        return None
    return sums, limits, scale

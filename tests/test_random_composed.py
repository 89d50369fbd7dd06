"""Random composed index-summation ops, every derived gradient checked.

A seeded generator writes op declarations as a user would (README "Declaring an op",
`ops/composed.py`): contractions (`Sum_k a[i, k] * b[k, j]`), reductions and means over an
axis, elementwise functions of bounded growth, softmaxes (`exp(s_ij) / Sum_l exp(s_il)`, also
with the row maximum subtracted under `stop_gradient`), a mean subtracted inside a variance
sum, layer-norm-like normalisations, log-sum-exps, products of two sums, explicit `stage()`s,
an optional leading `...` batch, and bound letters reused: in sibling sums, and shadowed
by an inner sum as in LayerNorm.

Every expression the generator builds has at most two named axes (plus the batch), and none
is an elementwise function of entries whose index sets are not those of one tensor entry or
one reduction result (no `Sum_k exp(x[i, k] + y[k, j])`): each gradient is O(size of the
inputs and outputs), so a `LoweringError` about an oversized intermediate is an engine error
here. The property: `generate` (which derives, refuses Jacobian-sized intermediates and
verifies each gradient against central differences, numpy and TensorFlow) returns without
raising, and, checked here independently of symgrad's checker, the generated numpy gradient
satisfies the vector-Jacobian product identity `sum(grad_x * v) == d/dh L(x + h v)` with
`L = sum(upstream * forward)`, at other sizes and batch shapes than symgrad's own case.

Many ops share one op file, so that each `generate` call (which imports the generated
TensorFlow module) is amortised over a batch of ops.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import random
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from symgrad.generate import SymgradErrors, generate

SEED = 20240611
FILES = 5  # op files, one `generate` call each
OPS_PER_FILE = 44  # ops per file: FILES * OPS_PER_FILE random examples in all

DIMS = ("M", "N", "K", "L")
LETTERS = ("i", "j", "k", "l", "m", "n", "p", "q", "r", "u")


class Reject(Exception):
    """The random draw broke a constraint of the generator: draw another op."""


# --- the expression tree ----------------------------------------------------------------------


@dataclass
class TensorIn:
    name: str
    dims: tuple[str, ...]
    batched: bool = False

    @property
    def rank(self) -> int:
        return len(self.dims) + self.batched


class Node:
    axes: tuple[str, ...]  # the dims of its free slots, in order

    def children(self) -> list["Node"]:
        return []

    def tensors(self) -> set[str]:
        return set().union(*(c.tensors() for c in self.children())) if self.children() else set()

    def batched(self, op: "RandomOp") -> bool:
        return any(op.tensor(name).batched for name in self.tensors())

    def walk(self):
        yield self
        for child in self.children():
            yield from child.walk()


@dataclass
class Entry(Node):
    tensor: str
    axes: tuple[str, ...]
    order: tuple[int, ...]  # order[t]: the node slot tensor axis t reads

    def tensors(self):
        return {self.tensor}

    def render(self, ctx, letters):
        subs = [letters[slot] for slot in self.order]
        if ctx.op.tensor(self.tensor).batched:
            subs = ["..."] + subs
        return f"{self.tensor}[{', '.join(subs)}]"


UNARY = {
    "tanh": "sp.tanh({})",
    "sin": "sp.sin({})",
    "exp_tanh": "sp.exp(sp.tanh({}))",
    "exp_gauss": "sp.exp(-({}) ** 2)",
    "square": "({}) ** 2",
    "softsqrt": "sp.sqrt(({}) ** 2 + 1)",
    "logsq": "sp.log(({}) ** 2 + 1)",
    "cos": "sp.cos({})",
}


@dataclass
class Unary(Node):
    fn: str
    child: Node

    @property
    def axes(self):
        return self.child.axes

    def children(self):
        return [self.child]

    def render(self, ctx, letters):
        return UNARY[self.fn].format(self.child.render(ctx, letters))


@dataclass
class Binary(Node):
    """`a + c*b`, `a * b`, or `a / (1 + b**2)`; b's slots a subset of a's (a broadcast)."""

    kind: str
    a: Node
    b: Node
    b_slots: tuple[int, ...]  # the slots of self (= a's) that b's slots are
    coef: str = "1"

    @property
    def axes(self):
        return self.a.axes

    def children(self):
        return [self.a, self.b]

    def render(self, ctx, letters):
        a = self.a.render(ctx, letters)
        b = self.b.render(ctx, tuple(letters[s] for s in self.b_slots))
        if self.kind == "add":
            return f"{a} + {self.coef} * {b}" if self.coef != "1" else f"{a} + {b}"
        if self.kind == "sub":
            return f"{a} - {b}"
        if self.kind == "mul":
            return f"({a}) * ({b})"
        if self.kind == "div":
            return f"({a}) / (1 + ({b}) ** 2)"
        raise AssertionError(self.kind)


@dataclass
class Reduce(Node):
    """Sum, mean, maximum, variance or log-sum-exp of `child` over its slot `slot`."""

    kind: str
    child: Node
    slot: int

    @property
    def axes(self):
        return self.child.axes[: self.slot] + self.child.axes[self.slot + 1 :]

    def children(self):
        return [self.child]

    def render(self, ctx, letters):
        dim = self.child.axes[self.slot]
        k = ctx.bound(dim, letters)
        inner = lambda letter: self.child.render(ctx, letters[: self.slot] + (letter,) + letters[self.slot :])
        limits = f"({k}, 0, {dim} - 1)"
        if self.kind == "sum":
            return f"sp.Sum({inner(k)}, {limits})"
        if self.kind == "mean":
            return f"sp.Sum({inner(k)}, {limits}) / {dim}"
        if self.kind == "max":
            return f"maximum({inner(k)}, {limits})"
        if self.kind == "norm":
            return f"sp.sqrt(sp.Sum(({inner(k)}) ** 2, {limits}) + 1)"
        if self.kind == "variance":  # the mean's letter: shadowing k (as LayerNorm) or another
            l = ctx.bound(dim, letters + ((k,) if ctx.rng.random() < 0.5 else ()))
            mean = f"sp.Sum({inner(l)}, ({l}, 0, {dim} - 1)) / {dim}"
            return f"sp.Sum(({inner(k)} - {mean}) ** 2, {limits}) / {dim}"
        if self.kind == "logsumexp":
            if ctx.rng.random() < 0.5:
                return f"sp.log(sp.Sum(sp.exp({inner(k)}), {limits}))"
            l = ctx.bound(dim, letters)
            top = f"stop_gradient(maximum({inner(l)}, ({l}, 0, {dim} - 1)))"
            return f"{top} + sp.log(sp.Sum(sp.exp({inner(k)} - {top}), {limits}))"
        raise AssertionError(self.kind)


@dataclass
class Contract(Node):
    """`Sum_k a * b` (a matrix product, a row-wise dot, ...), both factors indexed by k."""

    a: Node
    b: Node
    a_slots: tuple  # for each slot of a: a slot of self, or None for the summed one
    b_slots: tuple
    axes: tuple[str, ...]
    dim: str
    scale: bool = False

    def children(self):
        return [self.a, self.b]

    def render(self, ctx, letters):
        k = ctx.bound(self.dim, letters)
        pick = lambda slots: tuple(k if s is None else letters[s] for s in slots)
        body = f"sp.Sum(({self.a.render(ctx, pick(self.a_slots))}) * ({self.b.render(ctx, pick(self.b_slots))}), ({k}, 0, {self.dim} - 1))"
        return f"{body} / sp.sqrt({self.dim})" if self.scale else body


@dataclass
class AlongSlot(Node):
    """Softmax, centring or normalisation of `child` along its slot `slot` (same axes)."""

    kind: str
    child: Node
    slot: int

    @property
    def axes(self):
        return self.child.axes

    def children(self):
        return [self.child]

    def render(self, ctx, letters):
        dim = self.axes[self.slot]
        avoid = letters if ctx.rng.random() < 0.85 else letters[: self.slot] + letters[self.slot + 1 :]
        at = lambda letter: letters[: self.slot] + (letter,) + letters[self.slot + 1 :]
        here = self.child.render(ctx, letters)
        l = ctx.bound(dim, avoid)
        if self.kind == "softmax":
            return f"sp.exp({here}) / sp.Sum(sp.exp({self.child.render(ctx, at(l))}), ({l}, 0, {dim} - 1))"
        if self.kind == "stable_softmax":
            m = ctx.bound(dim, avoid)
            top = f"stop_gradient(maximum({self.child.render(ctx, at(m))}, ({m}, 0, {dim} - 1)))"
            return (f"sp.exp({here} - {top}) / "
                    f"sp.Sum(sp.exp({self.child.render(ctx, at(l))} - {top}), ({l}, 0, {dim} - 1))")
        if self.kind == "center":
            return f"{here} - sp.Sum({self.child.render(ctx, at(l))}, ({l}, 0, {dim} - 1)) / {dim}"
        if self.kind == "normalize":
            mean = lambda: f"sp.Sum({self.child.render(ctx, at(l))}, ({l}, 0, {dim} - 1)) / {dim}"
            v = ctx.bound(dim, avoid)
            var = f"sp.Sum(({self.child.render(ctx, at(v))} - {mean()}) ** 2, ({v}, 0, {dim} - 1)) / {dim}"
            return f"({here} - {mean()}) / sp.sqrt({var} + 1)"
        raise AssertionError(self.kind)


@dataclass
class Stage(Node):
    """An intermediate named with `stage()`, declared once and read through its name."""

    name: str
    child: Node

    @property
    def axes(self):
        return self.child.axes

    def children(self):
        return [self.child]

    def render(self, ctx, letters):
        if self.name not in ctx.declared:
            own: tuple[str, ...] = ()
            for dim in self.axes:
                own += (ctx.bound(dim, own),)
            body = self.child.render(ctx, own)
            items = ["..."] if self.batched(ctx.op) else []
            for letter, dim in zip(own, self.axes):
                items.append(f"({letter}, {dim})" if ctx.rng.random() < 0.5 else letter)
            ctx.lines.append(f'    {self.name} = stage("{self.name}", ({", ".join(items)}{"," if len(items) == 1 else ""}), {body})')
            ctx.declared.add(self.name)
        subs = (["..."] if self.batched(ctx.op) else []) + list(letters)
        return f"{self.name}[{', '.join(subs)}]"


# --- drawing an op ----------------------------------------------------------------------------


class RandomOp:
    """One random op: its tensors, output trees, and the declaration text."""

    def __init__(self, number: int, seed: int):
        self.number = number
        self.name = f"RandomOp{number}"
        self.func = f"random_op{number}"
        self.rng = random.Random(seed)
        self.tensors_: list[TensorIn] = []
        self.stages = 0
        self.batched_op = self.rng.random() < 0.35
        self.outputs: list[tuple[str, Node]] = []
        for out in ("out", "aux")[: 1 + (self.rng.random() < 0.12)]:
            n_axes = self.rng.choices((0, 1, 2), (1, 3, 5))[0]
            axes = self._some_dims(n_axes)
            self.outputs.append((out, self.draw(axes, self.rng.choice((2, 3, 3, 4)))))
        if self.batched_op:
            self.tensors_[0].batched = True
            for t in self.tensors_[1:]:
                t.batched = self.rng.random() < 0.5
        self._check_ranks()
        self.text = self._render()

    def tensor(self, name: str) -> TensorIn:
        return next(t for t in self.tensors_ if t.name == name)

    def _some_dims(self, n: int) -> tuple[str, ...]:
        dims = self.rng.sample(DIMS, n)
        if n == 2 and self.rng.random() < 0.1:
            dims = [dims[0], dims[0]]
        return tuple(dims)

    # the grammar: a node with exactly the slots `axes`
    def draw(self, axes: tuple[str, ...], depth: int) -> Node:
        if len(axes) > 2:
            raise AssertionError(axes)
        rng = self.rng
        kinds = {"entry": 3 if depth <= 0 else 1}
        if depth > 0:
            kinds.update(unary=3, add=2, mul=1.5, div=0.7, stage=0.6)
            if len(axes) <= 1:
                kinds.update(reduce=2.5, variance=0.8, logsumexp=0.8, norm=0.5, max=0.3)
            kinds.update(contract=3.5)
            if axes:
                kinds.update(softmax=0.8, stable_softmax=0.6, center=0.6, normalize=0.5)
        if not axes:
            kinds.pop("entry")
            if depth <= 0:
                kinds = {"reduce": 1, "contract": 1}
        kind = rng.choices(list(kinds), list(kinds.values()))[0]
        sub = depth - 1
        if kind == "entry":
            return self._entry(axes)
        if kind == "unary":
            return Unary(rng.choice(list(UNARY)), self.draw(axes, sub))
        if kind in ("add", "mul", "div"):
            a = self.draw(axes, sub)
            slots = tuple(s for s in range(len(axes)) if rng.random() < 0.6) if axes else ()
            if kind == "add" and rng.random() < 0.5:
                slots = tuple(range(len(axes)))
            slots = tuple(rng.sample(slots, len(slots)))  # b may read them in another order
            b = self.draw(tuple(axes[s] for s in slots), sub if slots else max(sub, 1))
            if slots == tuple(range(len(axes))) and rng.random() < 0.5:
                a, b = b, a  # both over every slot, in order
            if kind == "add" and rng.random() < 0.4:
                kind = "sub"
            return Binary(kind, a, b, slots, rng.choice(("1", "1", "2", "-3", "sp.Rational(1, 2)")))
        if kind == "stage":
            self.stages += 1
            return Stage(f"h{self.number}_{self.stages}", self.draw(axes, sub))
        if kind in ("reduce", "variance", "logsumexp", "norm", "max"):
            dim = rng.choice(DIMS)
            slot = rng.randint(0, len(axes))
            child = self.draw(axes[:slot] + (dim,) + axes[slot:], sub)
            if kind == "reduce":
                kind = rng.choice(("sum", "sum", "mean"))
            return Reduce(kind, child, slot)
        if kind == "contract":
            return self._contract(axes, sub)
        if kind in ("softmax", "stable_softmax", "center", "normalize"):
            return AlongSlot(kind, self.draw(axes, sub), rng.randrange(len(axes)))
        raise AssertionError(kind)

    def _entry(self, axes):
        if not axes:
            raise AssertionError("no scalar tensors")
        rng = self.rng
        reuse = [t for t in self.tensors_ if sorted(t.dims) == sorted(axes)]
        if reuse and rng.random() < 0.5:
            t = rng.choice(reuse)
        else:
            dims = tuple(rng.sample(axes, len(axes))) if rng.random() < 0.3 else axes
            t = TensorIn(f"x{len(self.tensors_)}", dims)
            self.tensors_.append(t)
        # which slot each tensor axis reads (a transposed read when the orders differ)
        free = list(range(len(axes)))
        order = []
        for d in t.dims:
            choices = [s for s in free if axes[s] == d]
            order.append(choices[0] if rng.random() < 0.8 else rng.choice(choices))
            free.remove(order[-1])
        return Entry(t.name, axes, tuple(order))

    def _contract(self, axes, depth):
        rng = self.rng
        dim = rng.choice(DIMS)
        # each output slot goes to a's factor, b's, or both; each factor has at most 2 slots
        while True:
            owner = [rng.choice(("a", "b", "ab") if len(axes) < 2 else ("a", "b")) for _ in axes]
            a_out = [s for s, o in enumerate(owner) if "a" in o]
            b_out = [s for s, o in enumerate(owner) if "b" in o]
            if len(a_out) <= 1 and len(b_out) <= 1:
                break

        def factor(out_slots):
            slots = list(out_slots) + [None]
            rng.shuffle(slots)
            node_axes = tuple(dim if s is None else axes[s] for s in slots)
            return self.draw(node_axes, depth), tuple(slots)

        (a, a_slots), (b, b_slots) = factor(a_out), factor(b_out)
        return Contract(a, b, a_slots, b_slots, axes, dim, scale=rng.random() < 0.2)

    def _check_ranks(self):
        """No node may need more axes than the op's largest input, output or stage."""
        bound = max([t.rank for t in self.tensors_]
                    + [len(n.axes) + n.batched(self) for _, n in self.outputs]
                    + [len(n.axes) + n.batched(self) for _, root in self.outputs for n in root.walk() if isinstance(n, Stage)])
        for _, root in self.outputs:
            for n in root.walk():
                if len(n.axes) + n.batched(self) > bound:
                    raise Reject("a node larger than the op")
            if self.batched_op and not root.batched(self):
                raise Reject("a batched op with an output reading no batched tensor")
        if len(self.tensors_) > 8:
            raise Reject("too many inputs")

    def _render(self) -> str:
        ctx = RenderContext(self)
        returns = []
        for out, root in self.outputs:
            own: tuple[str, ...] = ()
            for dim in root.axes:
                own += (ctx.bound(dim, own),)
            body = root.render(ctx, own)
            items = (["..."] if root.batched(self) else []) + list(own)
            returns.append(f'"{out}": (({", ".join(items)}{"," if len(items) == 1 else ""}), {body})')
        head = [f'@op("{self.name}")', f"def {self.func}():"]
        for t in self.tensors_:
            shape = (["..."] if t.batched else []) + list(t.dims)
            head.append(f'    {t.name} = tensor("{t.name}", ({", ".join(shape)}{"," if len(shape) == 1 else ""}))')
        return "\n".join(head + ctx.lines + [f"    return {{{', '.join(returns)}}}", ""])


class RenderContext:
    def __init__(self, op: RandomOp):
        self.op = op
        self.rng = op.rng
        self.letter_dim: dict[str, str] = {}
        self.lines: list[str] = []
        self.declared: set[str] = set()

    def bound(self, dim: str, avoid) -> str:
        """A letter over `dim` that is none of `avoid`: often one already used (a letter
        reused by sibling sums, or shadowing an enclosing sum's), else a fresh one."""
        same = [l for l, d in self.letter_dim.items() if d == dim and l not in avoid]
        fresh = [l for l in LETTERS if l not in self.letter_dim]
        if same and (not fresh or self.rng.random() < 0.6):
            return self.rng.choice(same)
        if not fresh:
            raise Reject("out of index letters")
        self.letter_dim[fresh[0]] = dim
        return fresh[0]


def draw_op(number: int, seed: int) -> RandomOp:
    for attempt in range(200):
        try:
            return RandomOp(number, seed * 1000 + attempt)
        except (Reject, RecursionError):
            continue
    raise AssertionError(f"no op drawn for seed {seed}")


HEADER = """import sympy as sp
from symgrad import dims, indices, maximum, op, stage, stop_gradient, tensor

M, N, K, L = dims("M N K L")
{letters} = indices("{spaced}")

""".format(letters=", ".join(LETTERS), spaced=" ".join(LETTERS))


def op_file_text(ops: list[RandomOp]) -> str:
    return HEADER + "\n\n".join(op.text for op in ops)


# --- the independent check --------------------------------------------------------------------


def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def vjp_mismatches(module, op: RandomOp, rng: np.random.Generator) -> list[str]:
    """Problems found checking `op`'s numpy gradient against central differences of its
    numpy forward, on two random cases (dims of sizes 2-4, several batch shapes)."""
    forward = getattr(module, op.func, None)
    backward = getattr(module, op.func + "_grad", None)
    if forward is None or backward is None:
        return [f"no functions {op.func} and {op.func}_grad in the generated numpy module"]
    names = [t.name for t in op.tensors_]
    params = list(inspect.signature(backward).parameters.values())
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    upstream_names = positional[: len(positional) - len(names)]
    if positional[len(upstream_names):] != names or len(upstream_names) != len(op.outputs):
        return [f"unexpected gradient signature {inspect.signature(backward)} for inputs {names}"]
    problems = []
    for case in range(2):
        sizes = {d: int(rng.integers(2, 5)) for d in DIMS}
        batch = [(), (2,), (3, 2)][case + int(rng.integers(0, 2))] if op.batched_op else ()
        xs = [rng.normal(size=batch * t.batched + tuple(sizes[d] for d in t.dims)) * 0.7 for t in op.tensors_]
        ys = forward(*xs)
        ys = list(ys) if len(op.outputs) > 1 else [ys]
        if not all(np.all(np.isfinite(y)) for y in ys):
            problems.append(f"case {case} (sizes {sizes}, batch {batch}): the forward is not finite")
            continue
        for (out, root), y in zip(op.outputs, ys):
            want = batch * root.batched(op) + tuple(sizes[d] for d in root.axes)
            if np.shape(y) != want:
                problems.append(f"case {case}: output {out} has shape {np.shape(y)}, expected {want}")
        if problems:
            continue
        gs = [rng.normal(size=np.shape(y)) for y in ys]
        grads = backward(*gs, *xs)
        if not isinstance(grads, tuple) or len(grads) != len(xs):
            problems.append(f"case {case}: the gradient returned {type(grads).__name__}, not {len(xs)} arrays")
            continue

        def loss(values):
            outs = forward(*values)
            outs = list(outs) if len(op.outputs) > 1 else [outs]
            return sum(float(np.sum(g * o)) for g, o in zip(gs, outs))

        for n, (x, g) in enumerate(zip(xs, grads)):
            g = np.zeros_like(x) if g is None else np.asarray(g)
            if g.shape != x.shape:
                problems.append(f"case {case}: gradient of {names[n]} has shape {g.shape}, expected {x.shape}")
                continue
            v = rng.normal(size=x.shape)
            h = 1e-5
            at = lambda step: loss(xs[:n] + [x + step * v] + xs[n + 1:])
            numeric = (at(h) - at(-h)) / (2 * h)
            # Richardson: the h^2 error term removed
            numeric = (4 * (at(h / 2) - at(-h / 2)) / h - numeric) / 3
            analytic = float(np.sum(g * v))
            scale = float(np.sum(np.abs(g * v))) + 1e-3
            if not abs(analytic - numeric) <= 1e-5 * max(abs(analytic), abs(numeric)) + 1e-7 * scale:
                problems.append(
                    f"case {case} (sizes {sizes}, batch {batch}): d/d{names[n]} along a random "
                    f"direction: gradient gives {analytic!r}, central differences {numeric!r}"
                )
    return problems


def batch_ops(file_index: int) -> list[RandomOp]:
    first = file_index * OPS_PER_FILE
    return [draw_op(first + n, SEED + first + n) for n in range(OPS_PER_FILE)]


def failed_ops(error: SymgradErrors, ops: list[RandomOp]) -> dict[str, list[str]]:
    by_name = {op.name: op for op in ops}
    found: dict[str, list[str]] = {}
    for e in error.errors:
        found.setdefault(e.op if e.op in by_name else None, []).append(str(e))
    return found


def run_file(folder: Path, stem: str, ops: list[RandomOp]):
    """generate() on one op file of `ops`: (modules by target, errors by op name)."""
    path = folder / f"{stem}.py"
    path.write_text(op_file_text(ops))
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        files = generate([path], ("numpy", "tensorflow"))
        return files, {}
    except SymgradErrors as exc:
        return None, failed_ops(exc, ops)
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("file_index", range(FILES))
def test_random_composed_ops(file_index, tmp_path):
    ops = batch_ops(file_index)
    by_name = {op.name: op for op in ops}
    stem = f"random_composed_{file_index}"
    files, errors = run_file(tmp_path, stem, ops)
    report = []
    if errors:  # name each failing op, then check the others without them
        for name, messages in errors.items():
            text = by_name[name].text if name else op_file_text(ops)
            report.append(f"generate() failed for {name or 'the op file'}:\n" + "\n".join(messages) + "\n\n" + HEADER + text)
        rest = [op for op in ops if op.name not in errors]
        files, more = run_file(tmp_path, stem + "_rest", rest) if None not in errors and rest else (None, {})
        for name, messages in more.items():
            report.append(f"generate() failed for {name} (after the first failures were removed):\n" + "\n".join(messages))
        ops = rest if files else []
        stem += "_rest"
    if files:
        for name, text in files.items():
            (tmp_path / name).write_text(text)
        module = _import(tmp_path / f"{stem}_numpy.py", f"_random_composed_{stem}_{time.monotonic_ns()}")
        rng = np.random.default_rng(SEED + file_index)
        for op in ops:
            problems = vjp_mismatches(module, op, rng)
            if problems:
                report.append(f"{op.name}: the generated numpy gradient disagrees with central differences:\n"
                              + "\n".join(problems) + "\n\n" + HEADER + op.text)
    assert not report, "\n\n".join(report)

"""Array values: elementwise expressions, products, reductions, scans, reshapes."""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

@dataclass(frozen=True)
class Elementwise:
    """A broadcasting scalar expression over variables."""

    expr: sp.Expr  # symbols name variables or numeric attributes

    def __str__(self) -> str:
        return str(self.expr)


@dataclass(frozen=True)
class Softmax:
    """A softmax (or log-softmax) of `x` along `axis`, its row maximum subtracted: one kernel
    where a framework has it (`torch.softmax`). Softmax: `exp(x - max) / sum(exp(x - max))`;
    log-softmax: `x - max - log(sum(exp(x - max)))`. Masked: `exp(x - max) * mask` over the
    row sum of that (a causal attention's weights)."""

    x: str
    axis: int  # negative: counted from the last
    log: bool = False
    mask: str | None = None  # a bool variable: a softmax over the entries where it holds, 0 elsewhere

    def __str__(self) -> str:
        masked = f", mask={self.mask}" if self.mask else ""
        return f"{'log_' if self.log else ''}softmax({self.x}, axis={self.axis}{masked})"


@dataclass(frozen=True)
class SoftmaxBackward:
    """The gradient of a softmax (or log-softmax) along `axis`, given its output: one kernel
    where a framework has it (PyTorch's `_softmax_backward_data`). Softmax:
    `output * (grad - sum(grad * output, axis))`; log-softmax: `grad - exp(output) * sum(grad, axis)`."""

    grad: str  # the upstream gradient
    output: str  # the softmax's (log-softmax's) output
    axis: int  # negative: counted from the last
    log: bool = False  # of a log-softmax

    def __str__(self) -> str:
        return f"{'log_' if self.log else ''}softmax_backward({self.grad}, {self.output}, axis={self.axis})"


@dataclass(frozen=True)
class FusedCall:
    """`value` computed by one fused kernel where a backend has it, else evaluated as written."""

    kernel: str  # the kernel's op type, e.g. "SigmoidGrad" (a `symgrad.fused.KERNELS` entry)
    operands: tuple[tuple[str, Elementwise], ...]  # (kernel parameter, operand), in order
    value: Elementwise  # what the kernel computes, as the plain expression

    def __str__(self) -> str:
        operands = ", ".join(f"{name}={operand}" for name, operand in self.operands)
        return f"{self.kernel}({operands})"


@dataclass(frozen=True)
class Conj:
    """Complex conjugate (a no-op on real dtypes)."""

    x: str  # variable

    def __str__(self) -> str:
        return f"conj({self.x})"


@dataclass(frozen=True)
class MatMul:
    """`op(a) @ op(b)` where op transposes the last two axes when its flag is set."""

    a: str  # left operand
    b: str  # right operand
    transpose_a: bool  # use a's transpose
    transpose_b: bool  # use b's transpose
    batched: bool = False  # leading batch axes, broadcast between the operands

    def __str__(self) -> str:
        return f"{self.a}{'ᵀ' if self.transpose_a else ''} @ {self.b}{'ᵀ' if self.transpose_b else ''}"


@dataclass(frozen=True)
class Einsum:
    """`einsum(spec, *operands)`; used only where no plainer operation fits."""

    spec: str  # e.g. "ij,jk->ik"
    operands: tuple[str, ...]  # variables

    def __str__(self) -> str:
        return f"einsum({self.spec!r}, {', '.join(self.operands)})"


@dataclass(frozen=True)
class Reduce:
    """Reduce over `axes` (negative: counted from the last, so leading batch axes may vary)."""

    kind: str  # "sum", "prod", "max", "min", or "argmax", "argmin" (one axis, no keepdims)
    x: str | Elementwise  # variable, or an elementwise expression reduced without a temporary
    axes: tuple[int, ...]  # axes reduced away; () for every axis
    keepdims: bool = False  # keep them as size-1 axes, aligned for broadcasting
    batch_before: int | None = None  # also reduce every axis before the last `batch_before`
    # (the leading batch axes, of any number); `x` is then a variable

    def __str__(self) -> str:
        batch = f", leading axes before the last {self.batch_before}" if self.batch_before is not None else ""
        return f"reduce_{self.kind}({self.x}, axes={self.axes}{', keepdims' if self.keepdims else ''}{batch})"


@dataclass(frozen=True)
class Flip:
    """`x` read backwards along `axis` (negative): a whole axis read at `size - 1 - i`, as
    rotate-half reads its two halves; a view or one copy, where a gather reads positions."""

    x: str
    axis: int

    def __str__(self) -> str:
        return f"flip({self.x}, axis={self.axis})"


@dataclass(frozen=True)
class Expand:
    """Insert size-1 axes: `x[..., None, :]` has `subscript` ("None", ":") after the ellipsis."""

    x: str  # variable
    subscript: tuple[str, ...]  # trailing entries, each ":" (kept axis) or "None" (new axis)

    def __str__(self) -> str:
        return f"{self.x}[..., {', '.join(self.subscript)}]"


@dataclass(frozen=True)
class Stack:
    """Arrays of one shape joined along a new axis (an unstack's gradient, a stack)."""

    values: tuple[str, ...]  # variables, in order along the new axis
    axis: int  # where the new axis goes, negative: counted from the last

    def __str__(self) -> str:
        return f"stack([{', '.join(self.values)}], {self.axis})"


@dataclass(frozen=True)
class Squeeze:
    """Remove size-1 axes (a kept reduction axis) before aligning by index."""

    x: str  # variable
    axes: tuple[int, ...]  # negative: counted from the last

    def __str__(self) -> str:
        return f"squeeze({self.x}, {self.axes})"


@dataclass(frozen=True)
class Eye:
    """The identity matrix whose size is axis `axis` of `x`, in `x`'s dtype (a Kronecker delta)."""

    x: str  # variable
    axis: int  # negative: counted from the last

    def __str__(self) -> str:
        return f"eye(shape({self.x})[{self.axis}])"


@dataclass(frozen=True)
class DiagPart:
    """The diagonal of the last two axes, as the last axis (`x[..., i, i]`)."""

    x: str  # variable

    def __str__(self) -> str:
        return f"diag_part({self.x})"


@dataclass(frozen=True)
class Iota:
    """0, 1, ..., n - 1 as integers, n the size of axis `axis` of `x`: an index as a value."""

    x: str  # variable
    axis: int  # negative: counted from the last

    def __str__(self) -> str:
        return f"arange(shape({self.x})[{self.axis}])"


@dataclass(frozen=True)
class AsValues:
    """Integer positions (an `Iota`) as numbers of the dtype of variable `like`: an index
    used as a value in arithmetic (`(2*c - 1) * x[..., c]`), never an int64 beside a float."""

    x: str  # variable of integers
    like: str  # variable whose dtype it takes

    def __str__(self) -> str:
        return f"as_values({self.x}, dtype({self.like}))"


@dataclass(frozen=True)
class Constant:
    """A small constant tensor (the Levi-Civita symbol), in the dtype of variable `like`."""

    values: tuple  # nested tuples of numbers
    like: str  # variable whose dtype it takes

    def __str__(self) -> str:
        return f"constant({self.values})"


@dataclass(frozen=True)
class BroadcastTo:
    """Broadcast a value to the shape of variable `like`."""

    value: Elementwise  # the value, broadcastable to `like`'s shape
    like: str  # variable whose shape the result takes

    def __str__(self) -> str:
        return f"broadcast_to({self.value}, shape({self.like}))"


@dataclass(frozen=True)
class BroadcastToShape:
    """Broadcast a value to the shape held in integer variable `shape` (BroadcastTo's input)."""

    value: Elementwise  # the value, broadcastable to `shape`
    shape: str  # integer variable: the sizes of the result's axes

    def __str__(self) -> str:
        return f"broadcast_to({self.value}, {self.shape})"


@dataclass(frozen=True)
class Scan:
    """Cumulative sum, product or log-sum-exp along `axis`, as `tf.math.cumsum(x, axis,
    exclusive, reverse)`; or a linear recurrence, y[m] = x[m] + by[m] * y[m - 1] (y[m + 1]
    with `reverse`), the sum over i <= m of x[i] times the product of `by` over i < k <= m."""

    kind: str  # "sum", "prod", "logsumexp" or "linear"
    x: str | Elementwise  # what is accumulated
    axis: int  # negative: counted from the last
    exclusive: bool  # leave each element out of its own result
    reverse: bool  # accumulate from the end
    by: Elementwise | None = None  # "linear": what the running value is multiplied by, per step

    def __str__(self) -> str:
        flags = f"exclusive={self.exclusive}, reverse={self.reverse}"
        by = f", by={self.by}" if self.by is not None else ""
        return f"cum{self.kind}({self.x}{by}, axis={self.axis}, {flags})"


@dataclass(frozen=True)
class Transpose:
    """Permute axes: result axis n is `x`'s axis `perm[n]`."""

    x: str  # variable
    perm: tuple[int, ...]  # the permutation

    def __str__(self) -> str:
        return f"transpose({self.x}, {self.perm})"


@dataclass(frozen=True)
class SumToShape:
    """Sum a broadcast gradient back to the shape of input `like` (numpy broadcasting rules)."""

    value: Elementwise  # the broadcast gradient
    like: str  # the input whose shape the result takes

    def __str__(self) -> str:
        return f"sum_to_shape({self.value}, shape({self.like}))"


@dataclass(frozen=True)
class ZerosLike:
    """Zeros shaped like a variable: the gradient of an input the outputs do not depend on."""

    like: str  # variable

    def __str__(self) -> str:
        return f"zeros_like({self.like})"

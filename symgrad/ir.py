"""The backend-neutral IR: straight-line array statements, grouped into functions.

Values name their operands by variable name; `Elementwise` holds a SymPy expression whose
symbols are variable names (and numeric attributes), printed by each backend's SymPy printer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

import sympy as sp


@dataclass(frozen=True)
class Elementwise:
    """A broadcasting scalar expression over variables."""

    expr: sp.Expr  # symbols name variables or numeric attributes

    def __str__(self) -> str:
        return str(self.expr)


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

    kind: str  # "sum", "prod", "max" or "min"
    x: str | Elementwise  # variable, or an elementwise expression reduced without a temporary
    axes: tuple[int, ...]  # axes reduced away; () for every axis
    keepdims: bool = False  # keep them as size-1 axes, aligned for broadcasting
    batch_before: int | None = None  # also reduce every axis before the last `batch_before`
    # (the leading batch axes, of any number); `x` is then a variable

    def __str__(self) -> str:
        batch = f", leading axes before the last {self.batch_before}" if self.batch_before is not None else ""
        return f"reduce_{self.kind}({self.x}, axes={self.axes}{', keepdims' if self.keepdims else ''}{batch})"


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
class DimSize:
    """The size of one axis of a variable, as a number of the variable's dtype."""

    x: str  # variable
    axis: int  # negative: counted from the last

    def __str__(self) -> str:
        return f"shape({self.x})[{self.axis}]"


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
class Constant:
    """A small constant tensor (the Levi-Civita symbol), in the dtype of variable `like`."""

    values: tuple  # nested tuples of numbers
    like: str  # variable whose dtype it takes

    def __str__(self) -> str:
        return f"constant({self.values})"


@dataclass(frozen=True)
class NegativeAxis:
    """An axis of `x` counted from the last: `axis - rank(x)` when `axis` is non-negative."""

    axis: str  # variable holding the axis
    x: str  # variable whose rank counts
    inserted: bool = False  # an axis of a result with one axis more than `x` (Pack's)

    def __str__(self) -> str:
        return f"negative_axis({self.axis}, rank({self.x}){' + 1' if self.inserted else ''})"


@dataclass(frozen=True)
class NegativeAxes:
    """A list of axes of `x` as a sorted tuple, each counted from the last (ReverseV2's)."""

    axes: str  # variable holding the list
    x: str  # variable whose rank counts

    def __str__(self) -> str:
        return f"sorted_negative_axes({self.axes}, rank({self.x}))"


@dataclass(frozen=True)
class AsTuple:
    """A constant list input as a tuple of ints, to compare with declared values (a perm)."""

    x: str  # variable holding the list

    def __str__(self) -> str:
        return f"tuple({self.x})"


@dataclass(frozen=True)
class IntArray:
    """A constant integer list input (nested) as an integer array, for index arithmetic."""

    x: str  # variable holding the list

    def __str__(self) -> str:
        return f"int_array({self.x})"


@dataclass(frozen=True)
class Length:
    """The number of tensors in a list input, as a Python integer (TensorFlow's `N`)."""

    x: str  # variable holding the list

    def __str__(self) -> str:
        return f"len({self.x})"


@dataclass(frozen=True)
class Rank:
    """The number of axes of a variable, or the size of its axis `axis` known when the graph is
    built, as a Python integer (dispatch on an input's rank, on an index depth)."""

    x: str  # variable
    axis: int | None = None  # None: the rank

    def __str__(self) -> str:
        return f"rank({self.x})" if self.axis is None else f"static_size({self.x}, {self.axis})"


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


@dataclass(frozen=True)
class IntSize:
    """The size of one axis of a variable, as an integer (for index arithmetic)."""

    x: str  # variable
    axis: int  # negative: counted from the last

    def __str__(self) -> str:
        return f"int_shape({self.x})[{self.axis}]"


@dataclass(frozen=True)
class IndexArith:
    """An integer expression over integer variables and attributes: positions and sizes.
    `floor(a/b)` is integer division; `exact_div(m, c)` is `m // c` where c divides m, else -1."""

    expr: sp.Expr  # symbols name integer variables or attributes

    def __str__(self) -> str:
        return f"int({self.expr})"


@dataclass(frozen=True)
class Arange:
    """0, 1, ..., n - 1 as integers, n held by an integer variable."""

    n: str  # variable

    def __str__(self) -> str:
        return f"arange({self.n})"


@dataclass(frozen=True)
class Gather:
    """`x` read along `axis` at integer `positions`, whose axes take that axis's place;
    positions outside the axis read as `fill` (padding): an affine or indirect index map."""

    x: str  # variable read
    positions: str  # integer variable
    axis: int  # negative: counted from the last
    fill: Any = 0  # what a position outside reads: 0, or -oo for a window's maximum

    def __str__(self) -> str:
        fill = f", fill={self.fill}" if self.fill != 0 else ""
        return f"gather({self.x}, {self.positions}, axis={self.axis}{fill})"


@dataclass(frozen=True)
class ScatterAdd:
    """The adjoint of `Gather`: the axes of `values` that `positions` has (those before the
    last `trailing`) are summed into `size` slots at `positions` (outside 0..size-1: dropped)."""

    values: str  # variable
    positions: str  # integer variable
    trailing: int  # how many axes of `values` follow the positions' axes
    size: str  # integer variable: how many slots

    def __str__(self) -> str:
        return f"scatter_add({self.values}, {self.positions}, trailing={self.trailing}, size={self.size})"


class axis_size(sp.Function):
    """The size of axis `axis` (negative) of variable `x`, as an integer known when the code
    is traced where the backend knows it: `axis_size(Symbol(x), axis)`."""

    is_integer = True
    is_positive = True


@dataclass(frozen=True)
class Convolution:
    """A channels-last convolution kernel (`symgrad.conv_kernels`): "conv" (input, filter),
    "conv_backprop_filter" (input, upstream) or "conv_backprop_input" (upstream, filter), and
    their "depthwise_" namesakes (channel pair `c, m` as two axes of the result, upstream)."""

    kind: str  # a `symgrad.conv_kernels.KERNELS` name
    operands: tuple[str, str]  # variables, in the kernel's order
    strides: tuple[sp.Expr, ...]  # per spatial axis: integer expressions of attributes
    dilations: tuple[sp.Expr, ...]  # likewise
    pads: tuple[sp.Expr, ...]  # padding before each spatial axis, over `axis_size`s
    sizes: tuple[sp.Expr, ...]  # the result's spatial sizes, over `axis_size`s

    def __str__(self) -> str:
        geometry = f"strides={self.strides}, dilations={self.dilations}, pads={self.pads}"
        return f"{self.kind}({', '.join(self.operands)}, {geometry}, sizes={self.sizes})"


@dataclass(frozen=True)
class MaxPoolBackprop:
    """`dx[n, *h, c]`: each window's upstream gradient `grad[n, *u, c]` added at the first
    entry (row-major) of window u of `input` equal to its maximum `output[n, *u, c]`, windows
    read at `u*s + k - p` with padding never the maximum (`symgrad.lowering.pooling`)."""

    input: str  # variables
    output: str
    grad: str
    window: tuple[sp.Expr, ...]  # per spatial axis: the window's size, an integer expression
    strides: tuple[sp.Expr, ...]  # likewise
    pads: tuple[sp.Expr, ...]  # padding before each spatial axis, over `axis_size`s
    sizes: tuple[sp.Expr, ...]  # the result's spatial sizes (the input's), over `axis_size`s

    @property
    def operands(self) -> tuple[str, str, str]:
        return self.input, self.output, self.grad

    def __str__(self) -> str:
        geometry = f"window={self.window}, strides={self.strides}, pads={self.pads}, sizes={self.sizes}"
        return f"max_pool_backprop({', '.join(self.operands)}, {geometry})"


@dataclass(frozen=True)
class MergeAxes:
    """`x` (broadcast to `sizes` first if it lacks axes) with each group of adjacent axes
    merged into one, row-major: an output axis that enumerates several indices."""

    x: str | Elementwise  # what is reshaped
    sizes: tuple[str, ...]  # integer variables: the size of each axis before merging
    groups: tuple[tuple[int, int], ...]  # (first axis, count) of each group merged
    broadcast: bool = False  # x has size-1 axes where `sizes` has others

    def __str__(self) -> str:
        return f"merge_axes({self.x}, sizes={self.sizes}, groups={self.groups})"


@dataclass(frozen=True)
class SplitAxis:
    """The adjoint layout of `MergeAxes`: axis `axis` of `x` split row-major into axes of
    sizes `outer`, one inferred from the axis's size, and `inner` (the upstream gradient of a
    merged output axis, an input axis declared as a group)."""

    x: str  # variable
    axis: int  # negative: counted from the last
    inner: tuple[str, ...]  # integer variables: the sizes of the axes after the inferred one
    outer: tuple[str, ...] = ()  # integer variables: the sizes of the axes before it

    def __str__(self) -> str:
        outer = f", outer={self.outer}" if self.outer else ""
        return f"split_axis({self.x}, axis={self.axis}, inner={self.inner}{outer})"


Value = Union[
    Elementwise, FusedCall, Conj, MatMul, Einsum, Reduce, Transpose, SumToShape, ZerosLike, Expand,
    BroadcastTo, BroadcastToShape, Scan, Squeeze, DimSize, Eye, DiagPart, NegativeAxis, Constant, Iota,
    IntSize, IndexArith, Arange, Gather, ScatterAdd, Rank, NegativeAxes, AsTuple, IntArray,
    MergeAxes, SplitAxis, Length, Stack, Convolution, MaxPoolBackprop,
]


def reads(value: Value) -> set[str]:
    """The variables whose values `value` reads (not only their shapes)."""
    if isinstance(value, (Elementwise, IndexArith)):
        return {str(s) for s in value.expr.free_symbols}
    if isinstance(value, Gather):
        return {value.x, value.positions}
    if isinstance(value, ScatterAdd):
        return {value.values, value.positions}
    if isinstance(value, (MergeAxes, SplitAxis)):
        return reads(value.x) if isinstance(value.x, Elementwise) else {value.x}
    if isinstance(value, Arange):
        return {value.n}
    if isinstance(value, (SumToShape, BroadcastTo, FusedCall)):
        return reads(value.value)
    if isinstance(value, BroadcastToShape):
        return reads(value.value) | {value.shape}
    if isinstance(value, MatMul):
        return {value.a, value.b}
    if isinstance(value, (Einsum, Convolution, MaxPoolBackprop)):
        return set(value.operands)
    if isinstance(value, Stack):
        return set(value.values)
    if isinstance(value, (ZerosLike, DimSize, Eye, Constant, Iota, IntSize, Rank, Length)):
        return set()
    if isinstance(value, NegativeAxis):
        return {value.axis}
    if isinstance(value, NegativeAxes):
        return {value.axes}
    if isinstance(value, Scan) and value.by is not None:
        return (reads(value.x) if isinstance(value.x, Elementwise) else {value.x}) | reads(value.by)
    return reads(value.x) if isinstance(value.x, Elementwise) else {value.x}


@dataclass(frozen=True)
class Assign:
    """`target = value`."""

    target: str  # variable assigned ("a, b": unpacking several)
    value: Value  # what it is given

    def __str__(self) -> str:
        return f"{self.target} = {self.value}"


@dataclass(frozen=True)
class Recompute:
    """Statements that compute forward stages a gradient reads, run when the caller did not
    pass them all (a registered gradient sees only the op's inputs and outputs)."""

    stages: tuple[str, ...]  # the stages the gradient reads: its keyword parameters
    body: tuple[Assign, ...]  # statements computing them (and the stages they read)
    conj: bool = False  # complex op: a passed stage is conjugated, as recomputed ones are

    def __str__(self) -> str:
        return f"if any of {', '.join(self.stages)} is None: {len(self.body)} statements"


def statements(body) -> list[Assign]:
    """The assignments of `body`, those inside a `Recompute` in place."""
    flat = []
    for statement in body:
        flat += list(statement.body) if isinstance(statement, Recompute) else [statement]
    return flat


@dataclass(frozen=True)
class Formula:
    """`lhs = terms[0] + terms[1] + ...`: a value a gradient computes, in index notation
    (`symgrad.notation`), for a reader to check against the code."""

    target: str  # the variable the code assigns it to, e.g. "grad_a"
    lhs: str  # e.g. "grad_a[i, k]"
    terms: tuple[str, ...]  # the right-hand side's terms, each with its sign, e.g. "-sum_j x[j]"

    @property
    def rhs(self) -> str:
        """The terms as one sum, each after its sign."""
        return self.terms[0] + "".join(f" - {t[1:]}" if t.startswith("-") else f" + {t}" for t in self.terms[1:])

    def __str__(self) -> str:
        return f"{self.lhs} = {self.rhs}"


@dataclass(frozen=True)
class Branch:
    """The statements for one combination of enumerated attribute values."""

    attr_values: tuple[tuple[str, Any], ...]  # empty when the op has no enumerated attributes
    body: tuple[Assign | Recompute, ...]  # statements, in order
    largest_rank: int = 0  # most axes of any intermediate array (`...` counting as one)
    largest_term: str = ""  # the expression that array holds, and its axes (for errors)
    rank_bound: int = 0  # most axes an intermediate may have: no Jacobian (0: not checked)
    # the statements again, each `Piecewise` guarded before subexpressions were shared, for a
    # target whose code is differentiated again (`functions.guarded`); None: `body` is that
    guarded_body: tuple[Assign | Recompute, ...] | None = None
    formulas: tuple[Formula, ...] = ()  # a gradient's values in index notation (its docstring's)


@dataclass(frozen=True)
class Function:
    """A generated function body: parameters -> results, dispatching on enumerated attributes."""

    params: tuple[str, ...]  # array parameters, in order
    prologue: tuple[Assign, ...]  # statements shared by every branch (conjugation)
    branches: tuple[Branch, ...]  # one per attribute variant
    results: tuple[str | None, ...]  # returned variables (None: no gradient)


@dataclass(frozen=True)
class LinearSecondOrder:
    """The second order of an op linear in each input of `linear_in` separately (a
    convolution: in its input and in its filter), composed of the op's own functions: w.r.t.
    the upstream gradient, sum_x op(inputs with x := v_x) (a Jacobian-vector product); w.r.t.
    input x, sum_{y != x} op_grad(grad, inputs with y := v_y)[x] (a Hessian-vector product)."""

    linear_in: tuple[str, ...]  # the inputs with a gradient, in op order

    def __str__(self) -> str:
        return f"linear in {', '.join(self.linear_in)}"


@dataclass(frozen=True)
class OpCode:
    """Everything generated for one op."""

    name: str  # op type, e.g. "MatMul"
    func_name: str  # e.g. "matmul"
    doc: str  # one-line description
    inputs: tuple[str, ...]  # input names, in op order
    outputs: tuple[str, ...]  # output names, in op order
    grads: tuple[str, ...]  # upstream gradient names, one per output
    enumerated_attrs: tuple[tuple[str, Any], ...]  # (name, default)
    numeric_attrs: tuple[tuple[str, Any], ...]  # (name, default or None when required)
    const_inputs: tuple[tuple[str, int], ...]  # enumerated attributes TensorFlow passes as
    # constant inputs: (name, position among op.inputs)
    forward: Function  # inputs -> outputs
    vjp: Function  # grads, inputs, outputs -> one gradient per input
    outputs_used: tuple[str, ...]  # outputs the gradient reads
    location: str  # "file:line" of the declaration
    variadic: bool = False  # inputs is ("*<list input>",): tensors unpacked per variant
    list_inputs: tuple[str, ...] = ()  # numeric attributes read from constant integer inputs
    list_output: bool = False  # outputs is (<list output>,), grads (grad_<it>,): sequences
    stages: tuple[str, ...] = ()  # forward stages the gradient accepts (recomputed if not given)
    complex_ok: bool = False  # complex inputs supported (the gradient in TensorFlow's convention)
    second_order: "OpCode | LinearSecondOrder | None" = None  # the gradient op's code
    # (symgrad.second_order), its forward being this op's gradient; or, for an op linear in
    # each input, composed of its own functions; None where it is neither

"""Statements and the functions made of them: what a backend prints per op."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from symgrad.ir.values import Value

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


@dataclass(frozen=True)
class Requested:
    """Statements only some gradients need, run when the caller asks for one of them: a
    gradient nobody asked for (autograd's `ctx.needs_input_grad`) costs nothing."""

    grads: tuple[int, ...]  # the positions of the gradients (one per input) that need them
    body: tuple[Assign | Recompute, ...]  # statements, in order

    def __str__(self) -> str:
        return f"if gradient {' or '.join(map(str, self.grads))} is asked for: {len(self.body)} statements"


@dataclass(frozen=True)
class Unset:
    """`a = b = None`: the gradients that `Requested` statements may leave uncomputed."""

    names: tuple[str, ...]  # variables

    def __str__(self) -> str:
        return " = ".join(self.names) + " = None"


def statements(body) -> list[Assign]:
    """The assignments of `body`, those inside a `Recompute` or `Requested` in place."""
    flat = []
    for statement in body:
        if isinstance(statement, Unset):
            continue
        flat += statements(statement.body) if isinstance(statement, (Recompute, Requested)) else [statement]
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
class DeclaredShape:
    """An input's shape as its declaration gives it, checked where the op is entered: per axis
    a dim's name (one size wherever the dim appears), a size, or None (not checked: a product
    of sizes, an attribute)."""

    x: str  # input
    sizes: tuple[str | int | None, ...]  # its axes', after any leading batch axes
    batched: bool = False  # any number of leading batch axes come first (`...`)

    def __str__(self) -> str:
        sizes = ("...",) * self.batched + tuple("?" if s is None else str(s) for s in self.sizes)
        return f"{self.x}: ({', '.join(sizes)}{',' if len(sizes) == 1 else ''})"


@dataclass(frozen=True)
class Branch:
    """The statements for one combination of enumerated attribute values."""

    attr_values: tuple[tuple[str, Any], ...]  # empty when the op has no enumerated attributes
    body: tuple[Assign | Recompute, ...]  # statements, in order
    largest_rank: int = 0  # most axes of any intermediate array (`...` counting as one)
    largest_term: str = ""  # the expression that array holds, and its axes (for errors)
    rank_bound: int = 0  # most axes an intermediate may have: no Jacobian (0: not checked)
    # the statements again, each `Piecewise` guarded before subexpressions were shared, for a
    # target whose code is differentiated again (`guards.guarded`); None: `body` is that
    guarded_body: tuple[Assign | Recompute, ...] | None = None
    formulas: tuple[Formula, ...] = ()  # a gradient's values in index notation (its docstring's)
    entry_shapes: tuple[DeclaredShape, ...] = ()  # a forward's inputs', checked before its statements


@dataclass(frozen=True)
class Function:
    """A generated function body: parameters -> results, dispatching on enumerated attributes."""

    params: tuple[str, ...]  # array parameters, in order
    prologue: tuple[Assign, ...]  # statements shared by every branch (conjugation)
    branches: tuple[Branch, ...]  # one per attribute variant
    results: tuple[str | None, ...]  # returned variables (None: no gradient)


@dataclass(frozen=True)
class Convention:
    """How an op's wrapper in one framework follows the function it stands for there (its
    `symgrad.namesakes.Namesake`, the dims it names found in the inputs' shapes)."""

    framework: str  # "torch" or "jax"
    call: str  # the call the wrapper computes, in the wrapper's argument names
    keywords: tuple[tuple[str, str], ...] = ()  # (attribute, the function's keyword for it)
    defaults: tuple[tuple[str, Any], ...] = ()  # (attribute, the function's default)
    causal_mask: str | None = None  # the additive mask input `is_causal` builds
    mask_sizes: tuple[tuple[str, int], ...] = ()  # where its rows' and columns' sizes are: (input, axis)
    scaled: str | None = None  # the input `scale=` multiplies
    factor: Any = None  # the op's own scale of its products, over `Symbol("<input>.shape[<axis>]")`
    batch_inputs: tuple[tuple[str, int], ...] = ()  # inputs leading with the batch axis: (name, declared rank)
    batch_outputs: tuple[str, ...] = ()  # outputs leading with it


@dataclass(frozen=True)
class LinearSecondOrder:
    """The second order of an op linear in each input of `linear_in` separately (a
    convolution: in its input and in its filter), composed of the op's own functions: w.r.t.
    the upstream gradient, sum_x op(inputs with x := v_x) (a Jacobian-vector product); w.r.t.
    input x, sum_{y != x} op_grad(grad, inputs with y := v_y)[x] (a Hessian-vector product)."""

    linear_in: tuple[str, ...]  # the inputs with a gradient, in op order (none: an op with no
    # gradient at all, Floor, whose second order is zero)

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
    stored_names: tuple[tuple[str, str], ...] = ()  # (name, the name op.get_attr reads) where they differ
    list_inputs: tuple[str, ...] = ()  # numeric attributes read from constant integer inputs
    list_output: bool = False  # outputs is (<list output>,), grads (grad_<it>,): sequences
    stages: tuple[str, ...] = ()  # forward stages the gradient accepts (recomputed if not given)
    complex_ok: bool = False  # complex inputs supported (the gradient in TensorFlow's convention)
    conventions: tuple[Convention, ...] = ()  # the wrappers' in the frameworks where it has a namesake
    second_order: "OpCode | LinearSecondOrder | None" = None  # the gradient op's code
    # (symgrad.second_order), its forward being this op's gradient; or, for an op linear in
    # each input, composed of its own functions; None where it is neither

"""The PyTorch target: `<stem>_torch.py`. Per op, `<op>` applies a `torch.autograd.Function`
whose backward is the derived `<op>_vjp`, differentiable again (double backward);
`<op>_forward` is the formula itself. Ops that use a function PyTorch lacks are left out of
the module, each named in it with the reason (`UNAVAILABLE`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from symgrad import ir
from symgrad.backends.conventions import wrapper_context
from symgrad.backends.torch.printer import TorchPrinter
from symgrad.backends.torch.verify import TorchGradient, TorchSecondOrder
from symgrad.errors import LoweringError
from symgrad.lowering.pointwise_kernels import with_pointwise_kernels
from symgrad.lowering.requested import reads_by_result
from symgrad.lowering.row_kernels import with_row_kernels
from symgrad.render import (
    attr_params,
    common_context,
    gradient_function,
    names_literal,
    outputs_literal,
    render_framework_module,
    signature,
    staged_forward,
    words,
)
from symgrad.verify.sources import Unavailable

RUNTIME = tuple(Path(__file__).with_name(name) for name in ("autograd.py", "runtime.py")) + (
    Path(__file__).parent.parent / "leading_axes.py",
    Path(__file__).parent.parent / "shape_checks.py",
)  # the helpers of the runtime module generated modules import
PRINTER = TorchPrinter  # prints the IR and SymPy expressions as this target's code


def render_module(source: str, ops: list[ir.OpCode]) -> str:
    return render_framework_module(source, ops, TorchPrinter, _op, "torch_module.py.j2", "torch", ("numpy", "torch"))


def derived_source(op, stand_in: bool = False):
    """The gradient autograd gives of the op's `torch.autograd.Function`, as a verification
    source (`Unavailable` for an op the module leaves out)."""
    reason = unavailable_reason(op)
    return Unavailable(reason) if reason else TorchGradient.derived(op)


def second_order_source(op):
    """The op differentiated twice by autograd through its derived backward (double backward)."""
    reason = unavailable_reason(op)
    return Unavailable(reason) if reason else TorchSecondOrder(op)


def unavailable_reason(op) -> str | None:
    """Why the derived op's PyTorch module leaves it out (`UNAVAILABLE`), None where it has it."""
    return getattr(op.module("torch"), "UNAVAILABLE", {}).get(op.name)


def _op(op: ir.OpCode, printer) -> dict:
    op = op if op.complex_ok else _with_kernels(op)
    forward = f"{op.func_name}_forward"
    shapes, by_input = shapes_only(op), reads_by_input(op)
    return {
        **common_context(op, printer),
        **gradient_function(op, printer, forward=forward),
        **staged_forward(op),
        "forward_signature": signature(op.inputs, attr_params(op)),
        "forward": forward,
        **wrapper_context(op, "torch", f"_{op.func_name}_autograd", printer),
        "autograd": f"_{op.func_name}_autograd",
        "autograd_call": _autograd_call(op, forward, shapes, by_input),
        "saved": _saved_text(op, shapes, by_input or {}),
    }


def _with_kernels(op: ir.OpCode) -> ir.OpCode:
    """A real op with PyTorch's fused kernels where its functions compute what one does (found
    by form): GELU as `F.gelu` and `gelu_backward`, softmax and log-softmax and their
    gradients as `torch.softmax` and `_softmax_backward_data` (and their log twins)."""
    op = with_pointwise_kernels(op)
    return dataclasses.replace(op, forward=with_row_kernels(op.forward, kept=op.stages), vjp=with_row_kernels(op.vjp))


def _saved_text(op: ir.OpCode, shapes: list[str], by_input: dict) -> str:
    """What the op's Function saves for its backward, in words: the values it reads (each
    read for some gradients only, saved when one of those is asked for, says which), and the
    inputs of which it keeps only the shape (`shapes_only`, `reads_by_input`)."""
    values = [x for x in op.inputs if x not in shapes] + [o for o in op.outputs if o in op.outputs_used] + list(op.stages)

    def said(value):
        readers = [x for x, read in by_input.items() if value in read]
        if len(readers) == len(by_input):
            return value
        return f"{value} (for {words(readers)}'s gradient{'s' if len(readers) > 1 else ''})"

    parts = [", ".join(map(said, values))] if values else []
    parts += [f"the shape{'s' if len(shapes) > 1 else ''} of {', '.join(shapes)}"] if shapes else []
    return " and ".join(parts) or "nothing"


def _autograd_call(op: ir.OpCode, forward: str, shapes: list[str], by_input: dict | None) -> str:
    """The runtime's `_autograd_function(...)` making the op's `torch.autograd.Function`: the
    outputs the gradient reads are saved with the stages and the inputs whose values it
    reads; of the others (`shapes_only`), their shapes (autograd refuses to save an output
    that is an input returned as it is, as Identity's is: not read, not saved)."""
    read = [o for o in op.outputs if o in op.outputs_used]
    options = [f"read={names_literal(read)}"] if read else []
    options += [f"stages={names_literal(list(op.stages))}"] if op.stages else []
    options += [f"shapes_only={names_literal(shapes)}"] if shapes else []
    if by_input:
        pairs = ", ".join(f'"{x}": {names_literal(names)}' for x, names in by_input.items())
        options.append(f"reads={{{pairs}}}")
    if op.list_output and op.stages:
        raise LoweringError(f"{op.name}: a list output with stages has no PyTorch Function")
    arguments = [f'"{op.name}"', forward, f"{op.func_name}_vjp", outputs_literal(op)] + options
    return f"_autograd_function({', '.join(arguments)})"


def shapes_only(op: ir.OpCode) -> list[str]:
    """The inputs whose values the op's gradient does not read, only their shapes (a list
    input is saved whole)."""
    if op.variadic:
        return []
    read = values_read(op.vjp)
    return [x for x in op.inputs if x not in read]


def reads_by_input(op: ir.OpCode) -> dict[str, list[str]] | None:
    """For each input with a gradient, what computing that gradient alone reads of what a
    Function can save: input values, outputs and stages (in this order); None where every
    gradient reads the same (nothing is saved for some gradients only). Saved when one of
    the gradients reading it is asked for."""
    if op.variadic or op.list_output:
        return None
    savable = [*op.inputs, *(o for o in op.outputs if o in op.outputs_used), *op.stages]
    by_input = {}
    for x, (values, named) in zip(op.inputs, reads_by_result(op.vjp, _value_reads)):
        if op.vjp.results[op.inputs.index(x)] is not None:
            by_input[x] = [v for v in savable if v in (values if v in op.inputs else named)]
    if len({tuple(read) for read in by_input.values()}) < 2:
        return None
    return by_input


def values_read(function: ir.Function) -> set[str]:
    """The variables whose values some result of `function` reads (of any variant, its
    recomputation of stages included), not only their shapes: what its caller must keep.
    A conjugation reads no value where only the shape of what it conjugates is read."""
    return set().union(*(values for values, _ in reads_by_result(function, _value_reads)))


# functions of the printed code whose later arguments are read for their dtype alone
_DTYPE_READS = ("promoted", "like_dtype")


def _value_reads(value) -> set[str]:
    """`ir.reads(value)`, less the variables an elementwise expression reads for their dtype
    alone (`promoted(grad, x)`: a gradient in x's complex dtype)."""
    if not isinstance(value, ir.Elementwise):
        return ir.reads(value)
    valued = value.expr.replace(lambda e: getattr(e.func, "__name__", "") in _DTYPE_READS, lambda e: e.args[0])
    return {str(s) for s in valued.free_symbols}

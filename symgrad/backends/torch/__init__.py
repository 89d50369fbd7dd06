"""The PyTorch target: `<stem>_torch.py`. Per op, `<op>` applies a `torch.autograd.Function`
whose backward is the derived `<op>_vjp`, differentiable again (double backward);
`<op>_forward` is the formula itself. Ops that use a function PyTorch lacks are left out of
the module, each named in it with the reason (`UNAVAILABLE`)."""

from __future__ import annotations

from pathlib import Path

import sympy as sp

from symgrad import ir
from symgrad.backends.torch.printer import TorchPrinter
from symgrad.backends.torch.verify import TorchGradient, TorchSecondOrder
from symgrad.errors import LoweringError
from symgrad.render import (
    attr_params,
    common_context,
    gradient_function,
    render_framework_module,
    signature,
    staged_forward,
)
from symgrad.verify.sources import Unavailable

RUNTIME = Path(__file__).with_name("runtime.py")  # the helpers generated modules carry
PRINTER = TorchPrinter  # prints the IR and SymPy expressions as this target's code


def render_module(source: str, ops: list[ir.OpCode]) -> str:
    return render_framework_module(source, ops, TorchPrinter, _op, "torch_module.py.j2", RUNTIME, ("numpy", "torch"))


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
    attrs = [name for name, _ in op.enumerated_attrs + op.numeric_attrs]
    forward = f"{op.func_name}_forward"
    return {
        **common_context(op, printer),
        **gradient_function(op, printer, forward=forward),
        **staged_forward(op),
        **_function_class(op, attrs),
        "forward_signature": signature(op.inputs, attr_params(op)),
        "forward": forward,
        "attrs": attrs,
        "applied": _applied(op, attrs),
        "pass_attrs": "".join(f", {name}={name}" for name in attrs),
        "list_output": op.list_output,
        "fresh": _may_return_an_input(op),
    }


def _may_return_an_input(op: ir.OpCode) -> bool:
    """Whether the forward may return an input as it is (Identity's `output = input`, a sum
    over no axes): autograd cannot save such an input, so the Function returns a view of it."""
    aliasing = lambda v: (isinstance(v, ir.Elementwise) and isinstance(v.expr, sp.Symbol)) or (
        isinstance(v, ir.Reduce) and v.batch_before is not None)
    return any(aliasing(s.value) for b in op.forward.branches for s in ir.statements(b.body))


def _function_class(op: ir.OpCode, attrs: list[str]) -> dict:
    """The `torch.autograd.Function` subclass's parameters and what it saves: the inputs,
    then the outputs the gradient reads, then the stages (autograd refuses to save an output
    that is an input returned as it is, as Identity's is: not read, not saved)."""
    several = len(op.outputs) > 1 or op.list_output
    used = [o for o in op.outputs if o in op.outputs_used]
    saved = [f"*{o}" if op.list_output else o for o in used]
    if op.stages:
        picked = [f"output[{op.outputs.index(o)}]" for o in used] + [f"*output[{len(op.outputs)}:]"]
    elif op.list_output or not used:
        picked = ["*output"] if used else []
    else:
        picked = [f"output[{op.outputs.index(o)}]" for o in used] if several else ["output"]
    return {
        "class_name": f"_{op.name}Function",
        "apply_params": ", ".join(attrs + list(op.inputs)),
        "attrs_slice": f"[{len(attrs)}:]" if attrs else "",
        "outputs_value": ", ".join(op.outputs) if len(op.outputs) == 1 else f"({', '.join(op.outputs)})",
        "outputs_tuple": ", ".join(op.outputs),
        "stages_start": len(op.outputs),
        "saved": ", ".join(["*inputs" + (f"[{len(attrs)}:]" if attrs else "")] + picked),
        "saved_names": ", ".join(list(op.inputs) + saved + list(op.stages)) + ("," if len(op.inputs) + len(saved) + len(op.stages) == 1 else ""),
        "backward_params": "*cotangents" if several or op.stages else op.grads[0],
        "pass_cotangents": _cotangents(op),
        "outputs_pass": "".join(f", {o}={o}" for o in used),
    }


def _cotangents(op: ir.OpCode) -> str:
    if op.list_output:
        return "list(cotangents)"
    if len(op.outputs) > 1:
        return f"*cotangents[:{len(op.outputs)}]"
    return "cotangents[0]" if op.stages else op.grads[0]


def _applied(op: ir.OpCode, attrs: list[str]) -> str:
    """The call of the Function's `apply` (attributes first), as `<op>` returns it: the
    outputs alone, without the stages."""
    call = f"_{op.name}Function.apply({', '.join(attrs + [name for name in op.inputs])})"
    if op.list_output:
        return f"list({call}[: -{len(op.stages)}])" if op.stages else f"list({call})"
    if not op.stages:
        return call
    return f"{call}[0]" if len(op.outputs) == 1 else f"{call}[: {len(op.outputs)}]"

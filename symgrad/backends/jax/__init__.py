"""The JAX target: `<stem>_jax.py`. Per op, `<op>` is a `jax.custom_vjp` function whose gradient
(under `jax.grad`, `jax.vjp`, `jit` and `vmap`) is the derived `<op>_vjp`; `<op>_forward` is
the formula itself. JAX differentiates `<op>_vjp` again for second order, so no gradient op is
emitted. Ops that use a function JAX lacks are left out of the module, each named in it with
the reason (`UNAVAILABLE`)."""

from __future__ import annotations

from pathlib import Path

from symgrad import ir
from symgrad.backends.jax.printer import JaxPrinter
from symgrad.backends.jax.verify import JaxFunction, JaxSecondOrder
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
PRINTER = JaxPrinter  # prints the IR and SymPy expressions as this target's code


def render_module(source: str, ops: list[ir.OpCode]) -> str:
    return render_framework_module(source, ops, JaxPrinter, _op, "jax_module.py.j2", RUNTIME, ("numpy", "jax.numpy"))


def derived_source(op, stand_in: bool = False):
    """The gradient `jax.vjp` gives of the op's `custom_vjp` function, as a verification source
    (`Unavailable` for an op the module leaves out)."""
    reason = unavailable_reason(op)
    return Unavailable(reason) if reason else JaxFunction.derived(op)


def second_order_source(op):
    """The op differentiated twice by `jax.vjp` through its derived gradient."""
    reason = unavailable_reason(op)
    return Unavailable(reason) if reason else JaxSecondOrder(op)


def unavailable_reason(op) -> str | None:
    """Why the derived op's JAX module leaves it out (`UNAVAILABLE`), None where it has it."""
    return getattr(op.module("jax"), "UNAVAILABLE", {}).get(op.name)


def _op(op: ir.OpCode, printer) -> dict:
    attrs = [name for name, _ in op.enumerated_attrs + op.numeric_attrs]
    forward = f"{op.func_name}_forward"
    inputs = [name.lstrip("*") for name in op.inputs]
    grads = "cotangents" if len(op.grads) > 1 else op.grads[0]
    outputs = op.outputs[0] if len(op.outputs) == 1 else f"({', '.join(op.outputs)})"
    return {
        **common_context(op, printer),
        **gradient_function(op, printer, forward=forward),
        **staged_forward(op),
        "forward_signature": signature(op.inputs, attr_params(op)),
        "forward": forward,
        "attr_params": "".join(f"{name}, " for name in attrs),
        "nondiff": tuple(range(len(attrs))),
        "pass_attrs": "".join(f", {name}={name}" for name in attrs),
        "saved_inputs": ", ".join(inputs) + ("," if len(inputs) == 1 else ""),
        "outputs_value": outputs,
        "outputs_pass": "".join(f", {o}={o}" for o in op.outputs),
        "cotangents": grads,
        "pass_cotangents": f"*{grads}" if len(op.grads) > 1 else grads,
        # JAX's cotangents of complex inputs are the conjugates of TensorFlow's (and of the
        # derived gradient's): `jax_vjp(ct) = conj(tensorflow_vjp(conj(ct)))`
        "conjugated": op.complex_ok,
        "conjugate_cotangents": f"[_conj(c) for c in {grads}]" if len(op.grads) > 1 or op.list_output else f"_conj({grads})",
    }

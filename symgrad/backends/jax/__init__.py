"""The JAX target: `<stem>_jax.py`. Per op, `<op>` is a `jax.custom_vjp` function whose gradient
(under `jax.grad`, `jax.vjp`, `jit` and `vmap`) is the derived `<op>_vjp`; `<op>_forward` is
the formula itself. JAX differentiates `<op>_vjp` again for second order, so no gradient op is
emitted. Ops that use a function JAX lacks are left out of the module, each named in it with
the reason (`UNAVAILABLE`)."""

from __future__ import annotations

from pathlib import Path

from symgrad import ir
from symgrad.backends.conventions import wrapper_context
from symgrad.backends.jax.printer import JaxPrinter
from symgrad.backends.jax.verify import JaxFunction, JaxSecondOrder
from symgrad.render import (
    attr_params,
    common_context,
    gradient_function,
    names_literal,
    outputs_literal,
    render_framework_module,
    signature,
    staged_forward,
)
from symgrad.verify.sources import Unavailable

RUNTIME = (Path(__file__).with_name("runtime.py"),) + tuple(Path(__file__).parent.parent / name for name in ("leading_axes.py", "shape_checks.py"))  # the helpers of the runtime module generated modules import
PRINTER = JaxPrinter  # prints the IR and SymPy expressions as this target's code


def render_module(source: str, ops: list[ir.OpCode]) -> str:
    return render_framework_module(source, ops, JaxPrinter, _op, "jax_module.py.j2", "jax", ("numpy", "jax.numpy"))


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
    forward = f"{op.func_name}_forward"
    return {
        **common_context(op, printer),
        **gradient_function(op, printer, forward=forward),
        **staged_forward(op),
        "forward_signature": signature(op.inputs, attr_params(op)),
        "forward": forward,
        **wrapper_context(op, "jax", f"_{op.func_name}_custom_vjp", printer),
        "custom_vjp": f"_{op.func_name}_custom_vjp",
        "custom_vjp_call": _custom_vjp_call(op, forward),
    }


def _custom_vjp_call(op: ir.OpCode, forward: str) -> str:
    """The runtime's `_custom_vjp(...)` making the op's `jax.custom_vjp` function."""
    options = ["stages=True"] if op.stages else []
    return f"_custom_vjp({', '.join([forward, f'{op.func_name}_vjp', outputs_literal(op)] + options)})"

"""The numpy target: `<stem>_numpy.py`, each op's forward, `<op>_grad` and, where its gradient
op derives, `<op>_grad_grad`, with the helpers (sum-to-shape, gather, convolution kernels) the
module uses."""

from __future__ import annotations

from pathlib import Path

from symgrad import ir
from symgrad.backends.numpy.printer import NumpyPrinter
from symgrad.errors import LoweringError
from symgrad.render import (
    attr_params,
    common_context,
    environment,
    gradient_function,
    render_with_helpers,
    signature,
    staged_forward,
)
from symgrad.second_order import PREFIX
from symgrad.verify.sources import NumpyFunction, derived_import_lines

RUNTIME = (Path(__file__).with_name("runtime.py"), Path(__file__).parent.parent / "shape_checks.py")  # the helpers of the runtime module generated modules import
PRINTER = NumpyPrinter  # prints the IR and SymPy expressions as this target's code


def render_module(source: str, ops: list[ir.OpCode]) -> str:
    printer = NumpyPrinter()
    contexts = [_numpy_op(op, printer) for op in ops]
    imports = sorted(m for m in printer.module_imports if m not in ("numpy",))
    template = environment().get_template("numpy_module.py.j2")
    context = {"source": source, "ops": contexts, "imports": imports, "uses_stages": any(op.stages for op in ops)}
    return render_with_helpers(template, context, "numpy", [printer], NumpyPrinter)


def derived_source(op, stand_in: bool = False):
    """`<op>_grad` of the op's numpy module, as a verification source."""
    fn = op.function("numpy", "_grad")
    label = f"derived {op.stem}_numpy.{op.decl.func_name}_grad"
    return NumpyFunction(fn, label, derived_import_lines(op, fn, label), pass_outputs=False)


def _numpy_op(op: ir.OpCode, printer) -> dict:
    return {
        **common_context(op, printer),
        **gradient_function(op, printer),
        **staged_forward(op),
        "second_order": _second_order(op, printer),
    }


def _second_order(op: ir.OpCode, printer) -> dict | None:
    """`<op>_grad_grad`'s context, None where there is no gradient op or it cannot be printed
    (`symgrad check --order 2` then reports it as not generated)."""
    if op.second_order is None:
        return None
    if isinstance(op.second_order, ir.LinearSecondOrder):
        return linear_second_order(op, op.second_order.linear_in)
    positions = {f"{PREFIX}{name}": k for k, name in enumerate(op.inputs)}  # in `<op>_grad`'s results
    try:
        return gradient_function(op.second_order, printer, positions)
    except LoweringError:
        return None


def linear_second_order(op: ir.OpCode, linear_in: tuple[str, ...]) -> dict:
    """`<op>_grad_grad` of an op linear in each of `linear_in` (`ir.LinearSecondOrder`): the
    statements calling the op's own forward and gradient, and what the docstring says."""
    cotangent = {x: f"grad_{PREFIX}{x}" for x in linear_in}
    attrs = "".join(f", {name}={name}" for name, _ in op.enumerated_attrs + op.numeric_attrs)
    forward = f"globals()[{op.func_name!r}]" if op.func_name in op.outputs + op.inputs else op.func_name

    def call(function, replaced, *upstream):
        args = [cotangent[x] if x == replaced else x for x in op.inputs]
        return f"{function}({', '.join(list(upstream) + args)}{attrs})"

    (grad,) = op.grads
    jvp = " + ".join(call(forward, x) for x in linear_in)
    lines = [f"grad_{grad} = {jvp}"]
    for x in linear_in:
        terms = [f"{call(op.func_name + '_grad', y, grad)}[{op.inputs.index(x)}]" for y in linear_in if y != x]
        lines.append(f"grad_{x} = {' + '.join(terms)}" if terms else f"grad_{x} = None  # {op.func_name}_grad does not read {x}")
    results = [f"grad_{grad}"] + [f"grad_{x}" if x in linear_in else "None" for x in op.inputs]
    inputs = ", ".join(linear_in)
    if linear_in:
        doc = (f"{op.name} is linear in {inputs}{' separately' if len(linear_in) > 1 else ''}: its second "
               f"order is its own forward (w.r.t. {grad}) and gradient (w.r.t. {inputs}), each at the "
               "inputs with one replaced by its cotangent")
    else:  # no gradient: the second order is zero (None), whatever the cotangents
        lines, results = [], ["None"] * len(results)
        doc = f"{op.name} has no gradient, so its second order is zero"
    return {
        "linear": True,
        "func_name": op.func_name,
        "grad_signature": signature(
            [f"grad_{PREFIX}{x}" for x in op.inputs] + list(op.grads) + list(op.inputs), attr_params(op)
        ),
        "doc": doc,
        "inputs": ", ".join([grad] + list(op.inputs)),
        "body": "\n".join(lines),
        "results": ", ".join(results),
    }

"""The numpy target: `<stem>_numpy.py`, each op's forward, `<op>_grad` and, where its gradient
op derives, `<op>_grad_grad`, with the helpers (sum-to-shape, gather, convolution kernels) the
module uses."""

from __future__ import annotations

from pathlib import Path

from symgrad import ir
from symgrad.backends.numpy.printer import NumpyPrinter
from symgrad.errors import LoweringError
from symgrad.render import (
    common_context,
    environment,
    format_module,
    gradient_function,
    helper_sources,
    staged_forward,
)
from symgrad.second_order import PREFIX


RUNTIME = Path(__file__).with_name("runtime.py")  # the helpers generated modules carry
PRINTER = NumpyPrinter  # prints the IR and SymPy expressions as this target's code


def render_module(source: str, ops: list[ir.OpCode]) -> str:
    printer = NumpyPrinter()
    contexts = [_numpy_op(op, printer) for op in ops]
    imports = sorted(m for m in printer.module_imports if m not in ("numpy",))
    template = environment().get_template("numpy_module.py.j2")
    context = {"source": source, "ops": contexts, "imports": imports, "uses_stages": any(op.stages for op in ops)}
    helpers = helper_sources(template.render(**context, helpers=""), RUNTIME)
    return format_module(template.render(**context, helpers=helpers))


def derived_source(op, stand_in: bool = False):
    """`<op>_grad` of the op's numpy module, as a verification source."""
    from symgrad.sources import NumpyFunction, derived_import_lines  # verification: only when verifying

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
    positions = {f"{PREFIX}{name}": k for k, name in enumerate(op.inputs)}  # in `<op>_grad`'s results
    try:
        return gradient_function(op.second_order, printer, positions)
    except LoweringError:
        return None

"""The TensorFlow target: `<stem>_tf.py`, each op's forward, `<op>_vjp`, a `tf.custom_gradient`
wrapper calling TensorFlow's own kernel where it has one, and `<op>_grad(op, *grads)` for
`tf.RegisterGradient`, with the helpers the module uses."""

from __future__ import annotations

from pathlib import Path

from symgrad import ir
from symgrad.backends.tensorflow.printer import TensorflowPrinter
from symgrad.render import (
    attr_params,
    common_context,
    environment,
    names_literal,
    outputs_literal,
    render_with_helpers,
    print_statement,
    signature,
    stage_params,
    staged_forward,
    vjp_context,
)
from symgrad.verify.sources import derived_import_lines
from symgrad.verify.tf_sources import TfGradientFunction

RUNTIME = tuple(Path(__file__).with_name(name) for name in ("runtime.py", "kernels.py")) + (Path(__file__).parent.parent / "shape_checks.py",)  # the helpers of the runtime module generated modules import
PRINTER = TensorflowPrinter  # prints the IR and SymPy expressions as this target's code


def render_module(source: str, ops: list[ir.OpCode]) -> str:
    printer = TensorflowPrinter()
    contexts = [_tf_op(op, printer) for op in ops]
    template = environment().get_template("tensorflow_module.py.j2")
    context = {
        "source": source,
        "ops": contexts,
        "uses_outputs_again": any(op.outputs_used for op in ops),
        "uses_stages": any(op.stages for op in ops),
    }
    return render_with_helpers(template, context, "tensorflow", [printer], TensorflowPrinter)


def derived_source(op, stand_in: bool = False):
    """`<op>_grad(op, *grads)` of the op's TensorFlow module, as a verification source;
    `stand_in`: called on a stand-in op, not on TensorFlow's (which may not exist or take
    these inputs)."""
    fn = op.function("tensorflow", "_grad")
    label = f"derived {op.stem}_tf.{op.decl.func_name}_grad"
    return TfGradientFunction(fn, label, derived_import_lines(op, fn, label), stand_in)


def _tf_op(op: ir.OpCode, printer) -> dict:
    attrs = attr_params(op)
    const = dict(op.const_inputs)
    stored = dict(op.stored_names)
    get_attrs = "".join(
        f", {name}={_read_attr(name, default, const, stored)}" for name, default in op.enumerated_attrs
    ) + "".join(f", {name}={_read_numeric(name, const, op.list_inputs, stored)}" for name, _ in op.numeric_attrs)
    forward = f"{op.func_name}_forward"
    declared = _declared_values(op.forward.branches)  # the kernel's guard, "" for none
    return {
        **common_context(op, printer),
        **vjp_context(op, printer),
        **staged_forward(op),
        "forward": forward,
        # the kernel's guard repeats the prologue, which computes what it tests (a rank, N)
        "forward_prologue": "\n".join(print_statement(st, printer, op) for st in op.forward.prologue),
        "forward_signature": signature(op.inputs, attrs),
        "get_attrs": get_attrs,
        **_vjp_call(op, attrs, const),
        # a list output's upstream gradients arrive one per tensor; the vjp takes them as one
        "grad_params": f"*{op.grads[0]}" if op.list_output else ", ".join(op.grads),
        "declared": declared,
        "custom_gradient": f"_{op.func_name}_custom_gradient",
        "custom_gradient_call": _custom_gradient_call(op, forward, bool(declared)),
    }


def _vjp_call(op: ir.OpCode, attrs: list, const: dict) -> dict:
    """How `<op>_grad(op, *grads)` calls `<op>_vjp`: the vjp's signature, the op's tensor
    inputs and outputs it passes, and the positions of the constant inputs (their gradient
    None)."""
    tensor_positions = [n for n in range(len(op.inputs) + len(const)) if n not in const.values()]
    op_inputs = "*op.inputs" if not const else ", ".join(f"op.inputs[{n}]" for n in tensor_positions)
    none_positions = tuple(sorted(const.values()))
    if op.variadic:  # after `*inputs`, outputs can only be passed by keyword
        vjp_signature = signature(op.grads + op.inputs, [f"{o}=None" for o in op.outputs] + attrs + stage_params(op))
        op_outputs = ", ".join(f"{o}={_op_outputs(op, n)}" for n, o in enumerate(op.outputs))
        op_inputs, none_positions = _list_input_positions(const)
    else:
        vjp_signature = signature(op.grads + op.inputs + op.outputs, attrs + stage_params(op))
        op_outputs = _op_outputs(op, None)
    return {
        "vjp_signature": vjp_signature,
        "op_inputs": op_inputs,
        "op_outputs": op_outputs,
        "none_positions": none_positions,
    }


def _custom_gradient_call(op: ir.OpCode, forward: str, guarded: bool) -> str:
    """The runtime's `_custom_gradient(...)` making the op's `tf.custom_gradient` function: its
    forward TensorFlow's own kernel of the op type where TensorFlow has one for the inputs
    (given by TensorFlow's names of them) and the formula declares the attribute values, else
    the formula. Whether TensorFlow has the op and a kernel for the dtypes is decided when it
    runs, not here: generated files do not depend on the TensorFlow that derives them. Where
    the gradient reads the outputs (`read=True`), it reads them again differentiably by the
    derived gradient: the forward's outputs themselves would be differentiated, at second
    order, through TensorFlow's own gradient of its kernel (NaN where the derived one is
    finite, wrong where TensorFlow's is). `guarded`: the op has `_<op>_declares`."""
    options = ["read=True"] if op.outputs_used else []
    options += ["stages=True"] if op.stages else []
    options += [f"declares=_{op.func_name}_declares"] if guarded else []
    arguments = [repr(op.name), names_literal(op.inputs), forward, f"{op.func_name}_vjp", outputs_literal(op)]
    return f"_custom_gradient({', '.join(arguments + options)})"


def _declared_values(branches) -> str:
    """A condition that holds for the enumerated attributes' declared value combinations (the
    formula's branches), or "" for an op without enumerated attributes. The branches are every
    combination of the attributes' values (`OpDecl.variants`), so one test per attribute."""
    if not branches or not branches[0].attr_values:
        return ""
    names = [name for name, _ in branches[0].attr_values]
    values = {name: tuple(dict.fromkeys(dict(b.attr_values)[name] for b in branches)) for name in names}
    return " and ".join(f"{name} in {values[name]!r}" for name in names)


def _op_outputs(op: ir.OpCode, n: int | None) -> str:
    """How the registered gradient passes the op's outputs (output `n`, or all): a list
    output as the list `op.outputs`."""
    if op.list_output:
        return "list(op.outputs)"
    return "*op.outputs" if n is None else f"op.outputs[{n}]"


def _list_input_positions(const: dict) -> tuple[str, str]:
    """For a list input between constant inputs (non-negative positions before it, negative
    after it): how the registered gradient passes its tensors, and the positions of the
    constant inputs, whose gradients are None, as Python source."""
    before = sum(1 for p in const.values() if p >= 0)
    after = sum(1 for p in const.values() if p < 0)
    tensors = f"*op.inputs[{before or ''}:{-after if after else ''}]"
    positions = [str(p) for p in sorted(p for p in const.values() if p >= 0)]
    positions += [f"len(op.inputs) - {-p}" for p in sorted(p for p in const.values() if p < 0)]
    return ("*op.inputs" if not const else tensors), (f"({', '.join(positions)},)" if const else ())


def _read_numeric(name: str, const: dict, list_inputs, stored: dict) -> str:
    """How the registered gradient reads numeric attribute `name`: an attribute (by the name
    TensorFlow stores it under), a scalar input, or a constant list input."""
    if name in list_inputs:
        return f"_const_input(op, {const[name]})"
    return _scalar_input(const[name]) if name in const else f"op.get_attr({stored.get(name, name)!r})"


def _scalar_input(position: int) -> str:
    """A scalar integer input, as int64: the dtype indices used as values have."""
    return f"tf.cast(op.inputs[{position}], tf.int64)"


def _read_attr(name: str, default, const: dict, stored: dict) -> str:
    """How the registered gradient reads attribute `name` from its op (by the name TensorFlow
    stores it under)."""
    if name in const:
        return f"_const_input(op, {const[name]})"
    key = stored.get(name, name)
    return f"_string_attr(op, {key!r})" if isinstance(default, str) else f"op.get_attr({key!r})"

"""The Jinja environment, and one function per generated file kind; templates live in `templates/`.

Functions here turn `OpCode` IR into already-printed strings and plain lists; the templates
only lay them out. Output is formatted with black (pinned), so it is byte-identical between
runs and a formatter leaves it unchanged.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import jinja2
import sympy as sp

from symgrad import ir
from symgrad.errors import LoweringError
from symgrad.printers.numpy import NumpyPrinter, summed_product
from symgrad.printers.tensorflow import TensorflowPrinter, sums_batch_away
from symgrad.second_order import PREFIX

LINE_LENGTH = 100


def templates_dir() -> Path:
    """`symgrad/templates` in an installed wheel, else `templates/` beside the package source."""
    packaged = Path(str(resources.files("symgrad"))) / "templates"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parent.parent / "templates"


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render_module(target: str, source: str, ops: list[ir.OpCode]) -> str:
    """The generated module for `target` ("numpy" or "tensorflow") from one op file."""
    render = {"numpy": render_numpy_module, "tensorflow": render_tf_module}[target]
    return render(source, ops)


def render_numpy_module(source: str, ops: list[ir.OpCode]) -> str:
    printer = NumpyPrinter()
    contexts = [_numpy_op(op, printer) for op in ops]
    ops = ops + [op.second_order for op in ops if op.second_order]  # the helpers both use
    imports = sorted(m for m in printer.module_imports if m not in ("numpy",))
    text = _environment().get_template("numpy_module.py.j2").render(
        source=source,
        ops=contexts,
        imports=imports,
        uses_conj=any(isinstance(s.value, ir.Conj) for op in ops for s in op.vjp.prologue) or _conjugates_stages(ops),
        uses_stages=any(op.stages for op in ops),
        uses_sum_to_shape=_uses(ops, lambda v: isinstance(v, ir.SumToShape) and summed_product(v.value.expr) is None),
        uses_sum_product=_uses(ops, lambda v: isinstance(v, ir.SumToShape) and summed_product(v.value.expr) is not None),
        uses_shift_right=_uses(ops, lambda v: isinstance(v, ir.Scan) and v.exclusive),
        uses_gather=_uses(ops, lambda v: isinstance(v, ir.Gather)),
        uses_scatter=_uses(ops, lambda v: isinstance(v, ir.ScatterAdd)),
        uses_convolution=_uses(ops, lambda v: isinstance(v, (ir.Convolution, ir.MaxPoolBackprop))),
        uses_max_pool=_uses(ops, lambda v: isinstance(v, ir.MaxPoolBackprop)),
    )
    return _format(text)


def render_tf_module(source: str, ops: list[ir.OpCode]) -> str:
    printer = TensorflowPrinter()
    contexts = [_tf_op(op, printer) for op in ops]
    text = _environment().get_template("tensorflow_module.py.j2").render(
        source=source,
        ops=contexts,
        helpers=printer.helpers,
        uses_outputs_again=any(c["outputs_again"] for c in contexts),
        uses_sum_to_shape=_uses(ops, lambda v: isinstance(v, ir.SumToShape)),
        uses_stages=any(op.stages for op in ops),
        uses_string_attrs=any(isinstance(v, str) for op in ops for _, v in op.enumerated_attrs),
        uses_const_inputs=any(op.const_inputs for op in ops),
        uses_gather=_uses(ops, lambda v: isinstance(v, ir.Gather)),
        uses_scatter=_uses(ops, lambda v: isinstance(v, ir.ScatterAdd)),
        uses_convolution=_uses(ops, lambda v: isinstance(v, (ir.Convolution, ir.MaxPoolBackprop))),
        uses_max_pool=_uses(ops, lambda v: isinstance(v, ir.MaxPoolBackprop)),
        uses_einsum_over_batch=_uses(ops, lambda v: isinstance(v, ir.Einsum) and sums_batch_away(v.spec)),
    )
    return _format(text)


def _format(text: str) -> str:
    """`text` formatted by black, in one pass: `black.format_str` formats its own output
    again (for trailing commas a first pass may add), which changes nothing in generated code
    and doubles the time. The tests check every generated file is black-stable."""
    import black  # only when something is rendered: it costs seconds at start-up

    mode = black.Mode(line_length=LINE_LENGTH)
    one_pass = getattr(black, "_format_str_once", None)  # black is pinned: see pyproject.toml
    return one_pass(text, mode=mode) if one_pass is not None else black.format_str(text, mode=mode)


def _conjugates_stages(ops: list[ir.OpCode]) -> bool:
    """Whether a gradient conjugates the stages passed to it (a complex op's)."""
    return any(
        isinstance(s, ir.Recompute) and s.conj for op in ops for branch in op.vjp.branches for s in branch.body
    )


def _uses(ops: list[ir.OpCode], predicate) -> bool:
    """Whether any statement of `ops` computes a value for which `predicate` holds."""
    return any(
        predicate(s.value)
        for op in ops
        for function in (op.forward, op.vjp)
        for branch in function.branches
        for s in ir.statements(branch.body)
    )


# --- per-op contexts -----------------------------------------------------------------------


def _numpy_op(op: ir.OpCode, printer) -> dict:
    attrs = _attr_params(op)
    return {
        **_common(op, printer),
        **_numpy_gradient(op, printer),
        "forward_signature": _signature(op.inputs, attrs + (["return_stages=False"] if op.stages else [])),
        "stages_dict": "{" + ", ".join(f"{name!r}: {name}" for name in op.stages) + "}",
        "stages": op.stages,
        "stages_unset": _stages_unset(op),
        "second_order": _second_order(op, printer),
    }


def _second_order(op: ir.OpCode, printer) -> dict | None:
    """`<op>_grad_grad`'s context, None where there is no gradient op or it cannot be printed
    (`symgrad check --order 2` then reports it as not generated)."""
    if op.second_order is None:
        return None
    positions = {f"{PREFIX}{name}": k for k, name in enumerate(op.inputs)}  # in `<op>_grad`'s results
    try:
        return _numpy_gradient(op.second_order, printer, positions)
    except LoweringError:
        return None


def _numpy_gradient(op: ir.OpCode, printer, positions: dict | None = None) -> dict:
    """What the template's `gradient` macro reads: the signature, body and results of
    `<op>_grad` (of the gradient op's: `<op>_grad_grad`, whose forward, `<op>_grad`, returns
    a tuple, each output at `positions[output]`)."""
    attrs = _attr_params(op)
    outputs = ", ".join(f"{o}=None" for o in op.outputs)
    call_attrs = "".join(f", {name}={name}" for name, _ in op.enumerated_attrs + op.numeric_attrs)
    # an output named like its op (Softmax's `softmax`) shadows the forward function
    forward = f"globals()[{op.func_name!r}]" if op.func_name in op.outputs else op.func_name
    calls = [
        (o, f"{o} = {forward}({', '.join(op.inputs)}{call_attrs})" + (f"[{positions[o]}]" if positions else _pick(op, o)))
        for o in op.outputs_used
    ]
    return {
        "name": op.name,
        "func_name": op.func_name,
        "inputs": ", ".join(op.inputs),
        "vjp_body": print_function_body(op.vjp, printer, op),
        "vjp_results": _results(op.vjp.results),
        "grad_signature": _signature(op.grads + op.inputs, [outputs] + _stage_params(op) + attrs),
        "output_calls": calls,
    }


def _stage_params(op: ir.OpCode) -> list[str]:
    """Keyword parameters of the gradient for the forward stages it reads (None: recomputed)."""
    return [f"{name}=None" for name in op.stages]


def _stages_unset(op: ir.OpCode, every: bool = False) -> str:
    """`a = b = None` for the stages some variant's forward does not compute (`every`: all
    stages), else ""."""
    assigned = [{s.target for s in ir.statements(b.body)} for b in op.forward.branches]
    unset = [name for name in op.stages if every or any(name not in targets for targets in assigned)]
    return " = ".join(unset + ["None"]) if unset else ""


def _pick(op: ir.OpCode, output: str) -> str:
    return "" if len(op.outputs) == 1 else f"[{op.outputs.index(output)}]"


def _tf_op(op: ir.OpCode, printer) -> dict:
    attrs = _attr_params(op)
    const = dict(op.const_inputs)
    get_attrs = "".join(
        f", {name}={_read_attr(name, default, const)}" for name, default in op.enumerated_attrs
    ) + "".join(f", {name}={_read_numeric(name, const, op.list_inputs)}" for name, _ in op.numeric_attrs)
    pass_attrs = "".join(f", {name}={name}" for name, _ in op.enumerated_attrs + op.numeric_attrs)
    tensor_positions = [n for n in range(len(op.inputs) + len(const)) if n not in const.values()]
    op_inputs = "*op.inputs" if not const else ", ".join(f"op.inputs[{n}]" for n in tensor_positions)
    none_positions = tuple(sorted(const.values()))
    if op.variadic:  # after `*inputs`, outputs can only be passed by keyword
        vjp_signature = _signature(op.grads + op.inputs, [f"{o}=None" for o in op.outputs] + attrs + _stage_params(op))
        op_outputs = ", ".join(f"{o}={_op_outputs(op, n)}" for n, o in enumerate(op.outputs))
        outputs_pass = ", ".join(f"{o}={o}" for o in op.outputs)
        op_inputs, none_positions = _list_input_positions(const)
    else:
        vjp_signature = _signature(op.grads + op.inputs + op.outputs, attrs + _stage_params(op))
        op_outputs, outputs_pass = _op_outputs(op, None), ", ".join(op.outputs)
    return {
        **_common(op, printer),
        # in the custom_gradient wrapper the prologue runs outside the nested forward, whose
        # assignments would otherwise make the attributes it rewrites local to it
        "forward_prologue": "\n".join(_statement(st, printer, op) for st in op.forward.prologue),
        "forward_body": print_function_body(op.forward, printer, op, prologue=False),
        "vjp_signature": vjp_signature,
        "forward_signature": _signature(op.inputs, attrs),
        "get_attrs": get_attrs,
        "pass_attrs": pass_attrs,
        "pass_stages": "".join(f", {name}={name}" for name in op.stages),
        "stages_unset": _stages_unset(op, every=True),  # TensorFlow's kernel computes none
        "op_inputs": op_inputs,
        "op_outputs": op_outputs,
        "outputs_pass": outputs_pass,
        "none_positions": none_positions,
        # a list output's upstream gradients arrive one per tensor; the vjp takes them as one
        "grad_params": f"*{op.grads[0]}" if op.list_output else ", ".join(op.grads),
        "outputs_again": _outputs_again(op),
        **_kernel_call(op),
    }


def _outputs_again(op: ir.OpCode) -> str:
    """The wrapper's outputs as its backward reads them again, one `tf.identity` each (a list
    output's per tensor), or "" where the gradient reads no output: the forward's outputs
    themselves would be differentiated, at second order, through TensorFlow's own gradient of
    its kernel (NaN where the derived one is finite, wrong where TensorFlow's is)."""
    if not op.outputs_used:
        return ""
    if op.list_output:
        return f"[tf.identity(t) for t in {op.outputs[0]}]"
    again = [f"tf.identity({o})" for o in op.outputs]
    return again[0] if len(again) == 1 else f"({', '.join(again)})"


def _kernel_call(op: ir.OpCode) -> dict:
    """How the `tf.custom_gradient` wrapper's forward calls TensorFlow's own kernel of the op
    type (`_tf_kernel`, None where TensorFlow has none for these inputs): the inputs by their
    names (TensorFlow's), the attributes as the caller gave them (`kernel_attrs`, read before
    the prologue normalises them for the formula), and only for the attribute values declared,
    so that others still raise as the formula does. Whether TensorFlow has the op and a kernel
    for the dtypes is decided when the wrapper runs, not here: generated files do not depend on
    the TensorFlow that derives them."""
    names = [name for name, _ in op.enumerated_attrs + op.numeric_attrs]
    attrs = "{" + ", ".join(f"{name!r}: {name}" for name in names) + "}"
    inputs = "{" + ", ".join(f"{name.lstrip('*')!r}: {name.lstrip('*')}" for name in op.inputs) + "}"
    passed = "kernel_attrs" if op.forward.prologue else attrs
    flag = ", list_output=True" if op.list_output else ""
    call = f"_tf_kernel({op.name!r}, {len(op.outputs)}, {inputs}, {passed}{flag})"
    guard = _declared_values(op.forward.branches)
    single = len(op.outputs) == 1
    return {
        "kernel_attrs": attrs,
        "kernel_call": f"{call} if {guard} else None" if guard else call,
        "kernel_targets": op.outputs[0] if single else ", ".join(op.outputs),
        "kernel_pick": "[0]" if single else "",
    }


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


def _read_numeric(name: str, const: dict, list_inputs) -> str:
    """How the registered gradient reads numeric attribute `name`: an attribute, a scalar
    input, or a constant list input."""
    if name in list_inputs:
        return f"_const_input(op, {const[name]})"
    return _scalar_input(const[name]) if name in const else f"op.get_attr({name!r})"


def _scalar_input(position: int) -> str:
    """A scalar integer input, as int64: the dtype indices used as values have."""
    return f"tf.cast(op.inputs[{position}], tf.int64)"


def _read_attr(name: str, default, const: dict) -> str:
    """How the registered gradient reads attribute `name` from its op."""
    if name in const:
        return f"_const_input(op, {const[name]})"
    return f"_string_attr(op, {name!r})" if isinstance(default, str) else f"op.get_attr({name!r})"


def _common(op: ir.OpCode, printer) -> dict:
    forward_results = ", ".join(op.forward.results)
    return {
        "name": op.name,
        "func_name": op.func_name,
        "doc": op.doc.rstrip("."),
        "location": op.location,
        "inputs": ", ".join(op.inputs),
        "outputs": ", ".join(op.outputs),
        "grads": ", ".join(op.grads),
        "forward_body": print_function_body(op.forward, printer, op),
        "forward_results": forward_results if len(op.outputs) == 1 else f"({forward_results})",
        "vjp_body": print_function_body(op.vjp, printer, op),
        "vjp_results": _results(op.vjp.results),
    }


def _attr_params(op: ir.OpCode) -> list[str]:
    params = [f"{name}={default!r}" for name, default in op.enumerated_attrs]
    params += [name if default is None else f"{name}={default!r}" for name, default in op.numeric_attrs]
    return params


def _signature(positional, keyword_only) -> str:
    keyword_only = [k for k in keyword_only if k]
    starred = any(p.startswith("*") for p in positional)  # `*inputs` ends the positionals
    marker = [] if starred or not keyword_only else ["*"]
    return ", ".join(list(positional) + marker + keyword_only)


def _results(results) -> str:
    if results == ("grads",):  # a list input's gradients, packed per variant
        return "grads"
    return ", ".join("None" if r is None else r for r in results) + ("," if len(results) == 1 else "")


# --- function bodies -----------------------------------------------------------------------


def print_function_body(function: ir.Function, printer, op: ir.OpCode, prologue: bool = True) -> str:
    """The statements of `function`: its prologue (unless told not to), then an if/elif chain
    over its variants."""
    printer.dtype_source = function.params[0]  # an input or upstream gradient: the op's dtype
    lines = [_statement(s, printer, op) for s in function.prologue] if prologue else []
    if len(function.branches) == 1 and not function.branches[0].attr_values:
        lines += [line for s in _body(function.branches[0], printer) for line in _lines(s, printer, op)]
        return "\n".join(lines)
    for n, branch in enumerate(function.branches):
        keyword = "if" if n == 0 else "elif"
        lines.append(f"{keyword} {_condition(branch.attr_values)}:")
        lines += ["    " + line for s in _body(branch, printer) for line in _lines(s, printer, op)]
    names = ", ".join(f"{name}={{{name}!r}}" for name, _ in function.branches[0].attr_values)
    lines += ["else:", f'    raise ValueError(f"{op.name}: unsupported attributes {names}")']
    return "\n".join(lines)


def _body(branch: ir.Branch, printer) -> tuple:
    """A branch's statements as `printer`'s target takes them: guarded where its code is
    differentiated again (`guards_branches`)."""
    return branch.guarded_body if printer.guards_branches and branch.guarded_body is not None else branch.body


def _lines(statement: ir.Assign | ir.Recompute, printer, op: ir.OpCode) -> list[str]:
    """A statement as lines; a recomputation guarded by the stages it computes."""
    if not isinstance(statement, ir.Recompute):
        return [_statement(statement, printer, op)]
    lines = ["if " + " or ".join(f"{name} is None" for name in statement.stages) + ":"]
    lines += ["    " + _statement(s, printer, op) for s in statement.body]
    if statement.conj:  # the recomputed stages are of conjugated inputs: so are passed ones
        lines += ["else:"] + ["    " + _statement(ir.Assign(n, ir.Conj(n)), printer, op) for n in statement.stages]
    return lines


def _described(value) -> str:
    """A SymPy expression as itself; any other value (an IR class) by its class too."""
    return str(value) if isinstance(value, sp.Basic) else f"{type(value).__name__} {value}"


def _statement(statement: ir.Assign, printer, op: ir.OpCode) -> str:
    text = printer._print(statement.value)  # IR values dispatch to the printer's _print_<Class>
    if printer._not_supported:
        unsupported = ", ".join(sorted(_described(e) for e in printer._not_supported))
        raise LoweringError(f"the {printer.target} printer cannot print {unsupported}", op.name, op.location)
    if isinstance(statement.value, ir.ScatterAdd):
        return f"{statement.target} = {text}  # no gather form: an explicit scatter-add"
    return f"{statement.target} = {text}"


def _condition(attr_values) -> str:
    parts = []
    for name, value in attr_values:
        if value is True:
            parts.append(name)
        elif value is False:
            parts.append(f"not {name}")
        else:
            parts.append(f"{name} == {value!r}")
    return " and ".join(parts)

"""What every target's rendering shares: the Jinja environment (templates live in `templates/`),
function bodies, signatures, and the per-op context common to all; each target's own lives in
its backend package (`symgrad.backends.<name>`).

Functions here turn `OpCode` IR into already-printed strings and plain lists; the templates
only lay them out. Output is formatted with black (pinned), so it is byte-identical between
runs and a formatter leaves it unchanged.
"""

from __future__ import annotations

import ast
import functools
import textwrap
from importlib import resources
from pathlib import Path

import jinja2
import sympy as sp

from symgrad import dispatch, ir
from symgrad.docstring import gradient_doc
from symgrad.errors import LoweringError
from symgrad.long_functions import split_long_functions
from symgrad.lowering.requested import requested_only
from symgrad.targets import REGISTRY

LINE_LENGTH = 100


def templates_dir() -> Path:
    """`symgrad/templates` in an installed wheel, else `templates/` beside the package source."""
    packaged = Path(str(resources.files("symgrad"))) / "templates"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parent.parent / "templates"


def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render_module(target: str, source: str, ops: list[ir.OpCode]) -> str:
    """The generated module for `target` (a `symgrad.targets.REGISTRY` name) from one op file."""
    return REGISTRY[target].backend.render_module(source, ops)


def format_module(text: str) -> str:
    """`text` formatted by black, in one pass: `black.format_str` formats its own output
    again (for trailing commas a first pass may add), which changes nothing in generated code
    and doubles the time. The tests check every generated file is black-stable."""
    import black  # only when something is rendered: it costs seconds at start-up

    mode = black.Mode(line_length=LINE_LENGTH)
    one_pass = getattr(black, "_format_str_once", None)  # black is pinned: see pyproject.toml
    return one_pass(text, mode=mode) if one_pass is not None else black.format_str(text, mode=mode)


def uses(ops: list[ir.OpCode], predicate) -> bool:
    """Whether any statement of `ops` computes a value for which `predicate` holds."""
    return any(
        predicate(s.value)
        for op in ops
        for function in (op.forward, op.vjp)
        for branch in function.branches
        for s in ir.statements(branch.body)
    )


def render_framework_module(source: str, ops: list[ir.OpCode], printer_class, op_context, template: str,
                            target: str, framework_modules: tuple[str, ...]) -> str:
    """The module of a framework target that leaves out the ops it cannot express (JAX's,
    PyTorch's): each op's context from `op_context(op, printer)` with a printer of its own (what
    an op left out printed is not imported), the others named in `UNAVAILABLE` with the reason."""
    contexts, unavailable = [], {}
    for op in ops:
        printer = printer_class()
        try:
            contexts.append((op_context(op, printer), printer))
        except LoweringError as exc:
            unavailable[op.name] = exc.what
    imports = sorted({m for _, p in contexts for m in p.module_imports if m not in framework_modules})
    layout = environment().get_template(template)
    context = {"source": source, "ops": [c for c, _ in contexts], "unavailable": unavailable,
               "unavailable_literal": repr(dict(sorted(unavailable.items()))), "imports": imports}
    return render_with_helpers(layout, context, target, [p for _, p in contexts], printer_class)


def render_with_helpers(template, context: dict, target: str, printers, printer_class) -> str:
    """`template` rendered (and formatted) with `context` and what the module needs besides
    its ops: `runtime_import`, the import of the runtime helpers its code calls from the
    target's runtime module (`symgrad.runtime_module`), and `helpers`, a definition of each
    integer function it calls."""
    helpers = integer_function_sources(printers, printer_class)
    text = template.render(**context, runtime_import="", helpers=helpers)
    runtime = REGISTRY[target]
    names = sorted(_referred(text, runtime_helpers(runtime.backend.RUNTIME)))
    runtime_import = runtime_import_block(runtime.runtime_module, names) if names else ""
    text = format_module(template.render(**context, runtime_import=runtime_import, helpers=helpers))
    split = split_long_functions(text)
    return text if split is None else format_module(split)


def runtime_import_block(module: str, names: list[str]) -> str:
    """The import of `names` from the runtime module `module` (`templates/runtime_import.j2`):
    a generated module finds the one beside it inside a package, on `sys.path`, or loaded by
    its file path."""
    return environment().get_template("runtime_import.j2").render(module=module, names=names).rstrip("\n")


def integer_function_sources(printers, printer_class) -> str:
    """`def _<name>(...)` for each `integer_function` the `printers` printed a call of (and
    each those call), printed by `printer_class` as integer arithmetic, by name: of static
    values (`integer_definition`), or of arrays of positions (`array_definition`, a
    framework's own where attribute arithmetic is numpy's)."""
    static = {name: f for p in printers for name, f in p.integer_functions.items()}
    arrays = {name: f for p in printers for name, f in p.array_functions.items()}
    printer, sources = printer_class(), {}
    while set(static) - set(sources) or set(arrays) - set(sources):
        name = min((set(static) | set(arrays)) - set(sources))
        if name in static and name in arrays:
            raise LoweringError(f"integer function {name} is called both on arrays and on static values in one module")
        function = (static | arrays)[name]
        define = printer.array_definition if name in arrays else printer.integer_definition
        sources[name] = _integer_function_source(name, function, define(function.template))
        static.update(printer.integer_functions)
        arrays.update(printer.array_functions)
    return "\n\n".join(sources[name] for name in sorted(sources))


def _integer_function_source(name: str, function, body: str) -> str:
    doc = textwrap.fill(" ".join((function.__doc__ or f"{name}, as declared.").split()), LINE_LENGTH - 8,
                        subsequent_indent="    ")
    parameters = ", ".join(str(p) for p in function.parameters)
    return f'def _{name}({parameters}):\n    """{doc}"""\n    return {body}\n'


@functools.cache
def runtime_helpers(runtime: tuple[Path, ...]) -> dict[str, str]:
    """Each helper's name -> its source, in the order the files `runtime` (a backend's
    `RUNTIME`) define them; read once per process."""
    defined = {}
    for path in runtime:
        lines = path.read_text().splitlines()
        for node in ast.parse("\n".join(lines)).body:
            names = [node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else [
                t.id for t in getattr(node, "targets", ()) if isinstance(t, ast.Name)]
            for name in names:
                if name.startswith("_"):
                    defined[name] = "\n".join(lines[node.lineno - 1 : node.end_lineno]) + "\n"
    return defined


def _referred(source: str, names) -> set[str]:
    """Those of `names` that `source` (Python) reads."""
    return {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name) and n.id in names}


# --- per-op contexts -----------------------------------------------------------------------


def gradient_function(op: ir.OpCode, printer, positions: dict | None = None, forward: str | None = None) -> dict:
    """What the template's `gradient` macro reads: the signature, body and results of
    `<op>_grad` (of the gradient op's: `<op>_grad_grad`, whose forward, `<op>_grad`, returns
    a tuple, each output at `positions[output]`); outputs not given are computed again by
    `forward` (the op's function by default)."""
    attrs = attr_params(op)
    outputs = ", ".join(f"{o}=None" for o in op.outputs)
    call_attrs = "".join(f", {name}={name}" for name, _ in op.enumerated_attrs + op.numeric_attrs)
    forward = forward or op.func_name
    if forward in op.outputs:  # an output named like its op (Softmax's `softmax`) shadows it
        forward = f"globals()[{forward!r}]"
    calls = [
        (o, f"{o} = {forward}({', '.join(op.inputs)}{call_attrs})" + (f"[{positions[o]}]" if positions else _pick(op, o)))
        for o in op.outputs_used
    ]
    vjp = op.vjp
    requested = requested_only(vjp) if printer.computes_requested and not op.variadic else None
    needs = [f"needs_grad={(True,) * len(op.inputs)!r}"] if requested else []
    return {
        "name": op.name,
        "func_name": op.func_name,
        "inputs": ", ".join(op.inputs),
        **vjp_context(op, printer, requested or vjp),
        "grad_signature": signature(op.grads + op.inputs, [outputs] + stage_params(op) + attrs + needs),
        "output_calls": calls,
    }


def vjp_context(op: ir.OpCode, printer, vjp: ir.Function | None = None) -> dict:
    """The gradient function's body (of `vjp`, the op's by default), results, and what its
    docstring says after its first line (`gradient_doc`)."""
    printed: list[dict] = []
    body = print_function_body(vjp or op.vjp, printer, op, printed=printed)
    return {"vjp_body": body, "vjp_results": results_text(op.vjp.results), "vjp_doc": gradient_doc(op, printed)}


def staged_forward(op: ir.OpCode) -> dict:
    """What the templates' `staged_forward` macro reads besides the body: a signature taking
    `return_stages` where the gradient reads stages, and the stages returned."""
    return {
        "staged_signature": signature(op.inputs, attr_params(op) + (["return_stages=False"] if op.stages else [])),
        "stages_dict": "{" + ", ".join(f"{name!r}: {name}" for name in op.stages) + "}",
        "stages": op.stages,
        "stages_unset": stages_unset(op),
    }


def stage_params(op: ir.OpCode) -> list[str]:
    """Keyword parameters of the gradient for the forward stages it reads (None: recomputed)."""
    return [f"{name}=None" for name in op.stages]


def stages_unset(op: ir.OpCode, every: bool = False) -> str:
    """`a = b = None` for the stages some variant's forward does not compute (`every`: all
    stages), else ""."""
    assigned = [{s.target for s in ir.statements(b.body)} for b in op.forward.branches]
    unset = [name for name in op.stages if every or any(name not in targets for targets in assigned)]
    return " = ".join(unset + ["None"]) if unset else ""


def _pick(op: ir.OpCode, output: str) -> str:
    return "" if len(op.outputs) == 1 else f"[{op.outputs.index(output)}]"


def common_context(op: ir.OpCode, printer) -> dict:
    forward_results = ", ".join(op.forward.results)
    return {
        "name": op.name,
        "func_name": op.func_name,
        "doc": op.doc.rstrip("."),
        "location": op.location,
        "inputs": ", ".join(op.inputs),
        "outputs": ", ".join(op.outputs),
        "grads": ", ".join(op.grads),
        "forward_body": print_forward_body(op, printer),
        "forward_results": forward_results if len(op.outputs) == 1 else f"({forward_results})",
        "forward_arguments": forward_arguments(op),
    }


def forward_arguments(op: ir.OpCode) -> str:
    """The public function's call of the op's framework function: the forward's arguments."""
    return ", ".join(list(op.inputs) + [f"{a}={a}" for a, _ in op.enumerated_attrs + op.numeric_attrs])


def words(names) -> str:
    """"a", "a and b", "a, b and c": names in a docstring's sentence."""
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def attr_params(op: ir.OpCode) -> list[str]:
    params = [f"{name}={default!r}" for name, default in op.enumerated_attrs]
    params += [name if default is None else f"{name}={default!r}" for name, default in op.numeric_attrs]
    return params


def names_literal(names) -> str:
    """`names` as one string literal, "a b", as namedtuple takes field names: the runtime's
    factories of framework functions (`_custom_vjp`, `_autograd_function`) split it."""
    return f'"{" ".join(names)}"'


def outputs_literal(op: ir.OpCode) -> str:
    """The op's outputs for the runtime's factories, a list output's name starred as a list
    input's is."""
    return names_literal(f"*{o}" if op.list_output else o for o in op.outputs)


def signature(positional, keyword_only) -> str:
    keyword_only = [k for k in keyword_only if k]
    starred = any(p.startswith("*") for p in positional)  # `*inputs` ends the positionals
    marker = [] if starred or not keyword_only else ["*"]
    return ", ".join(list(positional) + marker + keyword_only)


def results_text(results) -> str:
    if results == ("grads",):  # a list input's gradients, packed per variant
        return "grads"
    return ", ".join("None" if r is None else r for r in results) + ("," if len(results) == 1 else "")


# --- function bodies -----------------------------------------------------------------------


def print_forward_body(op: ir.OpCode, printer, prologue: bool = True) -> str:
    """The op's forward, its selects unguarded: nothing differentiates it (a wrapper's backward
    is the derived gradient, which is passed the outputs), so the double where would only
    lengthen it."""
    printer.guards_branches, guards = False, printer.guards_branches
    try:
        return print_function_body(op.forward, printer, op, prologue)
    finally:
        printer.guards_branches = guards


def print_function_body(function: ir.Function, printer, op: ir.OpCode, prologue: bool = True,
                        printed: list | None = None) -> str:
    """The statements of `function`: its prologue (unless told not to), then an if/elif chain
    over its variants; `printed` gets, per variant, each variable -> the expression that
    defines it, as printed (`defining_values`)."""
    if not any(_body(branch, printer) for branch in function.branches):
        return ""  # no gradient: an op whose outputs are integers (ArgMax's)
    printer.dtype_source = function.params[0]  # an input or upstream gradient: the op's dtype
    printer.begin_function(op)
    lines = [print_statement(s, printer, op) for s in function.prologue] if prologue else []
    printed = [] if printed is None else printed
    if len(function.branches) == 1 and not function.branches[0].attr_values:
        printed.append({})
        lines += _shapes_checked(function.branches[0], op)
        lines += [line for s in _body(function.branches[0], printer) for line in _lines(s, printer, op, printed[-1])]
        return "\n".join(lines)
    branches, entries = [], []
    for branch in function.branches:
        printed.append({})
        statements = ["\n".join(_lines(s, printer, op, printed[-1])) for s in _body(branch, printer)]
        branches.append((branch.attr_values, statements))
        entries.append(tuple(_shapes_checked(branch, op)))
    names = ", ".join(f"{name}={{{name}!r}}" for name, _ in function.branches[0].attr_values)
    error = f'raise ValueError(f"{op.name}: unsupported attributes {names}")'
    return "\n".join(lines + dispatch.chain(branches, error, entries))


def _shapes_checked(branch: ir.Branch, op: ir.OpCode) -> list[str]:
    """The call of the runtime's `_check_shapes` on the inputs of a branch's `entry_shapes`
    (each as `(x, ..., "M", 3)`, as declared), or none where nothing would be checked: the
    same Python in every target."""
    declared = [s for s in branch.entry_shapes if s.sizes or not s.batched]
    axes = lambda shape: ("...",) * shape.batched + tuple(repr(size) for size in shape.sizes)
    arguments = ", ".join(f"{s.x}=({', '.join((s.x,) + axes(s))}{',' * (not axes(s))})" for s in declared)
    return [f"_check_shapes({op.name!r}, {arguments})"] if declared else []


def _body(branch: ir.Branch, printer) -> tuple:
    """A branch's statements as `printer`'s target takes them: guarded where its code is
    differentiated again (`guards_branches`)."""
    return branch.guarded_body if printer.guards_branches and branch.guarded_body is not None else branch.body


def _lines(statement, printer, op: ir.OpCode, printed: dict) -> list[str]:
    """A statement as lines; a recomputation guarded by the stages it computes, statements
    some gradients need by whether one of them is asked for (`needs_grad`)."""
    if isinstance(statement, ir.Unset):
        return [str(statement)]
    if isinstance(statement, ir.Requested):
        lines = ["if " + " or ".join(f"needs_grad[{k}]" for k in statement.grads) + ":"]
        return lines + ["    " + line for s in statement.body for line in _lines(s, printer, op, printed)]
    if not isinstance(statement, ir.Recompute):
        return [print_statement(statement, printer, op, printed)]
    lines = ["if " + " or ".join(f"{name} is None" for name in statement.stages) + ":"]
    lines += ["    " + print_statement(s, printer, op, printed) for s in statement.body]
    if statement.conj:  # the recomputed stages are of conjugated inputs: so are passed ones
        lines += ["else:"] + ["    " + print_statement(ir.Assign(n, ir.Conj(n)), printer, op) for n in statement.stages]
    return lines


def _described(value) -> str:
    """A SymPy expression as itself; any other value (an IR class) by its class too."""
    return str(value) if isinstance(value, sp.Basic) else f"{type(value).__name__} {value}"


def print_statement(statement: ir.Assign, printer, op: ir.OpCode, printed: dict | None = None) -> str:
    """`target = value` as the printer prints it; `printed[target]` the value, unless the
    statement updates the target (a conjugation, a sum to the input's shape)."""
    text = printer._print(statement.value)  # IR values dispatch to the printer's _print_<Class>
    if printer._not_supported:
        unsupported = ", ".join(sorted(_described(e) for e in printer._not_supported))
        raise LoweringError(f"the {printer.target} printer cannot print {unsupported}", op.name, op.location)
    printer.assigned(statement.target, statement.value)
    if printed is not None and statement.target not in ir.reads(statement.value):
        printed[statement.target] = text
    if isinstance(statement.value, ir.ScatterAdd) and statement.value.kind in ("add", "rows"):
        return f"{statement.target} = {text}  # no gather form: an explicit scatter-add"
    return f"{statement.target} = {text}"

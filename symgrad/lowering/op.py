"""Lower one op's derivations to IR functions: one branch per attribute variant, never a Jacobian.

An elementwise op's branches are lowered by `elementwise` (shared elementwise statements,
summed back to each input's shape); tensor values by `TensorLowering` with the table of `rules`.
"""

from __future__ import annotations

import dataclasses

import sympy as sp

from symgrad.declare import BATCH_DIM
from symgrad.derivation import Derivation
from symgrad.ir import (
    AsTuple,
    IntArray,
    Length,
    NegativeAxes,
    NegativeAxis,
    reads,
    statements,
    Assign,
    ScatterAdd,
    Branch,
    DeclaredShape,
    Elementwise,
    Function,
    OpCode,
    Rank,
    SumToShape,
)
from symgrad.functions import as_dtype, like_dtype, promoted
from symgrad.lowering.conjugation import conjugations
from symgrad.lowering.conventions import conventions
from symgrad.lowering.elementwise import lower_elementwise_forward, lower_elementwise_vjp
from symgrad.lowering.shared import share_across_statements, share_within_statements, without_idle_temporaries
from symgrad.lowering.signature import OpSignature
from symgrad.lowering.staged import lower_stage_grads, stages_accepted, stages_passed
from symgrad.lowering.tensor import TensorLowering, viewed
from symgrad.validate import index_symbols


def lower_op(op: OpSignature, derivations: list[Derivation]) -> OpCode:
    """All variants of one op -> its forward and vector-Jacobian-product functions."""
    first = derivations[0]
    list_output = first.variant.outputs[0].list_name
    outputs = (list_output,) if list_output else tuple(o.name for o in first.variant.outputs)
    grads = (f"grad_{list_output}",) if list_output else first.grad_names
    inputs = _params(op, first)
    axes = tuple(_normalized_attr(op, a) for a in op.attrs if _normalized_attr(op, a) is not None)
    forward = Function(
        params=inputs,
        prologue=axes,
        branches=tuple(_entry_checked(op, d, _cast_outputs(op, _unpacked(op, d, _lower_forward(op, d)))) for d in derivations),
        results=outputs,
    )
    vjp, used = _vjp_function(op, derivations, grads + inputs + outputs, axes)
    return OpCode(
        name=op.name,
        func_name=op.func_name,
        doc=op.doc,
        inputs=inputs,
        outputs=outputs,
        grads=grads,
        enumerated_attrs=tuple((a.name, a.default) for a in op.parameter_attrs),
        numeric_attrs=tuple((a.name, a.default) for a in op.numeric_attrs),
        const_inputs=tuple((a.name, a.input_position) for a in op.attrs if a.input_position is not None),
        stored_names=tuple((a.name, a.stored_name) for a in op.attrs if a.stored_name != a.name),
        forward=forward,
        vjp=vjp,
        outputs_used=used,
        location=str(op.location),
        variadic=op.variadic is not None,
        list_inputs=tuple(a.name for a in op.numeric_attrs if a.is_list_input),
        list_output=list_output is not None,
        stages=stages_accepted(vjp.branches),
        complex_ok=op.complex_ok or any(kind != "real" for _, kind in op.output_dtypes),
        conventions=conventions(op, first.variant),
    )


def _vjp_function(op: OpSignature, derivations: list[Derivation], params: tuple, axes: tuple) -> tuple:
    """The vector-Jacobian-product function, and the outputs it reads."""
    first = derivations[0]
    list_output = first.variant.outputs[0].list_name
    outputs = (list_output,) if list_output else tuple(o.name for o in first.variant.outputs)
    branches = tuple(_unpacked(op, d, _lower_vjp(op, d)) for d in derivations)
    read = _names_read(branches)
    if list_output and any(o.name in read for d in derivations for o in d.variant.outputs):
        read.add(list_output)
        branches = tuple(_outputs_unpacked(d, b) for d, b in zip(derivations, branches))
    used = tuple(o for o in outputs if o in read)
    # conjugate only what the gradient reads: Exp's gradient never touches x
    integer = {t.name for d in derivations for t in d.variant.inputs if t.integer}
    inputs = _params(op, first)
    conj, branches = conjugations(tuple(n for n in inputs + used if n in read and n not in integer), branches) if op.complex_ok else ((), branches)
    conj += _promoted_upstream(op, first, derivations[0].grad_names)
    results = ("grads",) if op.variadic else _some_grad_names(derivations)
    if op.cast_grads:
        branches = tuple(_cast_to_input_dtypes(d, b) for d, b in zip(derivations, branches))
    if not op.variadic:
        branches = tuple(_no_gradient_set(d, b, results) for d, b in zip(derivations, branches))
    return Function(params=params, prologue=axes + conj, branches=branches, results=results), used


def _promoted_upstream(op: OpSignature, derivation: Derivation, grads: tuple) -> tuple:
    """The upstream gradient of each output not complex, of an op whose inputs may be, in
    their complex dtype where they are (`promoted`): TensorFlow multiplies no real tensor
    by a complex one."""
    if not (op.cast_grads and op.complex_ok):
        return ()
    like = next(t.name for t in derivation.variant.inputs if not t.integer)
    kinds = dict(op.output_dtypes)
    return tuple(
        Assign(g, Elementwise(promoted(sp.Symbol(g), sp.Symbol(like))))
        for g, out in zip(grads, derivation.variant.outputs)
        if kinds.get(out.name) not in ("complex", None)
    )


def _entry_checked(op: OpSignature, derivation: Derivation, branch: Branch) -> Branch:
    """A tensor op's forward, checking first that its inputs have the shapes declared (an
    elementwise op's broadcast, and a list input's tensors are unpacked in the branch)."""
    if op.elementwise:
        return branch
    params = set(_params(op, derivation))
    shapes = tuple(_declared_shape(op, t) for t in derivation.variant.inputs if t.name in params)
    return dataclasses.replace(branch, entry_shapes=shapes)


def _declared_shape(op: OpSignature, tensor) -> DeclaredShape:
    """The shape `tensor`'s declaration gives: a dim by its name, a size as an int; a product
    of sizes (a group of axes), an attribute or an expression is not checked."""
    sizes = tuple(tensor.merged_shape)
    batched = bool(sizes) and sizes[0] == BATCH_DIM
    attrs = {a.name for a in op.numeric_attrs}

    def declared(size):
        if isinstance(size, sp.Integer):
            return int(size)
        return size.name if isinstance(size, sp.Symbol) and size.name not in attrs else None

    return DeclaredShape(tensor.name, tuple(map(declared, sizes[batched:])), batched)


def _cast_to_input_dtypes(derivation: Derivation, branch: Branch) -> Branch:
    """Each gradient in its input's dtype (`like_dtype`): the real part for a real input."""
    casts = tuple(
        Assign(f"grad_{t.name}", Elementwise(like_dtype(sp.Symbol(f"grad_{t.name}"), sp.Symbol(t.name))))
        for t in derivation.variant.inputs
        if derivation.vjp[t.name] is not None
    )
    guarded = branch.guarded_body + casts if branch.guarded_body is not None else None
    return dataclasses.replace(branch, body=branch.body + casts, guarded_body=guarded)


def _cast_outputs(op: OpSignature, branch: Branch) -> Branch:
    """Each output of a `DType()` attribute's dtype cast to it (`as_dtype`)."""
    attrs = {a.name for a in op.attrs if a.is_dtype}
    casts = tuple(
        Assign(out, Elementwise(as_dtype(sp.Symbol(out), sp.Symbol(kind)))) for out, kind in op.output_dtypes if kind in attrs
    )
    return dataclasses.replace(branch, body=branch.body + casts) if casts else branch


def _params(op: OpSignature, derivation: Derivation) -> tuple[str, ...]:
    """The functions' input parameters, a list input's tensors as one (a gradient op's
    upstream gradients come before its op's list input; a list output's before the inputs)."""
    names = [t.name for t in derivation.variant.inputs]
    if not op.variadic:
        return tuple(names)
    first = next(k for k, n in enumerate(names) if _in_list(op, n))
    rest = [n for n in names[first:] if not _in_list(op, n)]
    # last, the list is `*<list>`; before other inputs (a list output's upstream gradients,
    # in its gradient op), one sequence
    return tuple(names[:first]) + (op.variadic if rest else f"*{op.variadic}",) + tuple(rest)


def _in_list(op: OpSignature, name: str) -> bool:
    return name.startswith(f"{op.variadic}_") and name[len(op.variadic) + 1 :].isdigit()


def _normalized_attr(op: OpSignature, attr) -> Assign | None:
    """The statement that puts an attribute read from an input into the form it is declared
    in (an axis counted from the last, a tuple, an integer array, a rank, a list's length),
    or None."""
    if attr.rank_of:
        return Assign(attr.name, Rank(attr.rank_of, attr.size_axis))
    if attr.length_of:
        return Assign(attr.name, Length(attr.length_of))
    if attr.is_list_input:
        return Assign(attr.name, IntArray(attr.name))
    # a tuple of values read from an input, or a list of axes (Squeeze's, an attribute): a tuple
    listed = (attr.input_position is not None or attr.axis_of) and attr.enumerated and isinstance(attr.values[0], tuple)
    if attr.axis_of:
        # an axis of a list input's tensors: of the first, as all have one rank
        of = f"{attr.axis_of}[0]" if attr.axis_of == op.variadic else attr.axis_of
        if attr.axis_inserted:
            return Assign(attr.name, NegativeAxis(attr.name, of, inserted=True))
        return Assign(attr.name, (NegativeAxes if listed else NegativeAxis)(attr.name, of))
    return Assign(attr.name, AsTuple(attr.name)) if listed else None


def _some_grad_names(derivations: list[Derivation]) -> tuple[str | None, ...]:
    """Per input, its gradient's name where some variant has one (an input that some
    variants do not read, BatchNormWithGlobalNormalization's gamma unscaled), else None."""
    per_variant = [_grad_names(d) for d in derivations]
    return tuple(next((n for n in names if n), None) for names in zip(*per_variant))


def _no_gradient_set(derivation: Derivation, branch: Branch, results) -> Branch:
    """A variant's branch, with `grad_x = None` for each input x it has no gradient of
    though another variant has (the results are one tuple for all variants)."""
    missing = [r for r, own in zip(results, _grad_names(derivation)) if r and not own]
    body = tuple(Assign(name, Elementwise(sp.Symbol("None"))) for name in missing)
    return dataclasses.replace(branch, body=branch.body + body) if body else branch


def _grad_names(derivation: Derivation) -> tuple[str | None, ...]:
    return tuple(None if derivation.vjp[t.name] is None else f"grad_{t.name}" for t in derivation.variant.inputs)


def _unpacked(op: OpSignature, derivation: Derivation, branch: Branch) -> Branch:
    """For a list input: unpack it into this variant's tensors first; for a gradient, pack
    one gradient per tensor last (as `grads`). For a list output: pack its entries last in
    the forward; unpack its upstream gradients first in the gradient."""
    body = branch.body
    is_vjp = any(s.target.startswith("grad_") for s in statements(branch.body))
    list_output = derivation.variant.outputs[0].list_name
    if list_output and is_vjp:
        body = (_unpacking(derivation.grad_names, f"grad_{list_output}"),) + body
    elif list_output:
        entries = sp.Tuple(*(sp.Symbol(o.name) for o in derivation.variant.outputs))
        body += (Assign(list_output, Elementwise(entries)),)
    if op.variadic:
        body = (_unpacking([t.name for t in derivation.variant.inputs if _in_list(op, t.name)], op.variadic),) + body
        if is_vjp:
            results = [sp.Symbol(g or "None") for g in _grad_names(derivation)]
            body += (Assign("grads", Elementwise(sp.Tuple(*results))),)
    return dataclasses.replace(branch, body=body)


def _outputs_unpacked(derivation: Derivation, branch: Branch) -> Branch:
    """A gradient branch that reads a list output's entries: unpack them first."""
    names = [o.name for o in derivation.variant.outputs]
    body = (_unpacking(names, derivation.variant.outputs[0].list_name),) + branch.body
    return dataclasses.replace(branch, body=body)


def _unpacking(names, sequence: str) -> Assign:
    """`a, b = sequence` (`a, = sequence` for one name)."""
    return Assign(", ".join(names) + ("," if len(names) == 1 else ""), Elementwise(sp.Symbol(sequence)))


def _names_read(branches) -> set[str]:
    """Every variable whose values a statement of `branches` reads (not only its shape)."""
    names = set()
    for branch in branches:
        for statement in statements(branch.body):
            names |= reads(statement.value)
    return names


def _lower_forward(op: OpSignature, derivation: Derivation) -> Branch:
    if op.elementwise:
        return lower_elementwise_forward(op, derivation)
    lowering = TensorLowering(op, dim_sources(derivation.variant), derivation.ranges)
    views = _input_views(lowering, derivation.variant)
    forward = {name: viewed(value, views) for name, value in derivation.forward.items()}
    if derivation.staging:
        for stage in derivation.staging.stages:
            lowering.assign(stage.name, viewed(derivation.staging.values[stage.name], views))
    groups = {o.name: o.groups for o in derivation.variant.outputs}
    # an output that reads no input (all zeros) takes the dtype of the first real input
    dtype_of = next((t.name for t in derivation.variant.inputs if not t.integer), None)
    for name, value in forward.items():
        if groups[name]:
            lowering.assign_merged(name, value, groups[name])
        else:
            lowering.assign(name, value, dtype_of=dtype_of)
    share_within_statements(lowering)
    without_idle_temporaries(lowering)
    shared_across(lowering)
    return Branch(derivation.variant.attr_values, tuple(lowering.body), lowering.largest_rank)


def _lower_vjp(op: OpSignature, derivation: Derivation) -> Branch:
    if op.elementwise:
        return lower_elementwise_vjp(op, derivation)
    lowering = _lower_tensor_vjp(op, derivation)
    bound = rank_bound(derivation)
    return Branch(
        derivation.variant.attr_values,
        tuple(lowering.body),
        lowering.largest_rank,
        lowering.largest_term if lowering.largest_rank > bound else "",  # for the error only
        bound,
    )


def shared_across(lowering: TensorLowering) -> None:
    """What statements compute alike computed once (`share_across_statements`), again while
    that leaves repeats which, merged, share more (x - mean, once 1 / N is one temporary)."""
    for _ in lowering.body:
        if not share_across_statements(lowering):
            return
        without_idle_temporaries(lowering)


def rank_bound(derivation: Derivation) -> int:
    """The most axes a gradient's intermediate may have: those of the largest input, output
    or stage, plus one per window index (a summation index in a mapped subscript: a
    convolution reads its input in windows, im2col's size); more would be a Jacobian."""
    variant, staging = derivation.variant, derivation.staging
    values = [(o.indices, o.expr) for o in (staging.outputs + staging.stages if staging else variant.outputs)]
    windows = len(set().union(*(_window_indices(expr, indices) for indices, expr in values)))
    ranks = [len(t.shape) for t in variant.inputs] + [len(indices) for indices, _ in values]
    return max(ranks) + windows


def _window_indices(expr, indices) -> set:
    """The summation indices in mapped subscripts, and in the maps a Kronecker delta places
    an output index by (`delta(h, i*s + a - p)`: a transposed window)."""
    subscripts = [sub for entry in expr.atoms(sp.Indexed) for sub in entry.indices]
    subscripts += [arg for delta in expr.atoms(sp.KroneckerDelta) for arg in delta.args]
    found = set()
    for sub in subscripts:
        if not isinstance(sub, sp.Symbol) and not sub.is_Integer:
            found |= {s for s in index_symbols(sub) if s not in indices}
    return found


def _input_views(lowering: TensorLowering, variant) -> dict:
    """Each input with an axis declared as a group -> its split view (statements emitted)."""
    views = {}
    for t in variant.inputs:
        if t.groups:
            view = f"{t.name}_split"
            lowering.split_input(t.name, view, t.shape, t.groups)
            views[t.base] = sp.IndexedBase(view, shape=t.shape)
    for base, view in views.items():
        lowering.dims = {d: (str(view.label) if v == str(base.label) else v, axis) for d, (v, axis) in lowering.dims.items()}
    return views


def dim_sources(variant) -> dict:
    """Each dimension symbol -> (input, negative axis) whose size it is, first input first."""
    sources: dict = {}
    for t in variant.inputs:
        for n, dim in enumerate(t.shape):
            sources.setdefault(dim, (t.name, n - len(t.shape)))
    return sources


def _output_dim_sources(derivation: Derivation) -> dict:
    """Declared output axis sizes (a convolution's) -> (upstream gradient, negative axis)."""
    sources = {}
    for out, grad in zip(derivation.variant.outputs, derivation.grad_names):
        grouped = {out.indices[n] for first, count in out.groups for n in range(first, first + count)}
        for index, size in out.sizes:
            if index in grouped:  # read before the gradient's axis is split: not its own axis
                continue
            n = out.indices.index(index)
            sources.setdefault(size, (grad, n - len(out.indices)))
    return sources


def _lower_tensor_vjp(op: OpSignature, derivation: Derivation) -> TensorLowering:
    dims = {**_output_dim_sources(derivation), **dim_sources(derivation.variant)}
    lowering = TensorLowering(op, dims, derivation.ranges)
    views = _input_views(lowering, derivation.variant)
    vjp = {name: viewed(value, views) for name, value in derivation.vjp.items()}
    for out, grad in zip(derivation.variant.outputs, derivation.grad_names):
        if out.groups:
            lowering.split_upstream(grad, out.indices, out.groups)
    if derivation.staging:
        lower_stage_grads(lowering, derivation.staging, vjp, views, op.complex_ok)
    batched = [t.name for t in derivation.variant.inputs if t.shape and t.shape[0] == BATCH_DIM]
    grouped = {t.name: t.groups for t in derivation.variant.inputs if t.groups}
    for name, value in vjp.items():
        if value is None:
            continue
        if name in grouped:  # merged back into the input's own axes
            lowering.assign_merged(f"grad_{name}", value, grouped[name])
            continue
        lowering.assign(f"grad_{name}", value, like=name)
        _rows_of_positions_given(lowering, f"grad_{name}", {t.name for t in derivation.variant.inputs if t.integer})
        if name in batched and len(batched) > 1:  # batch axes broadcast between inputs
            grad = Elementwise(sp.Symbol(f"grad_{name}"))
            lowering.body.append(Assign(f"grad_{name}", SumToShape(grad, name)))
    share_within_statements(lowering)
    without_idle_temporaries(lowering)
    shared_across(lowering)
    lowering.body = stages_passed(lowering.body, op)
    return lowering


def _rows_of_positions_given(lowering, target: str, integer_inputs: set) -> None:
    """A gradient that is a scatter-add of rows at positions an input gives as they are (a
    gather's indices, in range as the forward requires): of kind "rows", which TensorFlow
    returns as an `IndexedSlices`, as its own gradient of a gather."""
    last = lowering.body[-1] if lowering.body else None
    if isinstance(last, Assign) and last.target == target and isinstance(last.value, ScatterAdd):
        if last.value.kind == "add" and last.value.positions in integer_inputs:
            lowering.body[-1] = Assign(target, dataclasses.replace(last.value, kind="rows"))

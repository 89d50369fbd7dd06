"""Instantiation: an op's declaration function run for one attribute variant, its tensors and
stages collected, its outputs checked and frozen into an `OpVariant`."""

from __future__ import annotations

import dataclasses
from typing import Any

import sympy as sp

from symgrad.declare import BATCH, collected_stages, collected_tensors, with_batch
from symgrad.declaration import ELEMENTWISE, Location, OpDecl, OpVariant, Output, TensorInput
from symgrad.errors import DeclarationError
from symgrad.integers import computed_position
from symgrad.validate import index_symbols


def instantiate(decl: OpDecl, attr_values: tuple[tuple[str, Any], ...]) -> OpVariant:
    """Run the declaration function for one attribute variant.

    Raises:
        DeclarationError: when the function raises or returns something malformed.
    """
    numeric = {a.name: a.value_in_declaration for a in decl.numeric_attrs}
    kwargs = {**dict(attr_values), **numeric}
    if decl.kind == ELEMENTWISE:
        return _instantiate_elementwise(decl, attr_values, kwargs)
    return _instantiate_index(decl, attr_values, kwargs)


def _instantiate_elementwise(decl, attr_values, kwargs) -> OpVariant:
    # complex values where conj, re, im, |.| and arg of them are declared (a Wirtinger op's)
    real = not (decl.wirtinger and decl.complex_ok)
    symbols = {name: sp.Symbol(name, real=True) if real or name in decl.boolean else sp.Symbol(name) for name in decl.inputs}
    result = _call(decl, {**symbols, **kwargs})
    exprs = result if isinstance(result, (tuple, list)) else (result,)
    if len(exprs) != len(decl.output_names):
        raise DeclarationError(
            f"declares outputs {decl.output_names} but returned {len(exprs)} expression(s)",
            decl.name,
            decl.location,
        )
    outputs = tuple(
        Output(name, (), _as_expr(decl, e)) for name, e in zip(decl.output_names, exprs)
    )
    inputs = tuple(
        TensorInput(name, symbols[name], integer=name in decl.boolean, boolean=name in decl.boolean)
        for name in decl.inputs
    )
    return OpVariant(decl, attr_values, inputs, outputs)


def _instantiate_index(decl, attr_values, kwargs) -> OpVariant:
    token, stages_token = collected_tensors.set([]), collected_stages.set([])
    try:
        result = _call(decl, kwargs)
        inputs = tuple(collected_tensors.get())
        # a stage's subscripts are kept as the outputs' are (`_as_expr`)
        stages = tuple(dataclasses.replace(s, expr=computed_positions(s.expr)) for s in collected_stages.get())
    finally:
        collected_tensors.reset(token)
        collected_stages.reset(stages_token)
    _check_list_input(decl, attr_values, inputs)
    if not isinstance(result, dict) or not result:
        raise DeclarationError(
            f"must return {{output_name: (indices, expression)}}, got {type(result).__name__}",
            decl.name,
            decl.location,
        )
    outputs = []
    for out_name, value, list_name in _list_outputs_flattened(decl, result):
        if not (isinstance(value, tuple) and len(value) == 2):
            raise DeclarationError(
                f"output {out_name!r} must be (indices, expression), got {value!r}",
                decl.name,
                decl.location,
            )
        idx, expr = value
        expr = _tied_entries_read(inputs, sp.sympify(expr))
        idx, sizes, groups = _sized(decl, out_name, with_batch(idx))
        outputs.append(Output(out_name, idx, _as_expr(decl, expr), sizes, groups, list_name))
    return _triangles_named_apart(OpVariant(decl, attr_values, inputs, tuple(outputs), stages))


def _triangles_named_apart(variant: OpVariant) -> OpVariant:
    """Each Sum over a range that depends on another index (`(j, 0, i)`: a causal sum) whose
    index also names an axis elsewhere in the op (a stage's `j`, 0..T-1, or another Sum's)
    gets a name of its own: a summation index is bound to its Sum, and an index has one range
    in an op."""
    parts = variant.outputs + variant.stages
    bound = [lim[0] for o in parts for e in o.expr.atoms(sp.Sum) for lim in e.limits]
    named = {i for o in parts for i in o.indices if isinstance(i, sp.Symbol)}
    named |= {k for k in bound if bound.count(k) > 1}
    taken = named | set(bound) | {s for o in parts for s in o.expr.free_symbols}

    def apart(total: sp.Sum) -> sp.Sum:
        function, limits = total.function, []
        for k, low, high in total.limits:
            if k in named and index_symbols(sp.sympify(low)) | index_symbols(sp.sympify(high)):
                n = next(n for n in range(1, 1000) if sp.Symbol(f"{k}{n}", **k.assumptions0) not in taken)
                own = sp.Symbol(f"{k}{n}", **k.assumptions0)
                taken.add(own)
                function, k = function.xreplace({k: own}), own
            limits.append((k, low, high))
        return sp.Sum(function, *limits)

    def renamed(outputs):
        return tuple(dataclasses.replace(o, expr=o.expr.replace(lambda e: isinstance(e, sp.Sum), apart)) for o in outputs)

    return dataclasses.replace(variant, outputs=renamed(variant.outputs), stages=renamed(variant.stages))


def _tied_entries_read(inputs, expr):
    """`expr` reading each `tensor(..., equals=(indices, value))` input's entry where it has
    `value` (a window's maximum read back from MaxPoolGrad's `orig_output`)."""
    tied = {t.equals[1]: t.base[t.equals[0]] for t in inputs if t.equals is not None}
    return expr.xreplace(tied) if tied else expr


def _check_list_input(decl: OpDecl, attr_values, inputs) -> None:
    """A list input's tensors are the op's only ones, `<list>_0`, `<list>_1`, ... in order, as
    many as an attribute `attr(..., LengthOf(<list>))` says."""
    if decl.variadic is None:
        return
    names = [t.name for t in inputs]
    if names != [f"{decl.variadic}_{k}" for k in range(len(names))]:
        raise DeclarationError(
            f"the tensors of list input {decl.variadic!r} are {decl.variadic}_0, "
            f"{decl.variadic}_1, ... and the op's only tensor inputs, got {names}",
            decl.name,
            decl.location,
        )
    for attr in decl.attrs:
        if attr.length_of is not None and dict(attr_values)[attr.name] != len(names):
            raise DeclarationError(
                f"{attr.name}={dict(attr_values)[attr.name]} is the length of {attr.length_of!r}, "
                f"but {len(names)} tensor(s) were declared",
                decl.name,
                decl.location,
            )


def _list_outputs_flattened(decl: OpDecl, result: dict) -> list[tuple]:
    """(name, value, list output or None) per output: a list output `output` as `output_0`,
    `output_1`, ..., each naming `output`."""
    lists = [name for name, value in result.items() if isinstance(value, list)]
    if lists and len(result) > 1:
        raise DeclarationError(
            f"a list output must be the op's only output, got outputs {list(result)}",
            decl.name,
            decl.location,
        )
    if lists and not result[lists[0]]:
        raise DeclarationError(f"list output {lists[0]!r} is empty", decl.name, decl.location)
    if lists:
        return [(f"{lists[0]}_{k}", value, lists[0]) for k, value in enumerate(result[lists[0]])]
    return [(name, value, None) for name, value in result.items()]


def _sized(decl: OpDecl, out_name: str, idx: tuple) -> tuple[tuple, tuple, tuple]:
    """Output indices, some given as `(index, size)` (an output axis no input has, such as a
    convolution's), some as a group `(c, (m, M))`: one axis enumerating several indices,
    row-major (DepthwiseConv2dNative's channel `c*M + m`).
    Returns (the indices, ((index, size), ...), ((first position, count) per group))."""
    plain, sizes, groups = [], [], []
    for item in idx:
        members = item if _is_group(item) else None
        if members is not None:
            if len(members) < 2 or BATCH in members:
                raise DeclarationError(
                    f"output {out_name!r}: an index group has two indices or more, none `...`, got {item!r}",
                    decl.name,
                    decl.location,
                )
            groups.append((len(plain), len(members)))
        for member in members if members is not None else (item,):
            if isinstance(member, tuple):
                if len(member) != 2 or not isinstance(member[0], sp.Symbol):
                    raise DeclarationError(
                        f"output {out_name!r}: an index with its size is (index, size), got {member!r}",
                        decl.name,
                        decl.location,
                    )
                sizes.append((member[0], sp.sympify(member[1])))
                member = member[0]
            plain.append(member)
    return tuple(plain), tuple(sizes), tuple(groups)


def _is_group(item) -> bool:
    """An index group: a tuple of indices and (index, size) pairs, not one (index, size)."""
    if not isinstance(item, tuple):
        return False
    is_index = lambda m: isinstance(m, sp.Symbol) and m.is_integer and m.is_positive is not True
    return len(item) > 2 or any(isinstance(m, tuple) for m in item) or (len(item) == 2 and is_index(item[1]))


def _call(decl: OpDecl, kwargs: dict):
    try:
        return decl.fn(**kwargs)
    except DeclarationError as exc:
        raise DeclarationError(exc.what, decl.name, _user_line(exc, decl)) from None
    except Exception as exc:  # the user's code failed: report it at their line
        raise DeclarationError(
            f"{type(exc).__name__}: {exc}", decl.name, _user_line(exc, decl)
        ) from None


def _user_line(exc: BaseException, decl: OpDecl) -> Location:
    """The innermost traceback line inside the op file, else the declaration's line."""
    line = decl.location.line
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == decl.location.file:
            line = tb.tb_lineno
        tb = tb.tb_next
    return Location(decl.location.file, line)


def _as_expr(decl: OpDecl, value) -> sp.Expr:
    try:
        return computed_positions(sp.sympify(value))
    except (sp.SympifyError, TypeError) as exc:
        raise DeclarationError(f"output is not a SymPy expression: {exc}", decl.name, decl.location)


def computed_positions(expr: sp.Expr) -> sp.Expr:
    """`expr` with each subscript that is neither affine in its indices nor an entry of an
    integer tensor kept whole, a `computed_position`: a gather, whose adjoint scatters."""

    def kept(entry: sp.Indexed) -> sp.Indexed:
        return sp.Indexed(entry.base, *(computed_position(s) if _computed(s) else s for s in entry.indices))

    return expr.replace(lambda e: isinstance(e, sp.Indexed) and any(map(_computed, e.indices)), kept)


def _computed(subscript) -> bool:
    """Neither an index, a number, an integer tensor's entry alone nor affine in its indices
    (an entry within arithmetic, a per-row length's `lengths[b] - 1 - t`, is computed)."""
    if subscript.is_Symbol or subscript.is_Integer or isinstance(subscript, (sp.Indexed, computed_position)):
        return False
    if subscript.atoms(sp.Indexed):
        return True
    indices = index_symbols(subscript)
    for term in sp.Add.make_args(sp.expand(subscript)):
        varying = [f for f in sp.Mul.make_args(term) if f.free_symbols & indices]
        if len(varying) > 1 or (varying and varying[0] not in indices):
            return True
    return False

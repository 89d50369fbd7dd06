"""An op's namesakes (`symgrad.namesakes`) made IR (`ir.Convention`): the sizes a wrapper
needs found in the inputs' declared shapes, where the wrapper can read them (`q.shape[-2]`).

Axes are counted from the end, so that leading batch axes (`...`) do not move them."""

from __future__ import annotations

import sympy as sp

from symgrad.declare import BATCH_DIM
from symgrad.errors import DeclarationError
from symgrad.ir import Convention


def conventions(op, variant) -> tuple[Convention, ...]:
    """The op's `Convention` per namesake (`op.namesakes`), from one variant's inputs and
    outputs.

    Raises:
        DeclarationError: a namesake names an input the op lacks, a causal mask whose sizes no
            other input has, or a scale over a dim no input has.
    """
    return tuple(_convention(op, variant, framework, namesake) for framework, namesake in op.namesakes)


def _convention(op, variant, framework: str, namesake) -> Convention:
    shapes = {t.name: tuple(t.merged_shape or ()) for t in variant.inputs}
    fail = lambda what: DeclarationError(f"the {framework} namesake's {what}", op.name, op.location)
    mask_sizes, factor = (), None
    if namesake.causal_mask is not None:
        if namesake.causal_mask != variant.inputs[-1].name:
            raise fail(f"causal_mask {namesake.causal_mask!r} is not the op's last input (it may be left out)")
        mask = shapes.get(namesake.causal_mask)
        if mask is None or len(mask) < 2:
            raise fail(f"causal_mask {namesake.causal_mask!r} is no input of two axes or more")
        mask_sizes = tuple(_where(dim, shapes, namesake.causal_mask, fail) for dim in mask[-2:])
    if namesake.scaled is not None:
        scaled, scale = namesake.scaled
        if scaled not in shapes:
            raise fail(f"scaled input {scaled!r} is no input of the op")
        scale = sp.sympify(scale)
        factor = scale.xreplace({dim: _size_symbol(*_where(dim, shapes, None, fail)) for dim in scale.free_symbols})
    return Convention(
        framework=framework,
        call=namesake.call,
        keywords=tuple(namesake.keywords.items()),
        defaults=tuple(namesake.defaults.items()),
        causal_mask=namesake.causal_mask,
        mask_sizes=mask_sizes,
        scaled=namesake.scaled[0] if namesake.scaled else None,
        factor=factor,
        **(_batched(variant) if namesake.batch_axes else {}),
    )


def _where(dim, shapes: dict, besides: str | None, fail) -> tuple[str, int]:
    """(input, axis from the end) of the first input but `besides` whose shape has `dim`."""
    for name, shape in shapes.items():
        if name != besides and dim in shape:
            return name, shape.index(dim) - len(shape)
    raise fail(f"size {dim} is the size of no other input's axis")


def _size_symbol(name: str, axis: int) -> sp.Symbol:
    return sp.Symbol(f"{name}.shape[{axis}]", integer=True, positive=True)


def _batched(variant) -> dict:
    """`batch_inputs`: the inputs whose first axis is the first input's (a dim, not `...`),
    with their declared ranks; `batch_outputs`: the outputs whose first index reads that axis
    of one of them."""
    first = variant.inputs[0].merged_shape
    if not first or first[0] == BATCH_DIM:
        return {}
    inputs = tuple((t.name, len(t.merged_shape)) for t in variant.inputs if t.merged_shape and t.merged_shape[0] == first[0])
    batched = {name for name, _ in inputs}
    outputs = tuple(o.name for o in variant.outputs if o.indices and any(
        str(entry.base) in batched and entry.indices[0] == o.indices[0] for entry in o.expr.atoms(sp.Indexed)))
    return {"batch_inputs": inputs, "batch_outputs": outputs}

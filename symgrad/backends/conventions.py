"""An op's public function in the PyTorch and JAX modules (`layer_norm`, which applies the
op's `torch.autograd.Function` or `jax.custom_vjp`), following the conventions of the
function it stands for there (`ir.Convention`, from the op's `symgrad.namesakes.Namesake`):

    def layer_norm(x, scale, offset, *, eps=1e-05, epsilon=None):
        \"\"\"... Matches `torch.nn.functional.layer_norm(x, x.shape[-1:], scale, offset, eps)`;
        takes `eps` (default 1e-05) beside TensorFlow's `epsilon`.\"\"\"
        epsilon = eps if epsilon is None else epsilon
        return _layer_norm_autograd(x, scale, offset, epsilon=epsilon)

An op without a namesake in the framework keeps TensorFlow's signature. The forward, the vjp
and what verification calls keep TensorFlow's conventions either way; TensorFlow's names are
taken by the wrapper too, so `epsilon=` reads as it always did.
"""

from __future__ import annotations

from symgrad import ir
from symgrad.render import attr_params, forward_arguments, signature, words


def wrapper_context(op: ir.OpCode, framework: str, applies: str, printer) -> dict:
    """The template's `wrapper_signature`, `wrapper_body` (its lines, indented) and `matches`
    (a docstring sentence, or "") of the op's public function, which returns `applies(...)`."""
    convention = next((c for c in op.conventions if c.framework == framework), None)
    arguments = forward_arguments(op)
    if convention is None:
        return {"wrapper_signature": signature(op.inputs, attr_params(op)), "matches": "",
                "wrapper_body": f"    return {applies}({arguments})"}
    lines = _prologue(convention, printer) + _returned(op, convention, f"{applies}({arguments})")
    return {
        "wrapper_signature": _signature(op, convention),
        "wrapper_body": "\n".join(f"    {line}" for line in lines),
        "matches": _matches(op, convention),
    }


def _signature(op: ir.OpCode, convention: ir.Convention) -> str:
    keywords, defaults = dict(convention.keywords), dict(convention.defaults)
    positional = [f"{x}=None" if x == convention.causal_mask else x for x in op.inputs]
    keyword_only = []
    for name, default in op.enumerated_attrs + op.numeric_attrs:
        default = defaults.get(name, default)
        if name in keywords:
            keyword_only += [f"{keywords[name]}={default!r}", f"{name}=None"]
        else:
            keyword_only.append(name if default is None else f"{name}={default!r}")
    keyword_only += ["is_causal=False"] if convention.causal_mask else []
    keyword_only += ["scale=None"] if convention.scaled else []
    return signature(positional, keyword_only)


def _prologue(convention: ir.Convention, printer) -> list[str]:
    """The statements turning the namesake's arguments into the op's."""
    lines = [f"{name} = {keyword} if {name} is None else {name}" for name, keyword in convention.keywords]
    if convention.causal_mask:
        mask = convention.causal_mask
        rows, cols = (f"{x}.shape[{axis}]" for x, axis in convention.mask_sizes)
        like = convention.mask_sizes[0][0]
        lines.append(f"{mask} = _attention_mask({mask}, is_causal, {rows}, {cols}, {like})")
    if convention.scaled:
        x = convention.scaled
        lines += ["if scale is not None:  # in place of the op's own scale",
                  f"    {x} = {x} * float(scale / ({printer.print_static(convention.factor)}))"]
    inputs = convention.batch_inputs
    if inputs:
        names = ", ".join(n for n, _ in inputs) + ("," if len(inputs) == 1 else "")
        ranks = ", ".join(str(r) for _, r in inputs) + ("," if len(inputs) == 1 else "")
        lines.append(f"lead, ({names}) = _leading_flattened(({ranks}), {names})")
    return lines


def _returned(op: ir.OpCode, convention: ir.Convention, call: str) -> list[str]:
    """The return statement; with leading batch axes, each batched output given them back."""
    outputs = convention.batch_outputs
    if not convention.batch_inputs:
        return [f"return {call}"]
    restored = [f"_leading_restored(lead, {o})" if o in outputs else o for o in op.outputs]
    if len(op.outputs) == 1:
        return [f"{op.outputs[0]} = {call}", f"return {restored[0]}"]
    return [f"{', '.join(op.outputs)} = {call}", f"return {', '.join(restored)}"]


def _matches(op: ir.OpCode, convention: ir.Convention) -> str:
    """The docstring's sentence: the call the wrapper matches, and what it takes for it."""
    defaults = dict(op.enumerated_attrs + op.numeric_attrs) | dict(convention.defaults)
    takes = [f"`{keyword}` (default {defaults[name]!r}) beside TensorFlow's `{name}`"
             for name, keyword in convention.keywords]
    takes += [f"`{name}` defaulting to {default!r}" for name, default in convention.defaults
              if name not in dict(convention.keywords)]
    if convention.causal_mask:
        takes += [f"`{convention.causal_mask}` optional (an additive mask)", "`is_causal`"]
    if convention.scaled:
        takes.append("`scale` (None: the op's own)")
    if convention.batch_inputs:
        takes.append("any number of leading batch axes")
    said = f" It takes {words(takes)}." if takes else ""
    return f"Matches `{convention.call}`.{said}"


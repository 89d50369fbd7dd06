"""The helper generated PyTorch modules make each op's `torch.autograd.Function` with
(`_autograd_function`), and the helpers it calls, as real Python: part of the runtime module
generated modules import from, as `runtime.py`'s helpers are (`RUNTIME` names both files).
"""

from __future__ import annotations

import inspect

import torch


def _needed(grads, needed):
    """The gradients autograd asked for (`ctx.needs_input_grad`), None for the others."""
    return tuple(g if n else None for g, n in zip(grads, needed))


def _fresh(outputs, inputs):
    """`outputs`, any of them that is one of `inputs` (returned as it is) as a view of it:
    autograd cannot save an input that a Function returns."""
    fresh = lambda o: o.view_as(o) if any(o is x for x in inputs) else o
    return tuple(map(fresh, outputs)) if isinstance(outputs, tuple) else fresh(outputs)


def _views(stages):
    """The stages a Function returns, each a view of its own: a stage that is also an output
    (the same tensor) is marked non-differentiable apart from that output."""
    return tuple(None if s is None else s.view_as(s) for s in stages)


def _zeros_for(cotangent, shape, dtype, device):
    """`cotangent`, or zeros of an output's `shape`, `dtype` and `device` where it is None."""
    return torch.zeros(shape, dtype=dtype, device=device) if cotangent is None else cotangent


def _standin(shape, dtype, device):
    """A tensor of `shape`, `dtype` and `device` holding one element, broadcast: what a
    gradient that reads an input's shape alone is given in the input's place."""
    return torch.empty((), dtype=dtype, device=device).expand(shape)


def _kept(reads, needed):
    """What the requested gradients read (`reads`: each input's gradient's, "a b"), None
    where every gradient reads the same (`reads` not given): everything is kept."""
    if reads is None:
        return None
    return {name for x, n in zip(reads, needed) if n for name in reads[x].split()}


def _run_signature(forward, run) -> inspect.Signature:
    """`run(attrs, *inputs)`'s signature: (attrs, one parameter per input of `forward`), or
    `run`'s own where `forward` takes a list input (any number of tensors)."""
    parameters = inspect.signature(forward).parameters.values()
    if any(p.kind == p.VAR_POSITIONAL for p in parameters):
        return inspect.signature(run)
    only = inspect.Parameter.POSITIONAL_ONLY
    inputs = [p.replace(kind=only) for p in parameters if p.kind == p.POSITIONAL_OR_KEYWORD]
    first = "attrs" if all(p.name != "attrs" for p in inputs) else "attrs_"  # an input named attrs
    return inspect.Signature([inspect.Parameter(first, only), *inputs])


def _autograd_function(name, forward, vjp, outputs, read="", stages="", shapes_only="", reads=None):
    """`forward(*inputs, **attrs)` as a `torch.autograd.Function` (`_<name>Function`) whose
    backward is the derived `vjp(cotangents..., *inputs, **outputs read, **stages, **attrs)`:
    one gradient per input, None for inputs `ctx.needs_input_grad` does not ask for (a `vjp`
    taking `needs_grad` computes only those). Saved for it: the inputs but those in
    `shapes_only`, whose values it does not read (their shape, dtype and device are kept, and
    it is given a stand-in of one element), the outputs it reads (`read`) and the forward's
    `stages`, which it returns marked non-differentiable; twice differentiated, the backward
    computes the stages again from the inputs, differentiably. With `reads` (what each input's
    gradient reads, where they differ), only what the gradients asked for read is saved: an
    input no asked-for gradient reads is kept as its shape, an output or stage as None.
    Names are given as "a b", a list output's starred. Applied as `forward` is called."""
    outputs, read, stages, shapes_only = outputs.split(), read.split(), stages.split(), shapes_only.split()
    staged, list_output = len(stages), outputs[0].startswith("*")
    outputs = [name.lstrip("*") for name in outputs]
    takes_needs = "needs_grad" in inspect.signature(vjp).parameters
    names = [p.name for p in inspect.signature(forward).parameters.values() if p.kind == p.POSITIONAL_OR_KEYWORD]
    standins = [n for n, p in enumerate(names) if p in shapes_only]
    reads = None if reads is None else {x: reads.get(x, "") for x in names}

    def run(attrs, *inputs):
        if not stages:
            values = forward(*inputs, **attrs)
            return _fresh(tuple(values) if list_output else values, inputs)
        values, found = forward(*inputs, **attrs, return_stages=True)
        return *_fresh(values if len(outputs) > 1 else (values,), inputs), *_views(found.values())

    def setup_context(ctx, inputs, output):
        ctx.attrs, inputs = inputs[0], inputs[1:]
        output = output if isinstance(output, tuple) else (output,)
        values, found = output[: len(output) - staged], output[len(output) - staged :]
        given = values if list_output and read else [values[outputs.index(o)] for o in read]
        if stages:
            ctx.mark_non_differentiable(*(s for s in found if s is not None))
            # no zeros filled in for the stages' cotangents, which the backward drops (a
            # stage as big as attention's weights: a pass over it per call); an output's
            # cotangent autograd leaves out is made zeros in the backward instead
            ctx.set_materialize_grads(False)
            ctx.outputs_like = [(v.shape, v.dtype, v.device) for v in values]
        kept = _kept(reads, ctx.needs_input_grad[1:])
        if kept is not None:
            given = [v if o in kept else None for v, o in zip(given, read)]
            found = [v if s in kept else None for v, s in zip(found, stages)]
        shaped = [n for n, x in enumerate(names) if n in standins or (kept is not None and x not in kept)]
        ctx.standins = {n: (inputs[n].shape, inputs[n].dtype, inputs[n].device) for n in shaped}
        ctx.save_for_backward(*(x for n, x in enumerate(inputs) if n not in ctx.standins), *given, *found)

    def backward(ctx, *cotangents):
        saved, count = list(ctx.saved_tensors), len(ctx.needs_input_grad) - 1 - len(ctx.standins)
        inputs, given, found = saved[:count], saved[count : len(saved) - staged], saved[len(saved) - staged :]
        for n, meta in ctx.standins.items():
            inputs.insert(n, _standin(*meta))
        given = {outputs[0]: list(given)} if list_output and read else dict(zip(read, given))
        # twice differentiated: the stages computed again, differentiably, from the inputs
        found = {} if torch.is_grad_enabled() else dict(zip(stages, found))
        cotangents = cotangents[: len(cotangents) - staged]
        if stages:
            cotangents = [_zeros_for(c, *like) for c, like in zip(cotangents, ctx.outputs_like)]
        cotangents = [list(cotangents)] if list_output else cotangents
        needs = {"needs_grad": ctx.needs_input_grad[1:]} if takes_needs else {}
        grads = vjp(*cotangents, *inputs, **given, **found, **ctx.attrs, **needs)
        return None, *_needed(grads, ctx.needs_input_grad[1:])

    # `Function.apply` binds its arguments to `forward`'s signature on every call: computed
    # once here instead (`inspect.signature` reads `__signature__`), a third of a small op's
    # Python overhead. One parameter per input where the inputs are fixed: torch.compile, given
    # no input that requires grad, passes `forward` a ctx unless the arguments are as many as
    # its parameters
    run.__signature__ = _run_signature(forward, run)
    methods = {"forward": run, "setup_context": setup_context, "backward": backward}
    members = {k: staticmethod(m) for k, m in methods.items()}
    members["generate_vmap_rule"] = True  # torch.func.vmap, grad and jacrev run it as it is
    function = type(f"_{name}Function", (torch.autograd.Function,), members)

    def apply(*inputs, **attrs):
        result = function.apply(attrs, *inputs)
        if list_output:
            return list(result[: len(result) - staged])
        if not stages:
            return result
        return result[0] if len(outputs) == 1 else result[: len(outputs)]

    apply.function = function  # the class, as `torch.autograd.Function`'s are inspected
    return apply

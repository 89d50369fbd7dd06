def _custom_vjp(forward, vjp, outputs, stages=False):
    """`forward(*inputs, **attrs)` as a `jax.custom_vjp` function, the attributes static
    (`nondiff_argnums`), whose gradient is the derived `vjp(cotangents..., *inputs, **outputs,
    **stages, **attrs)`, given the forward's `outputs` (their names, "a b", a list's starred)
    and, with `stages`, its stages as residuals. JAX's cotangents of complex arrays are the
    conjugates of TensorFlow's, which `vjp` gives: `jax_vjp(ct) = conj(tensorflow_vjp(conj(ct)))`.
    """
    outputs = [name.lstrip("*") for name in outputs.split()]
    several = len(outputs) > 1

    def run(attrs, *inputs):
        return forward(*inputs, **attrs)

    def run_saving(attrs, *inputs):
        values, found = (
            forward(*inputs, **attrs, return_stages=True) if stages else (run(attrs, *inputs), {})
        )
        return values, (inputs, values, found)

    def gradient(attrs, saved, cotangent):
        inputs, values, found = saved
        given = dict(zip(outputs, values if several else (values,)))
        cotangents = [
            jax.tree_util.tree_map(_conj, c) for c in (cotangent if several else (cotangent,))
        ]
        grads = vjp(*cotangents, *inputs, **given, **found, **attrs)
        return tuple(None if g is None else _conj(g) for g in grads)

    function = jax.custom_vjp(run, nondiff_argnums=(0,))
    function.defvjp(run_saving, gradient)
    return lambda *inputs, **attrs: function(attrs, *inputs)

def _custom_vjp(forward, vjp, outputs, stages=False):
    """`forward(*inputs, **attrs)` as a `jax.custom_vjp` function, the attributes static
    (`nondiff_argnums`), whose gradient is the derived `vjp(cotangents..., *inputs, **outputs,
    **stages, **attrs)`, given the forward's `outputs` (their names, "a b", a list's starred)
    and, with `stages`, its stages as residuals. JAX's cotangents of complex arrays are the
    conjugates of TensorFlow's, which `vjp` gives: `jax_vjp(ct) = conj(tensorflow_vjp(conj(ct)))`.
    With symbolic zeros, a `vjp` taking `needs_grad` computes only the gradients of the inputs
    JAX differentiates (perturbed ones); a cotangent JAX left symbolic is zeros."""
    outputs = [name.lstrip("*") for name in outputs.split()]
    several = len(outputs) > 1
    takes_needs = "needs_grad" in inspect.signature(vjp).parameters

    def run(attrs, *inputs):
        return forward(*inputs, **attrs)

    def run_saving(attrs, *primals):
        inputs = tuple(p.value for p in primals)
        values, found = (
            forward(*inputs, **attrs, return_stages=True) if stages else (run(attrs, *inputs), {})
        )
        # which gradients are asked for, as pytree structure (None: not perturbed), which stays static
        asked = tuple(() if p.perturbed else None for p in primals)
        return values, (inputs, values, found, asked)

    def gradient(attrs, saved, cotangent):
        inputs, values, found, asked = saved
        given = dict(zip(outputs, values if several else (values,)))
        cotangents = [
            jax.tree_util.tree_map(_conj, _instantiated(c))
            for c in (cotangent if several else (cotangent,))
        ]
        needs = {"needs_grad": tuple(a is not None for a in asked)} if takes_needs else {}
        grads = vjp(*cotangents, *inputs, **given, **found, **attrs, **needs)
        return tuple(None if g is None else _conj(g) for g in grads)

    function = jax.custom_vjp(run, nondiff_argnums=(0,))
    function.defvjp(run_saving, gradient, symbolic_zeros=True)
    return lambda *inputs, **attrs: function(attrs, *inputs)

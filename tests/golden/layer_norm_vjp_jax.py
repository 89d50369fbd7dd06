def layer_norm_vjp(
    grad,
    x,
    scale,
    offset,
    *,
    y=None,
    sum1=None,
    affine1=None,
    epsilon=0.001,
    needs_grad=(True, True, True)
):
    """Gradient of LayerNorm: one array per input (x, scale, offset).

    In index notation, next to the code computing it:
        sum1[batch] = sum_{k_1} x[batch, k_1], i.e. `jnp.sum(x, axis=-1)`
        affine1[batch] = epsilon + sum_k (x[batch, k] - sum1[batch] / N)**2 / N
            i.e. `epsilon + t2 / t0`
        grad_x[batch, k] = grad[batch, k] * scale[k] / sqrt(affine1[batch])
            - sum_i grad[batch, i] * (x[batch, i] - sum1[batch] / N) * (x[batch, k] - sum1[batch] /
                N) * scale[i] / (N * affine1[batch]**(3/2))
            - sum_i grad[batch, i] * scale[i] / (N * sqrt(affine1[batch]))
            i.e. `(grad * scale - t10 * t13 * t8 / t3 - t6 * t8) / jnp.sqrt(t3)`
        grad_scale[i] = sum_batch grad[batch, i] * (x[batch, i] - sum1[batch] / N) /
            sqrt(affine1[batch]), i.e. `jnp.einsum("...,...a->a", t14, t11, optimize=True)`
        grad_offset[i] = sum_batch grad[batch, i]
            i.e. `jnp.sum(grad, axis=tuple(range(jnp.ndim(grad) - 1)))`
    """
    grad_x = grad_scale = grad_offset = None
    if needs_grad[0] or needs_grad[1]:
        if sum1 is None or affine1 is None:
            sum1 = jnp.sum(x, axis=-1)
            t0 = jnp.shape(x)[-1]
            t1 = sum1[..., None]
            t2 = jnp.sum((x - t1 / t0) ** 2, axis=-1)
            affine1 = epsilon + t2 / t0
    if needs_grad[0]:
        t3 = affine1[..., None]
    if needs_grad[0] or needs_grad[1]:
        t4 = jnp.shape(x)[-1]
    if needs_grad[0]:
        t5 = jnp.einsum("a,...a->...", scale, grad, optimize=True)
        t6 = t5[..., None]
    if needs_grad[0] or needs_grad[1]:
        t7 = sum1[..., None]
        t8 = 1 / t4
        t9 = -t7 * t8
        t10 = t9 + x
        t11 = grad * t10
    if needs_grad[0]:
        t12 = jnp.einsum("a,...a->...", scale, t11, optimize=True)
        t13 = t12[..., None]
        grad_x = (grad * scale - t10 * t13 * t8 / t3 - t6 * t8) / jnp.sqrt(t3)
    if needs_grad[1]:
        t14 = 1 / jnp.sqrt(affine1)
        grad_scale = jnp.einsum("...,...a->a", t14, t11, optimize=True)
    if needs_grad[2]:
        grad_offset = jnp.sum(grad, axis=tuple(range(jnp.ndim(grad) - 1)))
    return grad_x, grad_scale, grad_offset

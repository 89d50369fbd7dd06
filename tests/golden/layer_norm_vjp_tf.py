def layer_norm_vjp(grad, x, scale, offset, y, *, epsilon=0.001):
    """Gradient of LayerNorm (declared at ops/composed.py:19): one per input (x, scale, offset)."""
    sum1 = tf.reduce_sum(x, axis=-1)
    t0 = tf.cast(tf.shape(x)[-1], x.dtype)
    t1 = sum1[..., None]
    t2 = tf.reduce_sum((x - t1 / t0) ** 2, axis=-1)
    affine1 = epsilon + t2 / t0
    t3 = grad * (-x + t1 / t0)
    t4 = tf.einsum("a,...a->...", scale, t3)
    grad_affine1 = (1 / 2) * t4 / affine1 ** (3 / 2)
    t5 = affine1[..., None]
    t6 = tf.einsum("a,...a->...", scale, grad)
    t7 = t6[..., None]
    t8 = grad_affine1[..., None]
    t9 = tf.reduce_sum(x, axis=-1, keepdims=True)
    grad_x = (
        grad * scale / tf.math.sqrt(t5)
        + 2 * t8 * x / t0
        - t7 / (t0 * tf.math.sqrt(t5))
        - 2 * t8 * t9 / t0**2
    )
    t10 = 1 / tf.math.sqrt(affine1)
    t11 = grad * (x - t1 / t0)
    grad_scale = _einsum_over_batch("...,...a->a", t10, t11)
    grad_offset = tf.reduce_sum(grad, axis=tf.range(tf.rank(grad) - 1))
    return grad_x, grad_scale, grad_offset

def layer_norm_vjp(grad, x, scale, offset, y, *, epsilon=0.001, sum1=None, affine1=None):
    """Gradient of LayerNorm (declared at ops/composed.py:19): one per input (x, scale, offset)."""
    if sum1 is None or affine1 is None:
        sum1 = tf.reduce_sum(x, axis=-1)
        t0 = tf.cast(tf.shape(x)[-1], x.dtype)
        t1 = sum1[..., None]
        t2 = tf.reduce_sum((x - t1 / t0) ** 2, axis=-1)
        affine1 = epsilon + t2 / t0
    t3 = tf.cast(tf.shape(x)[-1], x.dtype)
    t4 = sum1[..., None]
    t5 = grad * (-x + t4 / t3)
    t6 = tf.einsum("a,...a->...", scale, t5)
    grad_affine1 = (1 / 2) * t6 / affine1 ** (3 / 2)
    t7 = affine1[..., None]
    t8 = tf.einsum("a,...a->...", scale, grad)
    t9 = t8[..., None]
    t10 = grad_affine1[..., None]
    t11 = tf.reduce_sum(x, axis=-1, keepdims=True)
    grad_x = (
        grad * scale / tf.math.sqrt(t7)
        - 2 * t10 * t11 / t3**2
        + 2 * t10 * x / t3
        - t9 / (t3 * tf.math.sqrt(t7))
    )
    t12 = 1 / tf.math.sqrt(affine1)
    t13 = grad * (x - t4 / t3)
    grad_scale = _einsum_over_batch("...,...a->a", t12, t13)
    grad_offset = tf.reduce_sum(grad, axis=tf.range(tf.rank(grad) - 1))
    return grad_x, grad_scale, grad_offset

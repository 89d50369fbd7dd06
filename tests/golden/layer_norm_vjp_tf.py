def layer_norm_vjp(grad, x, scale, offset, y, *, epsilon=0.001, sum1=None, affine1=None):
    """Gradient of LayerNorm: one per input (x, scale, offset).

    In index notation, next to the code computing it:
        sum1[batch] = sum_{k_1} x[batch, k_1], i.e. `tf.reduce_sum(x, axis=-1)`
        affine1[batch] = epsilon + sum_k (x[batch, k] - sum1[batch] / N)**2 / N
            i.e. `epsilon + t2 / t0`
        grad_x[batch, k] = grad[batch, k] * scale[k] / sqrt(affine1[batch])
            - sum_i grad[batch, i] * (x[batch, i] - sum1[batch] / N) * (x[batch, k] - sum1[batch] /
                N) * scale[i] / (N * affine1[batch]**(3/2))
            - sum_i grad[batch, i] * scale[i] / (N * sqrt(affine1[batch]))
            i.e. `(grad * scale - t10 * t13 * t8 / t3 - t6 * t8) / tf.math.sqrt(t3)`
        grad_scale[i] = sum_batch grad[batch, i] * (x[batch, i] - sum1[batch] / N) /
            sqrt(affine1[batch]), i.e. `_einsum_over_batch("...,...a->a", t14, t11)`
        grad_offset[i] = sum_batch grad[batch, i]
            i.e. `tf.reduce_sum(grad, axis=tf.range(tf.rank(grad) - 1))`
    """
    if sum1 is None or affine1 is None:
        sum1 = tf.reduce_sum(x, axis=-1)
        t0 = tf.cast(tf.shape(x)[-1], x.dtype)
        t1 = sum1[..., None]
        t2 = tf.reduce_sum((x - t1 / t0) ** 2, axis=-1)
        affine1 = epsilon + t2 / t0
    t3 = affine1[..., None]
    t4 = tf.cast(tf.shape(x)[-1], x.dtype)
    t5 = tf.einsum("a,...a->...", scale, grad)
    t6 = t5[..., None]
    t7 = sum1[..., None]
    t8 = 1 / t4
    t9 = -t7 * t8
    t10 = t9 + x
    t11 = grad * t10
    t12 = tf.einsum("a,...a->...", scale, t11)
    t13 = t12[..., None]
    grad_x = (grad * scale - t10 * t13 * t8 / t3 - t6 * t8) / tf.math.sqrt(t3)
    t14 = 1 / tf.math.sqrt(affine1)
    grad_scale = _einsum_over_batch("...,...a->a", t14, t11)
    grad_offset = tf.reduce_sum(grad, axis=tf.range(tf.rank(grad) - 1))
    return grad_x, grad_scale, grad_offset

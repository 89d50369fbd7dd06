def layer_norm_vjp(grad, x, scale, offset, y, *, epsilon=0.001, sum1=None, affine1=None):
    """Gradient of LayerNorm (declared at ops/composed.py:19): one per input (x, scale, offset).

    In index notation, next to the code computing it:
        sum1[batch] = sum_{k_1} x[batch, k_1], i.e. `tf.reduce_sum(x, axis=-1)`
        affine1[batch] = epsilon + sum_k (x[batch, k] - sum1[batch] / N)**2 / N
            i.e. `epsilon + t2 / t0`
        grad_affine1[batch] = -sum_i grad[batch, i] * (x[batch, i] - sum1[batch] / N) * scale[i] /
            (2 * affine1[batch]**(3/2)), i.e. `-1 / 2 * t6 / affine1 ** (3 / 2)`
        grad_x[batch, j] = grad[batch, j] * scale[j] / sqrt(affine1[batch])
            + 2 * grad_affine1[batch] * (x[batch, j] - sum1[batch] / N) / N
            - sum_i grad[batch, i] * scale[i] / (N * sqrt(affine1[batch]))
            - sum_k 2 * grad_affine1[batch] * (x[batch, k] - sum1[batch] / N) / N**2
            i.e. `grad * scale * t12 - t12 * t13 * t9 + t13 * t14 * (-t13 * t4 + x) - t14 * ...`
        grad_scale[i] = sum_batch grad[batch, i] * (x[batch, i] - sum1[batch] / N) /
            sqrt(affine1[batch]), i.e. `_einsum_over_batch("...,...a->a", t15, t5)`
        grad_offset[i] = sum_batch grad[batch, i]
            i.e. `tf.reduce_sum(grad, axis=tf.range(tf.rank(grad) - 1))`
    """
    if sum1 is None or affine1 is None:
        sum1 = tf.reduce_sum(x, axis=-1)
        t0 = tf.cast(tf.shape(x)[-1], x.dtype)
        t1 = sum1[..., None]
        t2 = tf.reduce_sum((x - t1 / t0) ** 2, axis=-1)
        affine1 = epsilon + t2 / t0
    t3 = tf.cast(tf.shape(x)[-1], x.dtype)
    t4 = sum1[..., None]
    t5 = grad * (x - t4 / t3)
    t6 = tf.einsum("a,...a->...", scale, t5)
    grad_affine1 = -1 / 2 * t6 / affine1 ** (3 / 2)
    t7 = affine1[..., None]
    t8 = tf.einsum("a,...a->...", scale, grad)
    t9 = t8[..., None]
    t10 = tf.reduce_sum(x, axis=-1, keepdims=True)
    t11 = grad_affine1[..., None]
    t12 = 1 / tf.math.sqrt(t7)
    t13 = 1 / t3
    t14 = 2 * t11
    grad_x = (
        grad * scale * t12 - t12 * t13 * t9 + t13 * t14 * (-t13 * t4 + x) - t14 * (t10 - t4) / t3**2
    )
    t15 = 1 / tf.math.sqrt(affine1)
    grad_scale = _einsum_over_batch("...,...a->a", t15, t5)
    grad_offset = tf.reduce_sum(grad, axis=tf.range(tf.rank(grad) - 1))
    return grad_x, grad_scale, grad_offset

def scaled_dot_product_attention_vjp(grad, q, k, v, mask, output, *, weights=None):
    """Gradient of ScaledDotProductAttention: one per input (q, k, v, mask).

    In index notation, next to the code computing it:
        scores[batch, i, j] = sum_d k[batch, j, d] * q[batch, i, d] / sqrt(D) + mask[batch, i, j]
            i.e. `mask + t1 * (1 / tf.math.sqrt(t0))`
        ext1[batch, i] = max_{l_1} scores[batch, i, l_1], i.e. `tf.reduce_max(scores, axis=-1)`
        sum1[batch, i] = sum_l exp(-ext1[batch, i] + scores[batch, i, l])
            i.e. `tf.reduce_sum(tf.math.exp(scores - t2), axis=-1)`
        weights[batch, i, j] = exp(-ext1[batch, i] + scores[batch, i, j]) / sum1[batch, i]
            i.e. `tf.math.exp(scores - t2) / t3`
        grad_weights[batch, i, j] = sum_e grad[batch, i, e] * v[batch, j, e]
            i.e. `tf.linalg.matmul(grad, v, transpose_b=True)`
        grad_scores[batch, i, l] = grad_weights[batch, i, l] * weights[batch, i, l]
            - sum_j grad_weights[batch, i, j] * weights[batch, i, j] * weights[batch, i, l]
            i.e. `weights * (grad_weights - t4)`
        grad_q[batch, i, d] = sum_j grad_scores[batch, i, j] * k[batch, j, d] / sqrt(D)
            i.e. `t6 * t7`
        grad_k[batch, j, d] = sum_i grad_scores[batch, i, j] * q[batch, i, d] / sqrt(D)
            i.e. `t7 * t8`
        grad_v[batch, j, e] = sum_i grad[batch, i, e] * weights[batch, i, j]
            i.e. `tf.linalg.matmul(weights, grad, transpose_a=True)`
        grad_mask[batch, i, j] = grad_scores[batch, i, j], i.e. `grad_scores`
    """
    if weights is None:
        t0 = tf.cast(tf.shape(q)[-1], q.dtype)
        t1 = tf.linalg.matmul(q, k, transpose_b=True)
        scores = mask + t1 * (1 / tf.math.sqrt(t0))
        ext1 = tf.reduce_max(scores, axis=-1)
        t2 = ext1[..., None]
        sum1 = tf.reduce_sum(tf.math.exp(scores - t2), axis=-1)
        t3 = sum1[..., None]
        weights = tf.math.exp(scores - t2) / t3
    grad_weights = tf.linalg.matmul(grad, v, transpose_b=True)
    t4 = tf.reduce_sum(grad_weights * weights, axis=-1, keepdims=True)
    grad_scores = weights * (grad_weights - t4)
    t5 = tf.cast(tf.shape(q)[-1], q.dtype)
    t6 = tf.linalg.matmul(grad_scores, k)
    t7 = 1 / tf.math.sqrt(t5)
    grad_q = t6 * t7
    grad_q = _sum_to_shape(grad_q, q)
    t8 = tf.linalg.matmul(grad_scores, q, transpose_a=True)
    grad_k = t7 * t8
    grad_k = _sum_to_shape(grad_k, k)
    grad_v = tf.linalg.matmul(weights, grad, transpose_a=True)
    grad_v = _sum_to_shape(grad_v, v)
    grad_mask = grad_scores
    grad_mask = _sum_to_shape(grad_mask, mask)
    return grad_q, grad_k, grad_v, grad_mask

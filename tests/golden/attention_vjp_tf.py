def scaled_dot_product_attention_vjp(grad, q, k, v, mask, output, *, weights=None):
    """Gradient of ScaledDotProductAttention (declared at ops/composed.py:70): one per input (q, k, v, mask)."""
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
    grad_q = t6 * (1 / tf.math.sqrt(t5))
    grad_q = _sum_to_shape(grad_q, q)
    t7 = tf.linalg.matmul(grad_scores, q, transpose_a=True)
    grad_k = t7 * (1 / tf.math.sqrt(t5))
    grad_k = _sum_to_shape(grad_k, k)
    grad_v = tf.linalg.matmul(weights, grad, transpose_a=True)
    grad_v = _sum_to_shape(grad_v, v)
    grad_mask = grad_scores
    grad_mask = _sum_to_shape(grad_mask, mask)
    return grad_q, grad_k, grad_v, grad_mask

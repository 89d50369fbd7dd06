def softmax_vjp(grad, logits, softmax):
    """Gradient of Softmax: one per input (logits).

    In index notation, next to the code computing it:
        ext1[batch] = max_l logits[batch, l]
        sum1[batch] = sum_k exp(-ext1[batch] + logits[batch, k])
        grad_logits[batch, k] = grad[batch, k] * softmax[batch, k]
            - sum_i grad[batch, i] * softmax[batch, i] * softmax[batch, k]
            i.e. `softmax * (grad - t0)`
    """
    t0 = tf.reduce_sum(grad * softmax, axis=-1, keepdims=True)
    grad_logits = softmax * (grad - t0)
    return (grad_logits,)

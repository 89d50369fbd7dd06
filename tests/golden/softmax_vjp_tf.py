def softmax_vjp(grad, logits, softmax):
    """Gradient of Softmax (declared at ops/nn.py:17): one per input (logits)."""
    t0 = tf.reduce_sum(grad * softmax, axis=-1, keepdims=True)
    grad_logits = softmax * (grad - t0)
    return (grad_logits,)

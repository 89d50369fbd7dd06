def softmax_grad(grad, logits, *, softmax=None):
    """Gradient of Softmax: one array per input (logits)."""
    if softmax is None:
        softmax = globals()["softmax"](logits)
    t0 = np.sum(grad * softmax, axis=-1, keepdims=True)
    grad_logits = softmax * (grad - t0)
    return (grad_logits,)

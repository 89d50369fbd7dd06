def softmax_vjp(grad, logits, *, softmax=None):
    """Gradient of Softmax: one array per input (logits)."""
    if softmax is None:
        softmax = softmax_forward(logits)
    t0 = torch.sum(grad * softmax, axis=-1, keepdims=True)
    grad_logits = softmax * (grad - t0)
    return (grad_logits,)

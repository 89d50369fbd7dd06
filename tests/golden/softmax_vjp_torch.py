def softmax_vjp(grad, logits, *, softmax=None):
    """Gradient of Softmax: one array per input (logits).

    In index notation, next to the code computing it:
        ext1[batch] = max_l logits[batch, l]
        sum1[batch] = sum_k exp(-ext1[batch] + logits[batch, k])
        grad_logits[batch, k] = grad[batch, k] * softmax[batch, k]
            - sum_i grad[batch, i] * softmax[batch, i] * softmax[batch, k]
            i.e. `torch._softmax_backward_data(grad, softmax, -1, softmax.dtype)`
    """
    if softmax is None:
        softmax = softmax_forward(logits)
    grad_logits = torch._softmax_backward_data(grad, softmax, -1, softmax.dtype)
    return (grad_logits,)

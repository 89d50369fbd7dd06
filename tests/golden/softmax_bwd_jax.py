def _softmax_bwd(saved, grad):
    (logits,), softmax = saved
    return softmax_vjp(grad, logits, softmax=softmax)

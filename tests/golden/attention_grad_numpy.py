def scaled_dot_product_attention_grad(grad, q, k, v, mask, *, output=None, weights=None):
    """Gradient of ScaledDotProductAttention: one array per input (q, k, v, mask)."""
    if weights is None:
        t0 = np.shape(q)[-1]
        t1 = q @ np.swapaxes(k, -1, -2)
        scores = mask + t1 * float(1 / np.sqrt(t0))
        ext1 = np.max(scores, axis=-1)
        t2 = ext1[..., None]
        sum1 = np.sum(np.exp(scores - t2), axis=-1)
        t3 = sum1[..., None]
        weights = np.exp(scores - t2) / t3
    grad_weights = grad @ np.swapaxes(v, -1, -2)
    t4 = np.sum(grad_weights * weights, axis=-1, keepdims=True)
    grad_scores = weights * (grad_weights - t4)
    t5 = np.shape(q)[-1]
    t6 = grad_scores @ k
    grad_q = t6 * float(1 / np.sqrt(t5))
    grad_q = _sum_to_shape(grad_q, np.shape(q))
    t7 = np.swapaxes(grad_scores, -1, -2) @ q
    grad_k = t7 * float(1 / np.sqrt(t5))
    grad_k = _sum_to_shape(grad_k, np.shape(k))
    grad_v = np.swapaxes(weights, -1, -2) @ grad
    grad_v = _sum_to_shape(grad_v, np.shape(v))
    grad_mask = grad_scores
    grad_mask = _sum_to_shape(grad_mask, np.shape(mask))
    return grad_q, grad_k, grad_v, grad_mask

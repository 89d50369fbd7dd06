def layer_norm_vjp(grad, x, scale, offset, *, y=None, sum1=None, affine1=None, epsilon=0.001):
    """Gradient of LayerNorm: one array per input (x, scale, offset).

    In index notation, next to the code computing it:
        sum1[batch] = sum_{k_1} x[batch, k_1], i.e. `torch.sum(x, axis=-1)`
        affine1[batch] = epsilon + sum_k (x[batch, k] - sum1[batch] / N)**2 / N
            i.e. `epsilon + t2 / t0`
        grad_affine1[batch] = -sum_i grad[batch, i] * (x[batch, i] - sum1[batch] / N) * scale[i] /
            (2 * affine1[batch]**(3/2)), i.e. `-1 / 2 * t8 / affine1 ** (3 / 2)`
        grad_x[batch, j] = grad[batch, j] * scale[j] / sqrt(affine1[batch])
            + 2 * grad_affine1[batch] * (x[batch, j] - sum1[batch] / N) / N
            - sum_i grad[batch, i] * scale[i] / (N * sqrt(affine1[batch]))
            - sum_k 2 * grad_affine1[batch] * (x[batch, k] - sum1[batch] / N) / N**2
            i.e. `grad * scale * t14 - t11 * t14 * t5 + t15 * t5 * t6 - t15 * (t12 - t4) / t3**2`
        grad_scale[i] = sum_batch grad[batch, i] * (x[batch, i] - sum1[batch] / N) /
            sqrt(affine1[batch]), i.e. `torch.einsum("...,...a->a", t16, t7)`
        grad_offset[i] = sum_batch grad[batch, i]
            i.e. `_over(torch.sum, grad, tuple(range(np.ndim(grad) - 1)))`
    """
    if sum1 is None or affine1 is None:
        sum1 = torch.sum(x, axis=-1)
        t0 = np.shape(x)[-1]
        t1 = sum1[..., None]
        t2 = torch.sum((x - t1 / t0) ** 2, axis=-1)
        affine1 = epsilon + t2 / t0
    t3 = np.shape(x)[-1]
    t4 = sum1[..., None]
    t5 = 1 / t3
    t6 = -t4 * t5 + x
    t7 = grad * t6
    t8 = torch.einsum("a,...a->...", scale, t7)
    grad_affine1 = -1 / 2 * t8 / affine1 ** (3 / 2)
    t9 = affine1[..., None]
    t10 = torch.einsum("a,...a->...", scale, grad)
    t11 = t10[..., None]
    t12 = torch.sum(x, axis=-1, keepdims=True)
    t13 = grad_affine1[..., None]
    t14 = 1 / torch.sqrt(t9)
    t15 = 2 * t13
    grad_x = grad * scale * t14 - t11 * t14 * t5 + t15 * t5 * t6 - t15 * (t12 - t4) / t3**2
    t16 = 1 / torch.sqrt(affine1)
    grad_scale = torch.einsum("...,...a->a", t16, t7)
    grad_offset = _over(torch.sum, grad, tuple(range(np.ndim(grad) - 1)))
    return grad_x, grad_scale, grad_offset

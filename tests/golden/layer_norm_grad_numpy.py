def layer_norm_grad(grad, x, scale, offset, *, y=None, sum1=None, affine1=None, epsilon=0.001):
    """Gradient of LayerNorm: one array per input (x, scale, offset).

    In index notation, next to the code computing it:
        sum1[batch] = sum_{k_1} x[batch, k_1], i.e. `np.sum(x, axis=-1)`
        affine1[batch] = epsilon + sum_k (x[batch, k] - sum1[batch] / N)**2 / N
            i.e. `epsilon + t2 / t0`
        grad_affine1[batch] = -sum_i grad[batch, i] * (x[batch, i] - sum1[batch] / N) * scale[i] /
            (2 * affine1[batch]**(3/2)), i.e. `-1 / 2 * t6 / affine1 ** (3 / 2)`
        grad_x[batch, j] = grad[batch, j] * scale[j] / sqrt(affine1[batch])
            + 2 * grad_affine1[batch] * (x[batch, j] - sum1[batch] / N) / N
            - sum_i grad[batch, i] * scale[i] / (N * sqrt(affine1[batch]))
            - sum_k 2 * grad_affine1[batch] * (x[batch, k] - sum1[batch] / N) / N**2
            i.e. `grad * scale * t12 - t12 * t13 * t9 + t13 * t14 * (-t13 * t4 + x) - t14 * ...`
        grad_scale[i] = sum_batch grad[batch, i] * (x[batch, i] - sum1[batch] / N) /
            sqrt(affine1[batch]), i.e. `np.einsum("...,...a->a", t15, t5, optimize=True)`
        grad_offset[i] = sum_batch grad[batch, i]
            i.e. `np.sum(grad, axis=tuple(range(np.ndim(grad) - 1)))`
    """
    if sum1 is None or affine1 is None:
        sum1 = np.sum(x, axis=-1)
        t0 = np.shape(x)[-1]
        t1 = sum1[..., None]
        t2 = np.sum((x - t1 / t0) ** 2, axis=-1)
        affine1 = epsilon + t2 / t0
    t3 = np.shape(x)[-1]
    t4 = sum1[..., None]
    t5 = grad * (x - t4 / t3)
    t6 = np.einsum("a,...a->...", scale, t5, optimize=True)
    grad_affine1 = -1 / 2 * t6 / affine1 ** (3 / 2)
    t7 = affine1[..., None]
    t8 = np.einsum("a,...a->...", scale, grad, optimize=True)
    t9 = t8[..., None]
    t10 = np.sum(x, axis=-1, keepdims=True)
    t11 = grad_affine1[..., None]
    t12 = 1 / np.sqrt(t7)
    t13 = 1 / t3
    t14 = 2 * t11
    grad_x = (
        grad * scale * t12 - t12 * t13 * t9 + t13 * t14 * (-t13 * t4 + x) - t14 * (t10 - t4) / t3**2
    )
    t15 = 1 / np.sqrt(affine1)
    grad_scale = np.einsum("...,...a->a", t15, t5, optimize=True)
    grad_offset = np.sum(grad, axis=tuple(range(np.ndim(grad) - 1)))
    return grad_x, grad_scale, grad_offset

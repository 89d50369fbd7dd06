def layer_norm_grad(grad, x, scale, offset, *, y=None, epsilon=0.001):
    """Gradient of LayerNorm: one array per input (x, scale, offset)."""
    sum1 = np.sum(x, axis=-1)
    t0 = np.shape(x)[-1]
    t1 = sum1[..., None]
    t2 = np.sum((x - t1 / t0) ** 2, axis=-1)
    affine1 = epsilon + t2 / t0
    t3 = grad * (-x + t1 / t0)
    t4 = np.einsum("a,...a->...", scale, t3, optimize=True)
    grad_affine1 = (1 / 2) * t4 / affine1 ** (3 / 2)
    t5 = affine1[..., None]
    t6 = np.einsum("a,...a->...", scale, grad, optimize=True)
    t7 = t6[..., None]
    t8 = grad_affine1[..., None]
    t9 = np.sum(x, axis=-1, keepdims=True)
    grad_x = (
        grad * scale / np.sqrt(t5) + 2 * t8 * x / t0 - t7 / (t0 * np.sqrt(t5)) - 2 * t8 * t9 / t0**2
    )
    t10 = 1 / np.sqrt(affine1)
    t11 = grad * (x - t1 / t0)
    grad_scale = np.einsum("...,...a->a", t10, t11, optimize=True)
    grad_offset = np.sum(grad, axis=tuple(range(np.ndim(grad) - 1)))
    return grad_x, grad_scale, grad_offset

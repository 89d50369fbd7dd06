def layer_norm_vjp(grad, x, scale, offset, *, y=None, sum1=None, affine1=None, epsilon=0.001):
    """Gradient of LayerNorm: one array per input (x, scale, offset)."""
    if sum1 is None or affine1 is None:
        sum1 = torch.sum(x, axis=-1)
        t0 = np.shape(x)[-1]
        t1 = sum1[..., None]
        t2 = torch.sum((x - t1 / t0) ** 2, axis=-1)
        affine1 = epsilon + t2 / t0
    t3 = np.shape(x)[-1]
    t4 = sum1[..., None]
    t5 = grad * (-x + t4 / t3)
    t6 = torch.einsum("a,...a->...", scale, t5)
    grad_affine1 = (1 / 2) * t6 / affine1 ** (3 / 2)
    t7 = affine1[..., None]
    t8 = torch.einsum("a,...a->...", scale, grad)
    t9 = t8[..., None]
    t10 = grad_affine1[..., None]
    t11 = torch.sum(x, axis=-1, keepdims=True)
    grad_x = (
        grad * scale / torch.sqrt(t7)
        - 2 * t10 * t11 / t3**2
        + 2 * t10 * x / t3
        - t9 / (t3 * torch.sqrt(t7))
    )
    t12 = 1 / torch.sqrt(affine1)
    t13 = grad * (x - t4 / t3)
    grad_scale = torch.einsum("...,...a->a", t12, t13)
    grad_offset = _over(torch.sum, grad, tuple(range(np.ndim(grad) - 1)))
    return grad_x, grad_scale, grad_offset

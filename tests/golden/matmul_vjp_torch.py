def matmul_vjp(grad, a, b, *, product=None, transpose_a=False, transpose_b=False):
    """Gradient of MatMul: one array per input (a, b)."""
    a = _conj(a)
    b = _conj(b)
    if not transpose_a and not transpose_b:
        grad_a = grad @ b.T
        grad_b = a.T @ grad
    elif not transpose_a and transpose_b:
        grad_a = grad @ b
        grad_b = grad.T @ a
    elif transpose_a and not transpose_b:
        grad_a = b @ grad.T
        grad_b = a @ grad
    elif transpose_a and transpose_b:
        grad_a = b.T @ grad.T
        grad_b = grad.T @ a.T
    else:
        raise ValueError(
            f"MatMul: unsupported attributes transpose_a={transpose_a!r}, transpose_b={transpose_b!r}"
        )
    return grad_a, grad_b

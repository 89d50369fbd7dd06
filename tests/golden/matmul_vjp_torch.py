def matmul_vjp(
    grad, a, b, *, product=None, transpose_a=False, transpose_b=False, needs_grad=(True, True)
):
    """Gradient of MatMul: one array per input (a, b).

    In index notation, next to the code computing it, per variant:
        transpose_a=False, transpose_b=False:
            grad_a[i, k] = sum_j grad[i, j] * conj(b[k, j]), i.e. `grad @ b.T`
            grad_b[k, j] = sum_i grad[i, j] * conj(a[i, k]), i.e. `a.T @ grad`
        transpose_a=False, transpose_b=True:
            grad_a[i, k] = sum_j grad[i, j] * conj(b[j, k]), i.e. `grad @ b`
            grad_b[j, k] = sum_i grad[i, j] * conj(a[i, k]), i.e. `grad.T @ a`
        transpose_a=True, transpose_b=False:
            grad_a[k, i] = sum_j grad[i, j] * conj(b[k, j]), i.e. `b @ grad.T`
            grad_b[k, j] = sum_i grad[i, j] * conj(a[k, i]), i.e. `a @ grad`
        transpose_a=True, transpose_b=True:
            grad_a[k, i] = sum_j grad[i, j] * conj(b[j, k]), i.e. `b.T @ grad.T`
            grad_b[j, k] = sum_i grad[i, j] * conj(a[k, i]), i.e. `grad.T @ a.T`
    """
    a = _conj(a)
    b = _conj(b)
    if not transpose_a and not transpose_b:
        grad_a = grad_b = None
        if needs_grad[0]:
            grad_a = grad @ b.T
        if needs_grad[1]:
            grad_b = a.T @ grad
    elif not transpose_a and transpose_b:
        grad_a = grad_b = None
        if needs_grad[0]:
            grad_a = grad @ b
        if needs_grad[1]:
            grad_b = grad.T @ a
    elif transpose_a and not transpose_b:
        grad_a = grad_b = None
        if needs_grad[0]:
            grad_a = b @ grad.T
        if needs_grad[1]:
            grad_b = a @ grad
    elif transpose_a and transpose_b:
        grad_a = grad_b = None
        if needs_grad[0]:
            grad_a = b.T @ grad.T
        if needs_grad[1]:
            grad_b = grad.T @ a.T
    else:
        raise ValueError(
            f"MatMul: unsupported attributes transpose_a={transpose_a!r}, transpose_b={transpose_b!r}"
        )
    return grad_a, grad_b

def batch_mat_mul_v2_grad(grad, x, y, *, output=None, adj_x=False, adj_y=False):
    """Gradient of BatchMatMulV2: one array per input (x, y).

    In index notation, next to the code computing it, per variant:
        adj_x=False, adj_y=False:
            grad_x[batch, i, k] = sum_j grad[batch, i, j] * conj(y[batch, k, j])
                i.e. `grad @ np.swapaxes(y, -1, -2)`
            grad_y[batch, k, j] = sum_i grad[batch, i, j] * conj(x[batch, i, k])
                i.e. `np.swapaxes(x, -1, -2) @ grad`
        adj_x=False, adj_y=True:
            grad_x[batch, i, k] = sum_j grad[batch, i, j] * y[batch, j, k], i.e. `grad @ y`
            grad_y[batch, j, k] = sum_i conj(grad[batch, i, j]) * x[batch, i, k]
                i.e. `np.swapaxes(t0, -1, -2) @ x`
        adj_x=True, adj_y=False:
            grad_x[batch, k, i] = sum_j conj(grad[batch, i, j]) * y[batch, k, j]
                i.e. `y @ np.swapaxes(t0, -1, -2)`
            grad_y[batch, k, j] = sum_i grad[batch, i, j] * x[batch, k, i], i.e. `x @ grad`
        adj_x=True, adj_y=True:
            grad_x[batch, k, i] = sum_j conj(grad[batch, i, j]) * conj(y[batch, j, k])
                i.e. `np.swapaxes(y, -1, -2) @ np.swapaxes(t0, -1, -2)`
            grad_y[batch, j, k] = sum_i conj(grad[batch, i, j]) * conj(x[batch, k, i])
                i.e. `np.swapaxes(t0, -1, -2) @ np.swapaxes(x, -1, -2)`
    """
    if not adj_x and not adj_y:
        x = _conj(x)
        y = _conj(y)
        grad_x = grad @ np.swapaxes(y, -1, -2)
        grad_y = np.swapaxes(x, -1, -2) @ grad
    elif not adj_x and adj_y:
        grad_x = grad @ y
        t0 = _conj(grad)
        grad_y = np.swapaxes(t0, -1, -2) @ x
    elif adj_x and not adj_y:
        t0 = _conj(grad)
        grad_x = y @ np.swapaxes(t0, -1, -2)
        grad_y = x @ grad
    elif adj_x and adj_y:
        x = _conj(x)
        y = _conj(y)
        t0 = _conj(grad)
        grad_x = np.swapaxes(y, -1, -2) @ np.swapaxes(t0, -1, -2)
        grad_y = np.swapaxes(t0, -1, -2) @ np.swapaxes(x, -1, -2)
    else:
        raise ValueError(f"BatchMatMulV2: unsupported attributes adj_x={adj_x!r}, adj_y={adj_y!r}")
    grad_x = _sum_to_shape(grad_x, np.shape(x))
    grad_y = _sum_to_shape(grad_y, np.shape(y))
    return grad_x, grad_y

def batch_mat_mul_v2_grad(grad, x, y, *, output=None, adj_x=False, adj_y=False):
    """Gradient of BatchMatMulV2: one array per input (x, y)."""
    if not adj_x and not adj_y:
        grad_x = grad @ np.swapaxes(y, -1, -2)
        grad_x = _sum_to_shape(grad_x, np.shape(x))
        grad_y = np.swapaxes(x, -1, -2) @ grad
        grad_y = _sum_to_shape(grad_y, np.shape(y))
    elif not adj_x and adj_y:
        grad_x = grad @ y
        grad_x = _sum_to_shape(grad_x, np.shape(x))
        grad_y = np.swapaxes(grad, -1, -2) @ x
        grad_y = _sum_to_shape(grad_y, np.shape(y))
    elif adj_x and not adj_y:
        grad_x = y @ np.swapaxes(grad, -1, -2)
        grad_x = _sum_to_shape(grad_x, np.shape(x))
        grad_y = x @ grad
        grad_y = _sum_to_shape(grad_y, np.shape(y))
    elif adj_x and adj_y:
        grad_x = np.swapaxes(y, -1, -2) @ np.swapaxes(grad, -1, -2)
        grad_x = _sum_to_shape(grad_x, np.shape(x))
        grad_y = np.swapaxes(grad, -1, -2) @ np.swapaxes(x, -1, -2)
        grad_y = _sum_to_shape(grad_y, np.shape(y))
    else:
        raise ValueError(f"BatchMatMulV2: unsupported attributes adj_x={adj_x!r}, adj_y={adj_y!r}")
    return grad_x, grad_y

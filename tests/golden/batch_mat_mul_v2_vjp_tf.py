def batch_mat_mul_v2_vjp(grad, x, y, output, *, adj_x=False, adj_y=False):
    """Gradient of BatchMatMulV2: one per input (x, y).

    In index notation, next to the code computing it, per variant:
        adj_x=False, adj_y=False:
            grad_x[batch, i, k] = sum_j grad[batch, i, j] * conj(y[batch, k, j])
                i.e. `tf.linalg.matmul(grad, y, transpose_b=True)`
            grad_y[batch, k, j] = sum_i grad[batch, i, j] * conj(x[batch, i, k])
                i.e. `tf.linalg.matmul(x, grad, transpose_a=True)`
        adj_x=False, adj_y=True:
            grad_x[batch, i, k] = sum_j grad[batch, i, j] * y[batch, j, k]
                i.e. `tf.linalg.matmul(grad, y)`
            grad_y[batch, j, k] = sum_i conj(grad[batch, i, j]) * x[batch, i, k]
                i.e. `tf.linalg.matmul(t0, x, transpose_a=True)`
        adj_x=True, adj_y=False:
            grad_x[batch, k, i] = sum_j conj(grad[batch, i, j]) * y[batch, k, j]
                i.e. `tf.linalg.matmul(y, t0, transpose_b=True)`
            grad_y[batch, k, j] = sum_i grad[batch, i, j] * x[batch, k, i]
                i.e. `tf.linalg.matmul(x, grad)`
        adj_x=True, adj_y=True:
            grad_x[batch, k, i] = sum_j conj(grad[batch, i, j]) * conj(y[batch, j, k])
                i.e. `tf.linalg.matmul(y, t0, transpose_a=True, transpose_b=True)`
            grad_y[batch, j, k] = sum_i conj(grad[batch, i, j]) * conj(x[batch, k, i])
                i.e. `tf.linalg.matmul(t0, x, transpose_a=True, transpose_b=True)`
    """
    if not adj_x and not adj_y:
        x = tf.math.conj(x)
        y = tf.math.conj(y)
        grad_x = tf.linalg.matmul(grad, y, transpose_b=True)
        grad_y = tf.linalg.matmul(x, grad, transpose_a=True)
    elif not adj_x and adj_y:
        grad_x = tf.linalg.matmul(grad, y)
        t0 = tf.math.conj(grad)
        grad_y = tf.linalg.matmul(t0, x, transpose_a=True)
    elif adj_x and not adj_y:
        t0 = tf.math.conj(grad)
        grad_x = tf.linalg.matmul(y, t0, transpose_b=True)
        grad_y = tf.linalg.matmul(x, grad)
    elif adj_x and adj_y:
        x = tf.math.conj(x)
        y = tf.math.conj(y)
        t0 = tf.math.conj(grad)
        grad_x = tf.linalg.matmul(y, t0, transpose_a=True, transpose_b=True)
        grad_y = tf.linalg.matmul(t0, x, transpose_a=True, transpose_b=True)
    else:
        raise ValueError(f"BatchMatMulV2: unsupported attributes adj_x={adj_x!r}, adj_y={adj_y!r}")
    grad_x = _sum_to_shape(grad_x, x)
    grad_y = _sum_to_shape(grad_y, y)
    return grad_x, grad_y

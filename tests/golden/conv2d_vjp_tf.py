def conv2d_vjp(
    grad,
    input,
    filter,
    output,
    *,
    padding="VALID",
    strides,
    explicit_paddings=(),
    dilations=(1, 1, 1, 1),
):
    """Gradient of Conv2D: one per input (input, filter).

    In index notation, next to the code computing it, for padding='VALID' (other values of padding
    change it):
        grad_input[i, j, k, l] = sum_{o, a, b} grad[i, exact_div(-a * dilations[1] + j, strides[1]),
            exact_div(-b * dilations[2] + k, strides[2]), o] * filter[a, b, l, o]
            i.e. `_conv_backprop_input(grad, filter, strides=[strides[1], strides[2]], ...`
        grad_filter[a, b, c, o] = sum_{n, i, j} grad[n, i, j, o] * input[n, a * dilations[1] + i *
            strides[1], b * dilations[2] + j * strides[2], c]
            i.e. `_conv_backprop_filter(input, grad, strides=[strides[1], strides[2]], ...`
    """
    if padding == "VALID":
        grad_input = _conv_backprop_input(
            grad,
            filter,
            strides=[strides[1], strides[2]],
            dilations=[dilations[1], dilations[2]],
            geometry=lambda size: ([0, 0], [size(input, -3), size(input, -2)]),
        )
        grad_filter = _conv_backprop_filter(
            input,
            grad,
            strides=[strides[1], strides[2]],
            dilations=[dilations[1], dilations[2]],
            geometry=lambda size: ([0, 0], [size(filter, -4), size(filter, -3)]),
        )
    elif padding == "SAME":
        grad_input = _conv_backprop_input(
            grad,
            filter,
            strides=[strides[1], strides[2]],
            dilations=[dilations[1], dilations[2]],
            geometry=lambda size: (
                [
                    _same_padding(size(input, -3), size(filter, -4), strides[1], dilations[1]),
                    _same_padding(size(input, -2), size(filter, -3), strides[2], dilations[2]),
                ],
                [size(input, -3), size(input, -2)],
            ),
        )
        grad_filter = _conv_backprop_filter(
            input,
            grad,
            strides=[strides[1], strides[2]],
            dilations=[dilations[1], dilations[2]],
            geometry=lambda size: (
                [
                    _same_padding(size(input, -3), size(filter, -4), strides[1], dilations[1]),
                    _same_padding(size(input, -2), size(filter, -3), strides[2], dilations[2]),
                ],
                [size(filter, -4), size(filter, -3)],
            ),
        )
    elif padding == "EXPLICIT":
        grad_input = _conv_backprop_input(
            grad,
            filter,
            strides=[strides[1], strides[2]],
            dilations=[dilations[1], dilations[2]],
            geometry=lambda size: (
                [explicit_paddings[2], explicit_paddings[4]],
                [size(input, -3), size(input, -2)],
            ),
        )
        grad_filter = _conv_backprop_filter(
            input,
            grad,
            strides=[strides[1], strides[2]],
            dilations=[dilations[1], dilations[2]],
            geometry=lambda size: (
                [explicit_paddings[2], explicit_paddings[4]],
                [size(filter, -4), size(filter, -3)],
            ),
        )
    else:
        raise ValueError(f"Conv2D: unsupported attributes padding={padding!r}")
    return grad_input, grad_filter

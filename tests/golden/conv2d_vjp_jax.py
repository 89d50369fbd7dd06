def conv2d_vjp(
    grad,
    input,
    filter,
    *,
    output=None,
    padding="VALID",
    strides,
    explicit_paddings=(),
    dilations=(1, 1, 1, 1),
    needs_grad=(True, True),
):
    """Gradient of Conv2D: one array per input (input, filter).

    In index notation, next to the code computing it, for padding='VALID' (other values of padding
    change it):
        grad_input[i, j, k, l] = sum_{o, a, b} grad[i, exact_div(-a * dilations[1] + j, strides[1]),
            exact_div(-b * dilations[2] + k, strides[2]), o] * filter[a, b, l, o]
            i.e. `_conv_backprop_input(grad, filter, strides=(strides[1], strides[2]), ...`
        grad_filter[a, b, c, o] = sum_{n, i, j} grad[n, i, j, o] * input[n, a * dilations[1] + i *
            strides[1], b * dilations[2] + j * strides[2], c]
            i.e. `_conv_backprop_filter(input, grad, strides=(strides[1], strides[2]), ...`
    """
    if padding == "VALID":
        grad_input = grad_filter = None
        if needs_grad[0]:
            grad_input = _conv_backprop_input(
                grad,
                filter,
                strides=(strides[1], strides[2]),
                dilations=(dilations[1], dilations[2]),
                pads=(0, 0),
                sizes=(np.shape(input)[-3], np.shape(input)[-2]),
            )
        if needs_grad[1]:
            grad_filter = _conv_backprop_filter(
                input,
                grad,
                strides=(strides[1], strides[2]),
                dilations=(dilations[1], dilations[2]),
                pads=(0, 0),
                sizes=(np.shape(filter)[-4], np.shape(filter)[-3]),
            )
    elif padding == "SAME":
        grad_input = grad_filter = None
        if needs_grad[0]:
            grad_input = _conv_backprop_input(
                grad,
                filter,
                strides=(strides[1], strides[2]),
                dilations=(dilations[1], dilations[2]),
                pads=(
                    _same_padding(
                        np.shape(input)[-3], np.shape(filter)[-4], strides[1], dilations[1]
                    ),
                    _same_padding(
                        np.shape(input)[-2], np.shape(filter)[-3], strides[2], dilations[2]
                    ),
                ),
                sizes=(np.shape(input)[-3], np.shape(input)[-2]),
            )
        if needs_grad[1]:
            grad_filter = _conv_backprop_filter(
                input,
                grad,
                strides=(strides[1], strides[2]),
                dilations=(dilations[1], dilations[2]),
                pads=(
                    _same_padding(
                        np.shape(input)[-3], np.shape(filter)[-4], strides[1], dilations[1]
                    ),
                    _same_padding(
                        np.shape(input)[-2], np.shape(filter)[-3], strides[2], dilations[2]
                    ),
                ),
                sizes=(np.shape(filter)[-4], np.shape(filter)[-3]),
            )
    elif padding == "EXPLICIT":
        grad_input = grad_filter = None
        if needs_grad[0]:
            grad_input = _conv_backprop_input(
                grad,
                filter,
                strides=(strides[1], strides[2]),
                dilations=(dilations[1], dilations[2]),
                pads=(explicit_paddings[2], explicit_paddings[4]),
                sizes=(np.shape(input)[-3], np.shape(input)[-2]),
            )
        if needs_grad[1]:
            grad_filter = _conv_backprop_filter(
                input,
                grad,
                strides=(strides[1], strides[2]),
                dilations=(dilations[1], dilations[2]),
                pads=(explicit_paddings[2], explicit_paddings[4]),
                sizes=(np.shape(filter)[-4], np.shape(filter)[-3]),
            )
    else:
        raise ValueError(f"Conv2D: unsupported attributes padding={padding!r}")
    return grad_input, grad_filter

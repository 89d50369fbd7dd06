def conv2d_grad(
    grad,
    input,
    filter,
    *,
    output=None,
    padding="VALID",
    strides,
    explicit_paddings=(),
    dilations=(1, 1, 1, 1),
):
    """Gradient of Conv2D: one array per input (input, filter)."""
    if padding == "VALID":
        t0 = np.arange(np.shape(input)[-2])
        t1 = t0[..., None]
        t2 = np.arange(np.shape(filter)[-3])
        t3 = -dilations[2] * t2 + t1
        t4 = np.where((t3) % (strides[2]) == 0, (t3) // (strides[2]), -1)
        t5 = _gather(grad, t4, -2)
        t6 = np.arange(np.shape(input)[-3])
        t7 = t6[..., None]
        t8 = np.arange(np.shape(filter)[-4])
        t9 = -dilations[1] * t8 + t7
        t10 = np.where((t9) % (strides[1]) == 0, (t9) // (strides[1]), -1)
        t11 = _gather(t5, t10, -4)
        grad_input = np.einsum("abcd,efagbd->efgc", filter, t11, optimize=True)
        t12 = np.arange(np.shape(filter)[-3])
        t13 = t12[..., None]
        t14 = np.arange(np.shape(grad)[-2])
        t15 = dilations[2] * t13 + strides[2] * t14
        t16 = _gather(input, t15, -2)
        t17 = np.arange(np.shape(filter)[-4])
        t18 = t17[..., None]
        t19 = np.arange(np.shape(grad)[-3])
        t20 = dilations[1] * t18 + strides[1] * t19
        t21 = _gather(t16, t20, -4)
        grad_filter = np.einsum("abcd,aebfcg->efgd", grad, t21, optimize=True)
    elif padding == "SAME":
        t0 = np.arange(np.shape(input)[-2])
        t1 = t0[..., None]
        t2 = np.arange(np.shape(filter)[-3])
        t3 = np.shape(filter)[-3]
        t4 = np.shape(input)[-2]
        t5 = -((-t4) // (strides[2]))
        t6 = np.maximum(dilations[2] * t3 - dilations[2] + strides[2] * t5 - strides[2] - t4 + 1, 0)
        t7 = (t6) // (2)
        t8 = -dilations[2] * t2 + t1 + t7
        t9 = np.where((t8) % (strides[2]) == 0, (t8) // (strides[2]), -1)
        t10 = _gather(grad, t9, -2)
        t11 = np.arange(np.shape(input)[-3])
        t12 = t11[..., None]
        t13 = np.arange(np.shape(filter)[-4])
        t14 = np.shape(input)[-3]
        t15 = np.shape(filter)[-4]
        t16 = -((-t14) // (strides[1]))
        t17 = np.maximum(
            dilations[1] * t15 - dilations[1] + strides[1] * t16 - strides[1] - t14 + 1, 0
        )
        t18 = (t17) // (2)
        t19 = -dilations[1] * t13 + t12 + t18
        t20 = np.where((t19) % (strides[1]) == 0, (t19) // (strides[1]), -1)
        t21 = _gather(t10, t20, -4)
        grad_input = np.einsum("abcd,efagbd->efgc", filter, t21, optimize=True)
        t22 = np.arange(np.shape(filter)[-3])
        t23 = t22[..., None]
        t24 = np.arange(np.shape(grad)[-2])
        t25 = np.maximum(dilations[2] * (t3 - 1) + strides[2] * (t5 - 1) - t4 + 1, 0)
        t26 = (t25) // (2)
        t27 = dilations[2] * t23 + strides[2] * t24 - t26
        t28 = _gather(input, t27, -2)
        t29 = np.arange(np.shape(filter)[-4])
        t30 = t29[..., None]
        t31 = np.arange(np.shape(grad)[-3])
        t32 = np.maximum(dilations[1] * (t15 - 1) + strides[1] * (t16 - 1) - t14 + 1, 0)
        t33 = (t32) // (2)
        t34 = dilations[1] * t30 + strides[1] * t31 - t33
        t35 = _gather(t28, t34, -4)
        grad_filter = np.einsum("abcd,aebfcg->efgd", grad, t35, optimize=True)
    elif padding == "EXPLICIT":
        t0 = np.arange(np.shape(input)[-2])
        t1 = t0[..., None]
        t2 = np.arange(np.shape(filter)[-3])
        t3 = -dilations[2] * t2 + explicit_paddings[4] + t1
        t4 = np.where((t3) % (strides[2]) == 0, (t3) // (strides[2]), -1)
        t5 = _gather(grad, t4, -2)
        t6 = np.arange(np.shape(input)[-3])
        t7 = t6[..., None]
        t8 = np.arange(np.shape(filter)[-4])
        t9 = -dilations[1] * t8 + explicit_paddings[2] + t7
        t10 = np.where((t9) % (strides[1]) == 0, (t9) // (strides[1]), -1)
        t11 = _gather(t5, t10, -4)
        grad_input = np.einsum("abcd,efagbd->efgc", filter, t11, optimize=True)
        t12 = np.arange(np.shape(filter)[-3])
        t13 = t12[..., None]
        t14 = np.arange(np.shape(grad)[-2])
        t15 = dilations[2] * t13 - explicit_paddings[4] + strides[2] * t14
        t16 = _gather(input, t15, -2)
        t17 = np.arange(np.shape(filter)[-4])
        t18 = t17[..., None]
        t19 = np.arange(np.shape(grad)[-3])
        t20 = dilations[1] * t18 - explicit_paddings[2] + strides[1] * t19
        t21 = _gather(t16, t20, -4)
        grad_filter = np.einsum("abcd,aebfcg->efgd", grad, t21, optimize=True)
    else:
        raise ValueError(f"Conv2D: unsupported attributes padding={padding!r}")
    return grad_input, grad_filter

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
    """Gradient of Conv2D (declared at ops/conv.py:35): one per input (input, filter)."""
    if padding == "VALID":
        t0 = tf.range(tf.shape(input, out_type=tf.int64)[-2])
        t1 = t0[..., None]
        t2 = tf.range(tf.shape(filter, out_type=tf.int64)[-3])
        t3 = -dilations[2] * t2 + t1
        t4 = tf.where(tf.equal((t3) % (strides[2]), 0), (t3) // (strides[2]), -tf.ones_like(t3))
        t5 = _gather(grad, t4, -2)
        t6 = tf.range(tf.shape(input, out_type=tf.int64)[-3])
        t7 = t6[..., None]
        t8 = tf.range(tf.shape(filter, out_type=tf.int64)[-4])
        t9 = -dilations[1] * t8 + t7
        t10 = tf.where(tf.equal((t9) % (strides[1]), 0), (t9) // (strides[1]), -tf.ones_like(t9))
        t11 = _gather(t5, t10, -4)
        grad_input = tf.einsum("abcd,efagbd->efgc", filter, t11)
        t12 = tf.range(tf.shape(filter, out_type=tf.int64)[-3])
        t13 = t12[..., None]
        t14 = tf.range(tf.shape(grad, out_type=tf.int64)[-2])
        t15 = dilations[2] * t13 + strides[2] * t14
        t16 = _gather(input, t15, -2)
        t17 = tf.range(tf.shape(filter, out_type=tf.int64)[-4])
        t18 = t17[..., None]
        t19 = tf.range(tf.shape(grad, out_type=tf.int64)[-3])
        t20 = dilations[1] * t18 + strides[1] * t19
        t21 = _gather(t16, t20, -4)
        grad_filter = tf.einsum("abcd,aebfcg->efgd", grad, t21)
    elif padding == "SAME":
        t0 = tf.range(tf.shape(input, out_type=tf.int64)[-2])
        t1 = t0[..., None]
        t2 = tf.range(tf.shape(filter, out_type=tf.int64)[-3])
        t3 = tf.shape(filter, out_type=tf.int64)[-3]
        t4 = tf.shape(input, out_type=tf.int64)[-2]
        t5 = -((-t4) // (strides[2]))
        t6 = tf.math.maximum(
            dilations[2] * t3 - dilations[2] + strides[2] * t5 - strides[2] - t4 + 1, 0
        )
        t7 = (t6) // (2)
        t8 = -dilations[2] * t2 + t1 + t7
        t9 = tf.where(tf.equal((t8) % (strides[2]), 0), (t8) // (strides[2]), -tf.ones_like(t8))
        t10 = _gather(grad, t9, -2)
        t11 = tf.range(tf.shape(input, out_type=tf.int64)[-3])
        t12 = t11[..., None]
        t13 = tf.range(tf.shape(filter, out_type=tf.int64)[-4])
        t14 = tf.shape(input, out_type=tf.int64)[-3]
        t15 = tf.shape(filter, out_type=tf.int64)[-4]
        t16 = -((-t14) // (strides[1]))
        t17 = tf.math.maximum(
            dilations[1] * t15 - dilations[1] + strides[1] * t16 - strides[1] - t14 + 1, 0
        )
        t18 = (t17) // (2)
        t19 = -dilations[1] * t13 + t12 + t18
        t20 = tf.where(tf.equal((t19) % (strides[1]), 0), (t19) // (strides[1]), -tf.ones_like(t19))
        t21 = _gather(t10, t20, -4)
        grad_input = tf.einsum("abcd,efagbd->efgc", filter, t21)
        t22 = tf.range(tf.shape(filter, out_type=tf.int64)[-3])
        t23 = t22[..., None]
        t24 = tf.range(tf.shape(grad, out_type=tf.int64)[-2])
        t25 = tf.math.maximum(dilations[2] * (t3 - 1) + strides[2] * (t5 - 1) - t4 + 1, 0)
        t26 = (t25) // (2)
        t27 = dilations[2] * t23 + strides[2] * t24 - t26
        t28 = _gather(input, t27, -2)
        t29 = tf.range(tf.shape(filter, out_type=tf.int64)[-4])
        t30 = t29[..., None]
        t31 = tf.range(tf.shape(grad, out_type=tf.int64)[-3])
        t32 = tf.math.maximum(dilations[1] * (t15 - 1) + strides[1] * (t16 - 1) - t14 + 1, 0)
        t33 = (t32) // (2)
        t34 = dilations[1] * t30 + strides[1] * t31 - t33
        t35 = _gather(t28, t34, -4)
        grad_filter = tf.einsum("abcd,aebfcg->efgd", grad, t35)
    elif padding == "EXPLICIT":
        t0 = tf.range(tf.shape(input, out_type=tf.int64)[-2])
        t1 = t0[..., None]
        t2 = tf.range(tf.shape(filter, out_type=tf.int64)[-3])
        t3 = -dilations[2] * t2 + explicit_paddings[4] + t1
        t4 = tf.where(tf.equal((t3) % (strides[2]), 0), (t3) // (strides[2]), -tf.ones_like(t3))
        t5 = _gather(grad, t4, -2)
        t6 = tf.range(tf.shape(input, out_type=tf.int64)[-3])
        t7 = t6[..., None]
        t8 = tf.range(tf.shape(filter, out_type=tf.int64)[-4])
        t9 = -dilations[1] * t8 + explicit_paddings[2] + t7
        t10 = tf.where(tf.equal((t9) % (strides[1]), 0), (t9) // (strides[1]), -tf.ones_like(t9))
        t11 = _gather(t5, t10, -4)
        grad_input = tf.einsum("abcd,efagbd->efgc", filter, t11)
        t12 = tf.range(tf.shape(filter, out_type=tf.int64)[-3])
        t13 = t12[..., None]
        t14 = tf.range(tf.shape(grad, out_type=tf.int64)[-2])
        t15 = dilations[2] * t13 - explicit_paddings[4] + strides[2] * t14
        t16 = _gather(input, t15, -2)
        t17 = tf.range(tf.shape(filter, out_type=tf.int64)[-4])
        t18 = t17[..., None]
        t19 = tf.range(tf.shape(grad, out_type=tf.int64)[-3])
        t20 = dilations[1] * t18 - explicit_paddings[2] + strides[1] * t19
        t21 = _gather(t16, t20, -4)
        grad_filter = tf.einsum("abcd,aebfcg->efgd", grad, t21)
    else:
        raise ValueError(f"Conv2D: unsupported attributes padding={padding!r}")
    return grad_input, grad_filter

rank == 2 and shrink_axis_mask in (0, 1):
        t0 = tf.range(tf.shape(input, out_type=tf.int64)[-1])
        t1 = tf.shape(input, out_type=tf.int64)[-1]
        t2 = t0 - _slice_start(t1, begin[1], strides[1], _bit(begin_mask, 1))
        t3 = tf.where(tf.equal(t2 % strides[1], 0), t2 // strides[1], -tf.ones_like(t2))
        t4 = _gather(grad, t3, -1)
        if shrink_axis_mask == 1:
            t5 = tf.shape(input, out_type=tf.int64)[-2]
            t6 = tf.where(begin[0] < 0, begin[0] + t5, begin[0])
        t7 = tf.range(tf.shape(input, out_type=tf.int64)[-2])
        if shrink_axis_mask == 0:
            t8 = tf.shape(input, out_type=tf.int64)[-2]
            t9 = t7 - _slice_start(t8, begin[0], strides[0], _bit(begin_mask, 0))
            t10 = tf.where(tf.equal(t9 % strides[0], 0), t9 // strides[0], -tf.ones_like(t9))
            grad_input = _gather(t4, t10, -2)
        else:
            t8 = tf.equal(t7, t6)
            t9 = t8[..., None]
            grad_input = t4 * tf.cast(t9, grad.dtype)

rank == 2 and shrink_axis_mask == 0 and ellipsis_mask == 0 and new_axis_mask == 0:
        t0 = tf.range(tf.shape(input, out_type=tf.int64)[-1])
        t1 = tf.shape(input, out_type=tf.int64)[-1]
        t2 = begin_mask // 2
        t3 = tf.math.maximum(
            tf.where(strides[1] > 0, tf.constant(0, tf.int64), tf.constant(-1, tf.int64)),
            tf.where(begin[1] < 0, begin[1] + t1, begin[1]),
        )
        t4 = tf.math.minimum(t3, tf.where(strides[1] > 0, t1, t1 - 1))
        t5 = t0 - tf.where(
            tf.equal(t2 % 2, 1), tf.where(strides[1] > 0, tf.constant(0, tf.int64), t1 - 1), t4
        )
        t6 = tf.where(tf.equal(t5 % strides[1], 0), t5 // strides[1], -tf.ones_like(t5))
        t7 = _gather(grad, t6, -1)
        t8 = tf.range(tf.shape(input, out_type=tf.int64)[-2])
        t9 = tf.shape(input, out_type=tf.int64)[-2]
        t10 = tf.math.maximum(
            tf.where(strides[0] > 0, tf.constant(0, tf.int64), tf.constant(-1, tf.int64)),
            tf.where(begin[0] < 0, begin[0] + t9, begin[0]),
        )
        t11 = tf.math.minimum(t10, tf.where(strides[0] > 0, t9, t9 - 1))
        t12 = t8 - tf.where(
            tf.equal(begin_mask % 2, 1),
            tf.where(strides[0] > 0, tf.constant(0, tf.int64), t9 - 1),
            t11,
        )
        t13 = tf.where(tf.equal(t12 % strides[0], 0), t12 // strides[0], -tf.ones_like(t12))
        grad_input = _gather(t7, t13, -2)

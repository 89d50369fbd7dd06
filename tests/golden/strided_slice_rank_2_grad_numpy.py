rank == 2 and shrink_axis_mask == 0 and ellipsis_mask == 0 and new_axis_mask == 0:
        t0 = np.arange(np.shape(input)[-1])
        t1 = np.shape(input)[-1]
        t2 = begin_mask // 2
        t3 = np.maximum(
            np.where(strides[1] > 0, 0, -1), np.where(begin[1] < 0, begin[1] + t1, begin[1])
        )
        t4 = np.minimum(t3, np.where(strides[1] > 0, t1, t1 - 1))
        t5 = t0 - np.where(np.mod(t2, 2) == 1, np.where(strides[1] > 0, 0, t1 - 1), t4)
        t6 = np.where(t5 % strides[1] == 0, t5 // strides[1], -1)
        t7 = _gather(grad, t6, -1)
        t8 = np.arange(np.shape(input)[-2])
        t9 = np.shape(input)[-2]
        t10 = np.maximum(
            np.where(strides[0] > 0, 0, -1), np.where(begin[0] < 0, begin[0] + t9, begin[0])
        )
        t11 = np.minimum(t10, np.where(strides[0] > 0, t9, t9 - 1))
        t12 = t8 - np.where(np.mod(begin_mask, 2) == 1, np.where(strides[0] > 0, 0, t9 - 1), t11)
        t13 = np.where(t12 % strides[0] == 0, t12 // strides[0], -1)
        grad_input = _gather(t7, t13, -2)

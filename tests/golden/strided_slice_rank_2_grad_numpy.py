rank == 2 and shrink_axis_mask in (0, 1):
        t0 = np.arange(np.shape(input)[-1])
        t1 = np.shape(input)[-1]
        t2 = t0 - _slice_start(t1, begin[1], strides[1], _bit(begin_mask, 1))
        t3 = np.where(t2 % strides[1] == 0, t2 // strides[1], -1)
        t4 = _gather(grad, t3, -1)
        if shrink_axis_mask == 1:
            t5 = np.shape(input)[-2]
            t6 = np.where(begin[0] < 0, begin[0] + t5, begin[0])
        t7 = np.arange(np.shape(input)[-2])
        if shrink_axis_mask == 0:
            t8 = np.shape(input)[-2]
            t9 = t7 - _slice_start(t8, begin[0], strides[0], _bit(begin_mask, 0))
            t10 = np.where(t9 % strides[0] == 0, t9 // strides[0], -1)
            grad_input = _gather(t4, t10, -2)
        else:
            t8 = t7 == t6
            t9 = t8[..., None]
            grad_input = np.where(t9, t4, 0)

rank == 2 and shrink_axis_mask == 0:
        t0 = np.arange(np.shape(input)[-1])
        t1 = np.shape(input)[-1]
        t2 = t0 - _slice_start(t1, begin[1], strides[1], _bit(begin_mask, 1))
        t3 = np.where(t2 % strides[1] == 0, t2 // strides[1], -1)
        t4 = _gather(grad, t3, -1)
        t5 = np.arange(np.shape(input)[-2])
        t6 = np.shape(input)[-2]
        t7 = t5 - _slice_start(t6, begin[0], strides[0], _bit(begin_mask, 0))
        t8 = np.where(t7 % strides[0] == 0, t7 // strides[0], -1)
        grad_input = _gather(t4, t8, -2)

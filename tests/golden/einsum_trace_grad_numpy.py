equation == "ii->":
        (inputs_0,) = inputs
        t0 = np.eye(np.shape(inputs_0)[-2], dtype=np.result_type(inputs_0))
        grad_inputs_0 = grad * t0
        grads = (grad_inputs_0,)

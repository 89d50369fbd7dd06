equation == "ii->":
        (inputs_0,) = inputs
        t0 = tf.eye(tf.shape(inputs_0)[-2], dtype=inputs_0.dtype)
        grad_inputs_0 = grad * t0
        grads = (grad_inputs_0,)

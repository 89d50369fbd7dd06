"""A gather's gradient in TensorFlow is the rows read and their positions (`tf.IndexedSlices`),
as TensorFlow's own: derived here from the scatter-add being the whole gradient at positions an
input gives. Optimizers apply it sparsely; numpy stays dense."""

from __future__ import annotations

import numpy as np


def test_the_derived_gather_gradient_is_indexed_slices_equal_to_tensorflows(tf_module, tf):
    module = tf_module("gather")
    params = tf.constant(np.arange(12.0).reshape(4, 3))
    indices = tf.constant([[2, 0], [2, 3]], tf.int32)
    grad = tf.constant(np.random.default_rng(0).standard_normal((2, 2, 3)))
    grad_params, grad_indices = module.gather_v2_vjp(grad, params, indices, None, axis=0)
    assert isinstance(grad_params, tf.IndexedSlices) and grad_indices is None
    with tf.GradientTape() as tape:
        tape.watch(params)
        out = tf.gather(params, indices)
    expected = tape.gradient(out, params, output_gradients=grad)
    assert isinstance(expected, tf.IndexedSlices)
    np.testing.assert_allclose(tf.convert_to_tensor(grad_params).numpy(), tf.convert_to_tensor(expected).numpy())


def test_an_optimizer_applies_it_to_the_rows_read_only(tf_module, tf):
    module = tf_module("gather")
    ours, theirs = (tf.Variable(np.ones((5, 2))) for _ in range(2))
    indices = tf.constant([4, 1, 4], tf.int32)
    for variable, gather in ((ours, lambda v: module.gather_v2(v, indices, axis=0)), (theirs, lambda v: tf.gather(v, indices))):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(gather(variable) ** 2)
        (gradient,) = tape.gradient(loss, [variable])
        assert isinstance(gradient, tf.IndexedSlices)
        tf.compat.v1.train.GradientDescentOptimizer(0.1).apply_gradients([(gradient, variable)])  # its sparse path
    np.testing.assert_allclose(ours.numpy(), theirs.numpy())
    np.testing.assert_allclose(ours.numpy()[[0, 2, 3]], 1.0)


def test_numpy_stays_dense(numpy_module):
    module = numpy_module("gather")
    grad_params, _ = module.gather_v2_grad(np.ones((3, 2)), np.zeros((4, 2)), np.array([1, 1, 3]), axis=0)
    np.testing.assert_array_equal(grad_params, [[0, 0], [2, 2], [0, 0], [1, 1]])

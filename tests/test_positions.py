"""ArgMax and ArgMin (ops/reductions.py): an integer output of the dtype an attribute names,
declared with `argmax`/`argmin` and lowered to one argmax call, whose gradient is None.

Against each framework's own argmax, ties included (the first position wins, as in TensorFlow's
kernel), through the declared formula in TensorFlow too (its kernel switched off); and used as
users use it, a gather at the argmax, whose gradient must then be the framework's max gradient:
the integer output must neither carry a gradient nor block the values' one."""

from __future__ import annotations

import numpy as np
import pytest

AXES = (-1, -2, -3)
OPS = (("arg_max", np.argmax), ("arg_min", np.argmin))


def with_ties(seed=0):
    """Small integers as floats: each axis holds repeated maxima and minima."""
    return np.random.default_rng(seed).integers(0, 3, size=(2, 3, 4, 5)).astype(np.float64)


@pytest.mark.parametrize("func, reference", OPS)
@pytest.mark.parametrize("axis", AXES)
def test_numpy_positions_are_the_first_of_ties(numpy_module, func, reference, axis):
    x = with_ties()
    got = getattr(numpy_module("reductions"), func)(x, dimension=axis, output_type="int32")
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, reference(x, axis=axis))
    assert getattr(numpy_module("reductions"), func + "_grad")(np.ones(got.shape), x) == (None,)


@pytest.mark.parametrize("func, op_type", (("arg_max", "ArgMax"), ("arg_min", "ArgMin")))
@pytest.mark.parametrize("axis", AXES + (1,))
@pytest.mark.parametrize("output_type", ("int32", "int64"))
def test_tensorflow_kernel_and_declared_formula(tf, tf_module, monkeypatch, func, op_type, axis, output_type):
    module = tf_module("reductions")
    x = tf.constant(with_ties(1))
    want = getattr(tf.raw_ops, op_type)(input=x, dimension=axis, output_type=output_type)
    kernel = getattr(module, func)(x, dimension=axis, output_type=output_type)
    runtime = module._custom_gradient.__globals__  # the runtime module's, which the wrapper reads
    monkeypatch.setitem(runtime, "_tf_kernel", lambda *args, **kwargs: None)
    formula = getattr(module, func)(x, dimension=axis, output_type=output_type)
    for got in (kernel, formula):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_tensorflow_gather_at_the_argmax_has_the_max_gradient(tf, tf_module):
    module = tf_module("reductions")
    x = tf.constant(np.random.default_rng(2).standard_normal((3, 5)))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        position = module.arg_max(x, dimension=-1, output_type="int64")
        picked = tf.gather(x, position, batch_dims=1)
        largest = tf.reduce_max(x, axis=-1)
    assert tape.gradient(position, x) is None
    np.testing.assert_array_equal(picked.numpy(), largest.numpy())
    np.testing.assert_array_equal(tape.gradient(picked, x).numpy(), tape.gradient(largest, x).numpy())


def test_jax_gather_at_the_argmax_has_the_max_gradient(jax, jax_module):
    jnp = jax.numpy
    module = jax_module("reductions")
    x = jnp.asarray(np.random.default_rng(3).standard_normal((3, 5)))

    def picked(x):
        position = module.arg_min(x, dimension=-1, output_type="int32")
        assert position.dtype == jnp.int32
        return jnp.sum(jnp.take_along_axis(x, position[:, None], axis=-1) ** 2)

    def smallest(x):
        return jnp.sum(jnp.min(x, axis=-1) ** 2)

    np.testing.assert_allclose(picked(x), smallest(x))
    np.testing.assert_array_equal(jax.grad(picked)(x), jax.grad(smallest)(x))
    np.testing.assert_array_equal(jax.jit(picked)(x), picked(x))


def test_torch_gather_at_the_argmax_has_the_max_gradient(torch, torch_module):
    module = torch_module("reductions")
    x = torch.tensor(np.random.default_rng(4).standard_normal((3, 5)), requires_grad=True)
    position = module.arg_max(x, dimension=-1, output_type="int64")
    assert position.dtype == torch.int64 and not position.requires_grad
    torch.testing.assert_close(position, torch.argmax(x, dim=-1))
    (got,) = torch.autograd.grad(torch.gather(x, -1, position[:, None]).sum(), x)
    (want,) = torch.autograd.grad(torch.amax(x, dim=-1).sum(), x)
    torch.testing.assert_close(got, want, rtol=0, atol=0)


ROW_ARGMAX = '''from symgrad import DType, argmax, dims, indices, op, tensor

N, M = dims("N M")
i, k = indices("i k")


@op("RowArgmax"{attrs})
def row_argmax({params}):
    """Where each row's maximum is."""
    x = tensor("x", (N, M))
    return {{"index": ((i,), argmax(x[i, k], (k, 0, M - 1)))}}
'''
INDEX_TYPE = ', attrs={"index_type": DType()}, defaults={"index_type": "int64"}, output_dtypes={"index": "index_type"}'


def test_a_position_output_in_the_inputs_float_dtype_is_a_declaration_error(tmp_path):
    """An argmax output promised in the inputs' dtype would come back int64 from every target:
    `symgrad derive` refuses it, naming the op, the file and line and the fix, and writes nothing."""
    from test_cli import symgrad

    path = tmp_path / "row_ops.py"
    path.write_text(ROW_ARGMAX.format(attrs="", params=""))
    result = symgrad("derive", path, "-o", tmp_path / "out", "--target", "numpy")
    assert result.returncode != 0
    assert f"RowArgmax ({path}:7)" in result.stderr
    assert "output 'index' is a position (argmax)" in result.stderr and "output_dtypes={'index': 'index_type'}" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_position_output_of_an_integer_dtype_attribute_comes_back_in_it(tmp_path):
    from conftest import import_path
    from symgrad.generate import generate

    path = tmp_path / "row_ops.py"
    path.write_text(ROW_ARGMAX.format(attrs=INDEX_TYPE, params="index_type"))
    for name, text in generate([path], ("numpy",)).items():
        (tmp_path / name).write_text(text)
    module = import_path(tmp_path / "row_ops_numpy.py")
    x = with_ties(1)[0, 0]
    for dtype in ("int64", "int32"):
        got = module.row_argmax(x, index_type=dtype)
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, np.argmax(x, axis=1))

"""The seed, reproduced: TensorFlow's hand-written MatMul gradient next to symgrad's derived one.

Run from the repository root after `symgrad derive ops/`:

    python examples/matmul_seed.py

It prints, for c = a @ b, the gradient w.r.t. `a` of sum(c) (upstream gradient: ones) and of
sum(c * stop_gradient(c)) (upstream gradient: c), from TensorFlow's registered gradient and
from the generated TensorFlow module (three ways: its `tf.custom_gradient` wrapper in eager mode
and inside `tf.function`, and its registered gradient through `gradient_override_map`), the
generated numpy module, the generated JAX module (its `jax.custom_vjp` op under `jax.grad`,
eager and under `jax.jit`), and the generated PyTorch module (its `torch.autograd.Function`
under `torch.autograd.grad`).
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "generated"))

import jax  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402

import matmul_jax  # noqa: E402
import matmul_numpy  # noqa: E402
import matmul_tf  # noqa: E402
import matmul_torch  # noqa: E402

jax.config.update("jax_enable_x64", True)  # float64, as the other rows

A = np.array([[1.0, 2.0], [3.0, 4.0]])
B = np.array([[6.0, 7.0, 8.0], [9.0, 10.0, 11.0]])
LOSSES = {
    "sum(c)": lambda c: tf.reduce_sum(c),
    "sum(c * stop_gradient(c))": lambda c: tf.reduce_sum(c * tf.stop_gradient(c)),
}


def tape_gradient(matmul, loss):
    """d loss(matmul(a, b)) / d a under a GradientTape."""
    a, b = tf.constant(A), tf.constant(B)
    with tf.GradientTape() as tape:
        tape.watch(a)
        c = matmul(a, b)
        value = loss(c)
    return tape.gradient(value, a)


def override_gradient(loss):
    """d loss / d a with tf.gradients in a graph where MatMul's gradient is symgrad's."""
    graph = tf.Graph()
    with graph.as_default():
        a, b = tf.constant(A), tf.constant(B)
        with graph.gradient_override_map({"MatMul": "SymgradMatMul"}):
            c = tf.linalg.matmul(a, b)
        (grad_a,) = tf.compat.v1.gradients(loss(c), [a])
        with tf.compat.v1.Session(graph=graph) as session:
            return session.run(grad_a)


def numpy_gradient(loss_name):
    """d loss / d a from the generated numpy gradient, given the loss's upstream gradient."""
    c = matmul_numpy.matmul(A, B)
    upstream = np.ones_like(c) if loss_name == "sum(c)" else c
    grad_a, _ = matmul_numpy.matmul_grad(upstream, A, B)
    return grad_a


def jax_gradient(loss_name, jit=False):
    """d loss / d a through the generated JAX op (`jax.lax.stop_gradient` for the second loss)."""
    losses = {"sum(c)": lambda c: c.sum(), "sum(c * stop_gradient(c))": lambda c: (c * jax.lax.stop_gradient(c)).sum()}
    grad = jax.grad(lambda a, b: losses[loss_name](matmul_jax.matmul(a, b)))
    return (jax.jit(grad) if jit else grad)(A, B)


def torch_gradient(loss_name):
    """d loss / d a through the generated PyTorch op (`detach` for the second loss)."""
    losses = {"sum(c)": lambda c: c.sum(), "sum(c * stop_gradient(c))": lambda c: (c * c.detach()).sum()}
    a, b = torch.tensor(A, requires_grad=True), torch.tensor(B)
    (grad_a,) = torch.autograd.grad(losses[loss_name](matmul_torch.matmul(a, b)), a)
    return grad_a.numpy()


def gradients(loss_name):
    """Each implementation's gradient for one loss, hand-written first."""
    loss = LOSSES[loss_name]
    return {
        "TensorFlow hand-written (registry)": tape_gradient(tf.linalg.matmul, loss).numpy(),
        "symgrad TF, custom_gradient (eager)": tape_gradient(matmul_tf.matmul, loss).numpy(),
        "symgrad TF, custom_gradient (tf.function)": tf.function(
            lambda: tape_gradient(matmul_tf.matmul, loss)
        )().numpy(),
        "symgrad TF, gradient_override_map": override_gradient(loss),
        "symgrad numpy": numpy_gradient(loss_name),
        "symgrad JAX, custom_vjp (jax.grad)": jax_gradient(loss_name),
        "symgrad JAX, custom_vjp (jax.jit)": jax_gradient(loss_name, jit=True),
        "symgrad PyTorch, autograd.Function": torch_gradient(loss_name),
    }


def main():
    for loss_name in LOSSES:
        print(f"d {loss_name} / d a")
        results = gradients(loss_name)
        reference = results["TensorFlow hand-written (registry)"]
        for who, value in results.items():
            value = np.asarray(value)
            agree = "same" if np.array_equal(value, reference) else "DIFFERENT"
            print(f"  {who:45s} {value.astype(int).tolist()}  {agree}")
    print(f"registered as: {matmul_tf.REGISTERED['MatMul']}")


if __name__ == "__main__":
    main()

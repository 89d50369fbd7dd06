"""Softmax on a (4, 1_000_000) input: the derived gradient's time against the forward's.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/softmax_large.py

Prints medians of repeated, interleaved runs for the generated numpy and TensorFlow code
(generated/nn_numpy.py, generated/nn_tf.py) and TensorFlow's own Softmax kernel.
"""

import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "generated"))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import nn_numpy  # noqa: E402
import nn_tf  # noqa: E402

SHAPE, REPEATS = (4, 1_000_000), 15


def medians(contenders: dict) -> dict:
    """Median seconds of each contender, run interleaved so drift hits them alike."""
    times = {name: [] for name in contenders}
    for _ in range(REPEATS):
        for name, run in contenders.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main():
    rng = np.random.default_rng(0)
    x, g = rng.standard_normal(SHAPE), rng.standard_normal(SHAPE)
    y = nn_numpy.softmax(x)
    xt, gt, yt = tf.constant(x), tf.constant(g), tf.constant(y)
    forward_tf = tf.function(lambda: tf.raw_ops.Softmax(logits=xt))
    gradient_tf = tf.function(lambda: nn_tf.softmax_vjp(gt, xt, yt)[0])
    forward_tf(), gradient_tf()  # trace once
    result = medians({
        "numpy forward": lambda: nn_numpy.softmax(x),
        "numpy gradient": lambda: nn_numpy.softmax_grad(g, x, softmax=y),
        "TF forward (TensorFlow's kernel)": lambda: forward_tf().numpy(),
        "TF gradient (derived)": lambda: gradient_tf().numpy(),
    })
    for name, seconds in result.items():
        print(f"{name:34s} {seconds * 1e3:8.2f} ms")
    print(f"numpy gradient / forward: {result['numpy gradient'] / result['numpy forward']:.2f}")
    tf_ratio = result["TF gradient (derived)"] / result["TF forward (TensorFlow's kernel)"]
    print(f"TF gradient / forward:    {tf_ratio:.2f}")


if __name__ == "__main__":
    main()

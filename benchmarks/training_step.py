"""A whole training step, as users run it: the generated TF wrappers against stock TF ops.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/training_step.py
        [--steps N] [--quick | --smoke] [--repeats N] [--train-epochs N] [--json FILE]
        [--generated DIR] [--no-ops]

Builds two small models twice, once from the generated `tf.custom_gradient` wrappers of
`generated/` (`matmul`, `bias_add`, `relu`, `conv2d`, `max_pool`,
`softmax_cross_entropy_with_logits`; derive them first with `python -m symgrad derive ops/`)
and once from stock TensorFlow ops (`tf.matmul`, `tf.nn.bias_add`, `tf.nn.relu`,
`tf.nn.conv2d`, `tf.nn.max_pool2d`, `tf.nn.softmax_cross_entropy_with_logits`):

* MLP: dense 64 -> 128, relu, dense 128 -> 10, softmax cross-entropy;
* CNN: conv2d 3x3x1x32 SAME, bias add, relu, max-pool 2x2/2, dense 512 -> 10, softmax
  cross-entropy;

with the same initial weights, and trains each with plain SGD in a `tf.function` on
scikit-learn's digits (8x8 images, 10 classes; a seeded synthetic set of the same shapes when
scikit-learn is missing, and the run says so), batch 256, the same batches for both. After the
first steps the two models' losses and weights must agree (the same math): the run fails if
not. Then warm steps are timed, the two contenders interleaved (a sample is `--steps` steps, in
an order rotated each repeat), and the median time per step and the ratio ours / stock are
printed per model. Unless `--no-ops`, each op of the CNN (and of the MLP's first layer) is
then timed alone at the model's shapes, forward and backward under a tape, wrapper against
stock op, and the gradient alone (the generated `<op>_grad` against TensorFlow's registered
gradient function, on the same real op), so that an op that dominates shows. Last, both
models of each kind train a few epochs and their test accuracies are printed: the generated
model trains.

No time is asserted: the numbers are worth what the machine's load lets them be (the load
average at the start is printed). `--quick`: fewer repeats and steps, about half a minute;
`--smoke` only checks that it runs (tests/test_benchmarks.py runs it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

from bench_measure import Contender, time_interleaved  # noqa: E402
from symgrad.runtime_module import import_generated  # noqa: E402

BATCH = 256
LEARNING_RATE = 0.1
HIDDEN = 128
FILTERS = 32
MODULES = ("matmul", "nn", "unary", "conv")  # generated/<name>_tf.py


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="fewer repeats and steps")
    size.add_argument(
        "--smoke", action="store_true", help="one step per sample, one repeat, no per-op timing"
    )
    parser.add_argument("--steps", type=int, help="training steps per timed sample (default 10)")
    parser.add_argument("--repeats", type=int, help="interleaved samples per contender (default 21)")
    parser.add_argument("--train-epochs", type=int, default=20, help="epochs of the accuracy run")
    parser.add_argument("--json", type=Path, help="write the results as JSON to this file")
    parser.add_argument(
        "--generated", type=Path, default=ROOT / "generated", help="folder of the generated modules"
    )
    parser.add_argument("--no-ops", action="store_true", help="skip the per-op timings")
    return parser


# --- data -------------------------------------------------------------------------------------


def load_digits(seed: int = 0):
    """(x_train, y_train, x_test, y_test, source): images (n, 8, 8, 1) in [0, 1], one-hot labels."""
    try:
        from sklearn.datasets import load_digits as sklearn_digits

        digits = sklearn_digits()
        images, labels = digits.images.astype(np.float32) / 16.0, digits.target
        source = "scikit-learn's digits (1797 images)"
    except ImportError:
        rng = np.random.default_rng(seed)
        labels = rng.integers(0, 10, 1797)
        centres = rng.uniform(0, 1, (10, 8, 8)).astype(np.float32)
        images = np.clip(centres[labels] + 0.3 * rng.standard_normal((1797, 8, 8)), 0, 1)
        images = images.astype(np.float32)
        source = "SYNTHETIC digits (scikit-learn is not installed): 1797 seeded noisy prototypes"
    order = np.random.default_rng(seed).permutation(len(labels))
    images, labels = images[order][..., None], labels[order]
    onehot = np.eye(10, dtype=np.float32)[labels]
    split = 1297
    return images[:split], onehot[:split], images[split:], onehot[split:], source


def batches(x, y, count: int, seed: int = 1):
    """`count` batches of BATCH rows, drawn with a seeded generator (with replacement across
    batches, without within one)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        rows = rng.choice(len(x), BATCH, replace=False)
        out.append((x[rows], y[rows]))
    return out


# --- models -----------------------------------------------------------------------------------


def load_generated(folder: Path) -> dict:
    """The generated TF modules the models use, by short name."""
    modules = {}
    for name in MODULES:
        path = folder / f"{name}_tf.py"
        if not path.exists():
            raise SystemExit(f"{path} is missing: derive it first, `python -m symgrad derive ops/`")
        modules[name] = import_generated(path, f"training_step_{name}_tf")
    return modules


class Ops:
    """The layers' ops, from the generated wrappers or from stock TensorFlow."""

    def __init__(self, tf, gen: dict | None):
        self.name = "ours" if gen is not None else "stock"
        if gen is None:
            self.matmul = tf.matmul
            self.bias_add = tf.nn.bias_add
            self.relu = tf.nn.relu
            self.conv2d = lambda x, f: tf.nn.conv2d(x, f, strides=1, padding="SAME")
            self.max_pool = lambda x: tf.nn.max_pool2d(x, ksize=2, strides=2, padding="VALID")
            self.xent = lambda logits, labels: tf.nn.softmax_cross_entropy_with_logits(
                labels=labels, logits=logits
            )
        else:
            self.matmul = gen["matmul"].matmul
            self.bias_add = gen["nn"].bias_add
            self.relu = gen["unary"].relu
            self.conv2d = lambda x, f: gen["conv"].conv2d(x, f, padding="SAME", strides=(1, 1, 1, 1))
            self.max_pool = lambda x: gen["conv"].max_pool(
                x, padding="VALID", ksize=(1, 2, 2, 1), strides=(1, 2, 2, 1)
            )
            # the op's two outputs: the loss per row, and its gradient w.r.t. the logits
            self.xent = lambda logits, labels: gen["nn"].softmax_cross_entropy_with_logits(
                logits, labels
            )[0]


def initial_weights(kind: str, seed: int = 2) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)

    def glorot(*shape):
        fan_in, fan_out = np.prod(shape[:-1]), shape[-1]
        return (rng.standard_normal(shape) * np.sqrt(2.0 / (fan_in + fan_out))).astype(np.float32)

    if kind == "mlp":
        return [glorot(64, HIDDEN), np.zeros(HIDDEN, np.float32), glorot(HIDDEN, 10), np.zeros(10, np.float32)]
    return [
        glorot(3, 3, 1, FILTERS),
        np.zeros(FILTERS, np.float32),
        glorot(4 * 4 * FILTERS, 10),
        np.zeros(10, np.float32),
    ]


def logits_of(tf, kind: str, ops: Ops, weights, x):
    if kind == "mlp":
        w1, b1, w2, b2 = weights
        h = ops.relu(ops.bias_add(ops.matmul(tf.reshape(x, [-1, 64]), w1), b1))
        return ops.bias_add(ops.matmul(h, w2), b2)
    f, b, w, c = weights
    h = ops.max_pool(ops.relu(ops.bias_add(ops.conv2d(x, f), b)))
    return ops.bias_add(ops.matmul(tf.reshape(h, [-1, 4 * 4 * FILTERS]), w), c)


class Model:
    """One model's variables and its `tf.function` SGD step."""

    def __init__(self, tf, kind: str, ops: Ops, weights):
        self.tf, self.kind, self.ops = tf, kind, ops
        self.variables = [tf.Variable(w) for w in weights]

        def step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(ops.xent(logits_of(tf, kind, ops, self.variables, x), y))
            grads = tape.gradient(loss, self.variables)
            for v, g in zip(self.variables, grads):
                v.assign_sub(LEARNING_RATE * g)
            return loss

        self.step = tf.function(step)
        self.predict = tf.function(
            lambda x: tf.argmax(logits_of(tf, kind, ops, self.variables, x), axis=-1)
        )

    def accuracy(self, x, y) -> float:
        return float(np.mean(self.predict(x).numpy() == np.argmax(y, axis=-1)))


def check_same_math(models: dict, data, steps: int = 3) -> list[str]:
    """Train each pair of models `steps` steps on the same batches; raise if the losses or the
    weights differ beyond float32 rounding. Returns what was compared, as text."""
    lines = []
    for kind, (ours, stock) in models.items():
        for n, (x, y) in enumerate(data[:steps]):
            a, b = float(ours.step(x, y)), float(stock.step(x, y))
            if not np.isclose(a, b, rtol=1e-5, atol=1e-6):
                raise SystemExit(f"FAIL: {kind} step {n}: loss {a!r} (ours) against {b!r} (stock)")
        worst = 0.0
        for k, (va, vb) in enumerate(zip(ours.variables, stock.variables)):
            va, vb = va.numpy(), vb.numpy()
            if not np.allclose(va, vb, rtol=1e-4, atol=1e-6):
                raise SystemExit(
                    f"FAIL: {kind} weight {k} differs after {steps} steps: "
                    f"max |ours - stock| = {np.max(np.abs(va - vb)):.3g}"
                )
            worst = max(worst, float(np.max(np.abs(va - vb))))
        lines.append(f"{kind}: losses agree over {steps} steps (last {a:.6f}), weights within {worst:.2g}")
    return lines


def time_steps(models: dict, data, steps: int, repeats: int) -> dict:
    """Median seconds per warm step of each model, and ours / stock."""
    results = {}
    for kind, pair in models.items():
        contenders = []
        for model in pair:
            def run(model=model):
                loss = None
                for x, y in data[:steps]:
                    loss = model.step(x, y)
                loss.numpy()

            run()  # warm: traced, caches filled
            contenders.append(Contender(model.ops.name, run))
        medians = time_interleaved(contenders, repeats, min_sample=0.0)
        per_step = {name: t / steps for name, t in medians.items()}
        results[kind] = {
            "ours_ms": 1e3 * per_step["ours"],
            "stock_ms": 1e3 * per_step["stock"],
            "ratio": per_step["ours"] / per_step["stock"],
        }
    return results


# --- ops alone --------------------------------------------------------------------------------


def op_cases(tf, gen: dict, weights, mlp_weights):
    """(label, ours, stock, inputs, tf op builder, generated grad function) at the CNN's shapes,
    then the MLP's first layer."""
    rng = np.random.default_rng(3)
    w1, b1 = mlp_weights[:2]
    rows = rng.uniform(0, 1, (BATCH, 64)).astype(np.float32)
    hidden = rng.standard_normal((BATCH, HIDDEN)).astype(np.float32)
    x = rng.uniform(0, 1, (BATCH, 8, 8, 1)).astype(np.float32)
    f, b, w, c = weights
    conv_out = rng.standard_normal((BATCH, 8, 8, FILTERS)).astype(np.float32)
    flat = rng.standard_normal((BATCH, 4 * 4 * FILTERS)).astype(np.float32)
    logits = rng.standard_normal((BATCH, 10)).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, BATCH)]
    ours, stock = Ops(tf, gen), Ops(tf, None)
    raw = tf.raw_ops
    return [
        ("Conv2D 256x8x8x1 * 3x3x1x32 SAME", ours.conv2d, stock.conv2d, [x, f],
         lambda x, f: raw.Conv2D(input=x, filter=f, strides=[1, 1, 1, 1], padding="SAME"),
         gen["conv"].conv2d_grad),
        ("BiasAdd 256x8x8x32 + 32", ours.bias_add, stock.bias_add, [conv_out, b],
         lambda v, b: raw.BiasAdd(value=v, bias=b), gen["nn"].bias_add_grad),
        ("Relu 256x8x8x32", ours.relu, stock.relu, [conv_out],
         lambda v: raw.Relu(features=v), gen["unary"].relu_grad),
        ("MaxPool 256x8x8x32, 2x2/2 VALID", ours.max_pool, stock.max_pool, [conv_out],
         lambda v: raw.MaxPool(input=v, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID"),
         gen["conv"].max_pool_grad),
        ("MatMul 256x512 @ 512x10", ours.matmul, stock.matmul, [flat, w],
         lambda a, b: raw.MatMul(a=a, b=b), gen["matmul"].matmul_grad),
        ("SoftmaxCrossEntropyWithLogits 256x10", ours.xent, stock.xent, [logits, labels],
         lambda f, l: raw.SoftmaxCrossEntropyWithLogits(features=f, labels=l), gen["nn"].softmax_cross_entropy_with_logits_grad),
        (f"MatMul 256x64 @ 64x{HIDDEN} (MLP)", ours.matmul, stock.matmul, [rows, w1],
         lambda a, b: raw.MatMul(a=a, b=b), gen["matmul"].matmul_grad),
        (f"BiasAdd 256x{HIDDEN} + {HIDDEN} (MLP)", ours.bias_add, stock.bias_add, [hidden, b1],
         lambda v, b: raw.BiasAdd(value=v, bias=b), gen["nn"].bias_add_grad),
        (f"Relu 256x{HIDDEN} (MLP)", ours.relu, stock.relu, [hidden],
         lambda v: raw.Relu(features=v), gen["unary"].relu_grad),
    ]


def time_ops(tf, gen: dict, weights, mlp_weights, repeats: int) -> list[dict]:
    """Each op alone: forward + backward under a tape, wrapper against stock; and the
    gradient function alone on the real op, generated against registered."""
    from tensorflow.python.framework import ops as tf_ops

    rows = []
    for label, ours, stock, inputs, build, ours_grad in op_cases(tf, gen, weights, mlp_weights):
        xs = [tf.constant(v) for v in inputs]

        def taped(fn):
            @tf.function
            def call(xs):
                with tf.GradientTape() as tape:
                    tape.watch(xs)
                    out = fn(*xs)
                    loss = tf.reduce_sum(out * out)
                return tape.gradient(loss, xs)

            return lambda: [g.numpy() for g in call(xs)]

        def gradient(pick):
            @tf.function
            def call(xs):
                outs = build(*xs)
                outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
                grads = pick(outs[0].op)(outs[0].op, *[tf.ones_like(o) for o in outs])
                return [g for g in (grads if isinstance(grads, (list, tuple)) else [grads]) if g is not None]

            return lambda: [g.numpy() for g in call(xs)]

        contenders = [
            Contender("ours fwd+bwd", taped(ours)),
            Contender("stock fwd+bwd", taped(stock)),
            Contender("ours grad", gradient(lambda op: ours_grad)),
            Contender("registered grad", gradient(tf_ops.get_gradient_function)),
        ]
        for c in contenders:
            c.run()
        medians = time_interleaved(contenders, repeats, min_sample=0.02)
        rows.append(
            {
                "op": label,
                **{name.replace(" ", "_").replace("+", "_") + "_ms": 1e3 * t for name, t in medians.items()},
                "fwd_bwd_ratio": medians["ours fwd+bwd"] / medians["stock fwd+bwd"],
                "grad_ratio": medians["ours grad"] / medians["registered grad"],
            }
        )
    return rows


# --- main -------------------------------------------------------------------------------------


def load_average() -> str:
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return "unknown"
    return f"{load:.2f}" + (" (busy: other processes compete for the cores)" if load > 1.0 else "")


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    steps = args.steps or (1 if args.smoke else 5 if args.quick else 10)
    repeats = args.repeats or (1 if args.smoke else 7 if args.quick else 21)
    if args.smoke:
        args.no_ops, args.train_epochs = True, 1
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    gen = load_generated(args.generated)
    x_train, y_train, x_test, y_test, source = load_digits()
    data = [(tf.constant(x), tf.constant(y)) for x, y in batches(x_train, y_train, max(steps, 3))]
    print(f"data: {source}; batch {BATCH}; load average at start {load_average()}")
    print(f"tensorflow {tf.__version__}, generated modules from {args.generated}")

    kinds = ("mlp", "cnn")
    ours_ops, stock_ops = Ops(tf, gen), Ops(tf, None)

    def fresh_models():
        return {k: (Model(tf, k, ours_ops, initial_weights(k)), Model(tf, k, stock_ops, initial_weights(k))) for k in kinds}

    for line in check_same_math(fresh_models(), data):
        print("same math:", line)

    started = time.perf_counter()
    timed = time_steps(fresh_models(), data, steps, repeats)
    print(f"\nwarm step, median of {repeats} interleaved samples of {steps} steps ({time.perf_counter() - started:.0f} s):")
    for kind, row in timed.items():
        print(f"  {kind.upper()}: ours {row['ours_ms']:.3f} ms, stock {row['stock_ms']:.3f} ms, ours/stock {row['ratio']:.2f}")

    op_rows = []
    if not args.no_ops:
        op_rows = time_ops(tf, gen, initial_weights("cnn"), initial_weights("mlp"), max(5, repeats // 2))
        print("\neach op of the models alone (median ms; fwd+bwd under a tape; grad: the gradient function on the real op):")
        print(f"  {'op':40} {'ours f+b':>9} {'stock f+b':>9} {'ratio':>6} {'ours grad':>9} {'TF grad':>9} {'ratio':>6}")
        for r in op_rows:
            print(
                f"  {r['op']:40} {r['ours_fwd_bwd_ms']:9.3f} {r['stock_fwd_bwd_ms']:9.3f} {r['fwd_bwd_ratio']:6.2f}"
                f" {r['ours_grad_ms']:9.3f} {r['registered_grad_ms']:9.3f} {r['grad_ratio']:6.2f}"
            )
        slowest = max(op_rows, key=lambda r: r["ours_fwd_bwd_ms"] - r["stock_fwd_bwd_ms"])
        print(
            f"  most time lost: {slowest['op']}, {slowest['ours_fwd_bwd_ms'] - slowest['stock_fwd_bwd_ms']:.3f} ms"
            f" per call; its gradient alone is {slowest['grad_ratio']:.2f}x TensorFlow's"
        )

    epochs = 5 if args.quick else args.train_epochs
    train = batches(x_train, y_train, epochs * (len(x_train) // BATCH), seed=4)
    train = [(tf.constant(x), tf.constant(y)) for x, y in train]
    accuracy = {}
    print(f"\ntest accuracy after {len(train)} steps ({len(x_test)} test images):")
    for kind, pair in fresh_models().items():
        for model in pair:
            for x, y in train:
                model.step(x, y)
            accuracy[f"{kind}_{model.ops.name}"] = model.accuracy(x_test, y_test)
        print(f"  {kind.upper()}: ours {accuracy[kind + '_ours']:.3f}, stock {accuracy[kind + '_stock']:.3f}")

    if args.json:
        report = {
            "data": source,
            "batch": BATCH,
            "steps_per_sample": steps,
            "repeats": repeats,
            "load_average_at_start": load_average(),
            "tensorflow": tf.__version__,
            "step": timed,
            "ops": op_rows,
            "accuracy": accuracy,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

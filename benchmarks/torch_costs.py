"""The generated PyTorch and JAX ops against their framework's own autodiff of the same
forward (`<op>_forward`), at a transformer's and a CNN's sizes, in one run, each as a ratio
measured in the same run (below 1: the derived op is faster or leaner):

* torch, eager: forward+backward time of the generated op against autograd of its formula,
  and the bytes each saves for backward (`saved_tensors_hooks`, each storage once);
* torch, compiled: both under `torch.compile` (inductor), forward+backward;
* JAX: `jax.vjp` of the generated `custom_vjp` op against `jax.vjp` of its formula, forward and
  gradient under `jax.jit`.

Inputs a model does not train (a mask, the rotary tables, labels, a frozen input) require no
gradient, as in a model.

    python benchmarks/torch_costs.py [--generated generated] [--repeats 20] [--no-compile]
        [--no-jax] [--only LayerNorm ...] [--json FILE] [--png FILE]

Prints one row per op and the median and largest ratio of each column; `--png` draws them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from symgrad.backends.torch.costs import saved_bytes  # noqa: E402
from symgrad.runtime_module import import_generated  # noqa: E402

B, T, H, D, V = 8, 128, 4, 64, 256  # batch, context, heads, head width, vocabulary
WIDTH = H * D


def _r(*shape, grad=True):
    return torch.randn(*shape).requires_grad_(grad)


def _module(generated: Path, stem: str, target: str = "torch"):
    return import_generated(generated / f"{stem}_{target}.py", f"_bench_{stem}_{target}")


def cases(generated: Path) -> list[tuple[str, str, str, list, dict]]:
    """(label, module stem, function, inputs, attributes) for each op timed: those a
    transformer layer and a small CNN call, and the library's elementwise and normalising ops."""
    causal = torch.triu(torch.full((T, T), -1e9), 1)
    angles = torch.arange(T)[:, None] * torch.rand(D // 2)
    wide = [_r(B * T, 4 * WIDTH)]
    return [
        ("LayerNorm", "composed", "layer_norm", [_r(B, T, WIDTH), _r(WIDTH), _r(WIDTH)], {}),
        ("MatMul", "matmul", "matmul", [_r(B * T, WIDTH), _r(WIDTH, 4 * WIDTH)], {}),
        ("MatMul, frozen input", "matmul", "matmul", [_r(B * T, WIDTH, grad=False), _r(WIDTH, 4 * WIDTH)], {}),
        ("BiasAdd", "nn", "bias_add", [_r(B, T, 4 * WIDTH), _r(4 * WIDTH)], {}),
        ("BiasGelu", "composed", "bias_gelu", [_r(B, T, 4 * WIDTH), _r(4 * WIDTH)], {}),
        ("Softmax", "nn", "softmax", [_r(B, H, T, T)], {}),
        ("LogSoftmax", "nn", "log_softmax", [_r(B * T, V)], {}),
        ("RotaryEmbedding", "composed", "rotary_embedding",
         [_r(B, H, T, D), torch.cos(angles).repeat(1, 2), torch.sin(angles).repeat(1, 2)], {}),
        ("ScaledDotProductAttention", "composed", "scaled_dot_product_attention",
         [_r(B * H, T, D), _r(B * H, T, D), _r(B * H, T, D), causal], {}),
        ("SparseSoftmaxCrossEntropyWithLogits", "nn", "sparse_softmax_cross_entropy_with_logits",
         [_r(B * T, V), torch.randint(0, V, (B * T,))], {}),
        ("GatherV2 (embedding)", "gather", "gather_v2", [_r(V, WIDTH), torch.randint(0, V, (B, T))], {}),
        ("AddV2 (residual)", "binary", "add", [_r(B, T, WIDTH), _r(B, T, WIDTH)], {}),
        ("Mul, broadcast", "binary", "multiply", [_r(B * T, 4 * WIDTH), _r(4 * WIDTH)], {}),
        ("Sigmoid", "unary", "sigmoid", wide, {}),
        ("Tanh", "unary", "tanh", wide, {}),
        ("Softplus", "unary", "softplus", wide, {}),
        ("Elu", "unary", "elu", wide, {}),
        ("Relu", "unary", "relu", wide, {}),
        ("BatchNormTraining", "composed", "batch_norm_training", [_r(32, 16, 16, 64), _r(64), _r(64)], {}),
        ("GroupNorm", "composed", "group_norm", [_r(32, 16, 16, 64), _r(64), _r(64)], {}),
        ("Conv2D 3x3 SAME", "conv", "conv2d", [_r(32, 16, 16, 32), _r(3, 3, 32, 64)],
         {"padding": "SAME", "strides": (1, 1, 1, 1)}),
        ("Cumsum", "reductions", "cumsum", [_r(B * T, 4 * WIDTH)], {}),
    ]


def _wanted(inputs):
    return [x for x in inputs if isinstance(x, torch.Tensor) and x.requires_grad]


def _step(fn, inputs, attrs):
    """One forward and backward: the gradients of the first output's sum-like contraction."""
    outputs = fn(*inputs, **attrs)
    first = outputs[0] if isinstance(outputs, (tuple, list)) else outputs
    return torch.autograd.grad(first, _wanted(inputs), torch.ones_like(first))


def _interleaved(contenders: dict, repeats: int) -> dict:
    """The best of `repeats` runs of each zero-argument contender, in seconds, taken in turns
    (three rounds), so that a busy machine slows them alike."""
    best = dict.fromkeys(contenders, float("inf"))
    for _ in range(3):
        for name, run in contenders.items():
            for _ in range(repeats):
                start = time.perf_counter()
                run()
                best[name] = min(best[name], time.perf_counter() - start)
    return best


def measure_torch(generated: Path, repeats: int, compile_too: bool, only) -> list[dict]:
    rows = []
    for label, stem, name, inputs, attrs in cases(generated):
        if only and label.split(",")[0].split(" ")[0] not in only:
            continue
        module = _module(generated, stem)
        op, formula = getattr(module, name), getattr(module, f"{name}_forward")
        contenders = {"ours": lambda: _step(op, inputs, attrs), "theirs": lambda: _step(formula, inputs, attrs)}
        if compile_too:
            compiled_op, compiled_formula = torch.compile(op), torch.compile(formula)
            contenders["ours compiled"] = lambda: _step(compiled_op, inputs, attrs)
            contenders["theirs compiled"] = lambda: _step(compiled_formula, inputs, attrs)
        for run in contenders.values():  # warm up (and compile)
            run()
        best = _interleaved(contenders, repeats)
        ours_saved, _ = saved_bytes(lambda: op(*inputs, **attrs))
        theirs_saved, _ = saved_bytes(lambda: formula(*inputs, **attrs))
        row = {"op": label, "eager": best["ours"] / best["theirs"], "ms": 1e3 * best["ours"],
               "saved": ours_saved / max(theirs_saved, 1), "saved_mb": ours_saved / 2**20,
               "autograd_saved_mb": theirs_saved / 2**20}
        if compile_too:
            row["compiled"] = best["ours compiled"] / best["theirs compiled"]
            torch._dynamo.reset()
        rows.append(row)
        print(_row_text(row), flush=True)
    return rows


def measure_jax(generated: Path, repeats: int, only) -> dict:
    """label -> the JAX target's forward+gradient time over `jax.vjp` of its formula, both jitted."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    ratios = {}
    for label, stem, name, inputs, attrs in cases(generated):
        if only and label.split(",")[0].split(" ")[0] not in only:
            continue
        module = _module(generated, stem, "jax")
        arrays = [jax.numpy.asarray(x.detach().numpy()) for x in inputs]
        free = [k for k, x in enumerate(inputs) if x.requires_grad]
        runs = {}
        for key, fn in (("ours", getattr(module, name)), ("theirs", getattr(module, f"{name}_forward"))):
            runs[key] = _jax_step(jax, fn, arrays, free, attrs)
        for run in runs.values():
            run()
        best = _interleaved(runs, repeats)
        ratios[label] = best["ours"] / best["theirs"]
    return ratios


def _jax_step(jax, fn, arrays, free, attrs):
    """A zero-argument run of `fn`'s forward and jitted vjp with respect to the inputs at
    `free`, for a random cotangent of its first output: every array an argument of the jitted
    function (a constant one, as `jax.grad` of a sum would make the cotangent, lets XLA fold
    the gradient at compile time)."""
    def gradient(xs, fixed, cotangent):
        def first(*xs):
            full = list(fixed)
            for k, x in zip(free, xs):
                full[k] = x
            outputs = fn(*full, **attrs)
            return outputs[0] if isinstance(outputs, (tuple, list)) else outputs

        _, vjp = jax.vjp(first, *xs)
        return vjp(cotangent)

    xs = [arrays[k] for k in free]
    shape = jax.eval_shape(lambda: _first_output(fn(*arrays, **attrs)))
    cotangent = jax.random.normal(jax.random.key(0), shape.shape, shape.dtype)
    jitted = jax.jit(gradient)
    return lambda: jax.block_until_ready(jitted(xs, arrays, cotangent))


def _first_output(outputs):
    return outputs[0] if isinstance(outputs, (tuple, list)) else outputs


def _row_text(row: dict) -> str:
    compiled = f"{row['compiled']:9.2f}" if "compiled" in row else f"{'-':>9}"
    jax_ratio = f"{row['jax']:6.2f}" if "jax" in row else f"{'-':>6}"
    return (f"{row['op']:38} {row['eager']:6.2f} {row['ms']:8.2f} {compiled} {jax_ratio} {row['saved']:6.2f} "
            f"{row['saved_mb']:7.2f} {row['autograd_saved_mb']:8.2f}")


def summary(rows: list[dict]) -> list[str]:
    lines = []
    for column, against in (("eager", "autograd, eager"), ("compiled", "compiled autograd"),
                            ("jax", "jax.vjp, jitted")):
        values = [r[column] for r in rows if column in r]
        if values:
            lines.append(f"{column:9} against {against}: median {statistics.median(values):.2f}x, "
                         f"max {max(values):.2f}x over {len(values)} ops")
    saved = sum(r["saved_mb"] for r in rows)
    lines.append(f"bytes saved for backward: {saved:.1f} MB against autograd's "
                 f"{sum(r['autograd_saved_mb'] for r in rows):.1f} MB")
    return lines


def chart(rows: list[dict], path: Path) -> None:
    """One group of bars per op: each ratio against its framework's autodiff (1: as fast)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = [c for c in ("eager", "compiled", "jax", "saved") if any(c in r for r in rows)]
    labels = {"eager": "torch eager, time", "compiled": "torch compiled, time", "jax": "JAX jitted, time",
              "saved": "torch, bytes saved"}
    fig, axis = plt.subplots(figsize=(11, 0.32 * len(rows) * len(columns) / 2 + 1.5))
    height = 0.8 / len(columns)
    for n, column in enumerate(columns):
        positions = [k + n * height for k in range(len(rows))]
        axis.barh(positions, [r.get(column, 0) for r in rows], height, label=labels[column])
    axis.set_yticks([k + 0.4 - height / 2 for k in range(len(rows))], [r["op"] for r in rows], fontsize=8)
    axis.invert_yaxis()
    axis.axvline(1.0, color="black", linewidth=0.8)
    axis.set_xlabel("derived / framework autodiff (below 1: faster or leaner)")
    axis.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--generated", type=Path, default=ROOT / "generated")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile columns")
    parser.add_argument("--no-jax", action="store_true", help="skip the JAX column")
    parser.add_argument("--only", nargs="*", help="op types to time (the first word of a row's label)")
    parser.add_argument("--json", type=Path, help="write the rows here")
    parser.add_argument("--png", type=Path, help="draw the ratios here")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    print(f"load average at start: {os.getloadavg()[0]:.2f}; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    print(f"{'op':38} {'eager':>6} {'ms':>8} {'compiled':>9} {'jax':>6} {'saved':>6} {'MB':>7} {'autograd':>8}")
    rows = measure_torch(args.generated, args.repeats, not args.no_compile, args.only)
    if not args.no_jax:
        for row, (label, ratio) in zip(rows, measure_jax(args.generated, args.repeats, args.only).items()):
            row["jax"] = ratio
        print("with JAX:")
        for row in rows:
            print(_row_text(row))
    for line in summary(rows):
        print(line)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "torch": torch.__version__,
                                         "load": os.getloadavg()[0]}, indent=1) + "\n")
    if args.png:
        chart(rows, args.png)


if __name__ == "__main__":
    np.random.seed(0)
    main()

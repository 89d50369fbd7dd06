"""The generated PyTorch ops of a small transformer against autograd of their own formulas
(`<op>_forward`), eager, at a transformer's sizes: forward+backward time and the bytes saved
for backward, each as a ratio measured in the same run. Inputs a model does not train (a
mask, the rotary tables, labels, a frozen input) require no gradient, as in a model.

    python benchmarks/torch_costs.py [--generated generated] [--repeats 20]

Prints one row per op and the median and largest ratios (below 1: the derived op is faster
or leaner).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from symgrad.backends.torch.costs import saved_bytes  # noqa: E402
from symgrad.runtime_module import import_generated  # noqa: E402

B, T, H, D, V = 8, 128, 4, 64, 256  # batch, context, heads, head width, vocabulary
WIDTH = H * D


def _r(*shape, grad=True):
    return torch.randn(*shape).requires_grad_(grad)


def cases(generated: Path) -> list[tuple[str, object, object, list]]:
    """(label, op, its formula, inputs) for each op a transformer layer calls."""
    module = lambda stem: import_generated(generated / f"{stem}_torch.py", f"_bench_{stem}_torch")
    composed, nn, mm, gather = module("composed"), module("nn"), module("matmul"), module("gather")
    causal = torch.triu(torch.full((T, T), -1e9), 1)
    angles = torch.arange(T)[:, None] * torch.rand(D // 2)
    return [
        ("LayerNorm", composed.layer_norm, composed.layer_norm_forward, [_r(B, T, WIDTH), _r(WIDTH), _r(WIDTH)]),
        ("MatMul", mm.matmul, mm.matmul_forward, [_r(B * T, WIDTH), _r(WIDTH, 4 * WIDTH)]),
        ("MatMul, frozen input", mm.matmul, mm.matmul_forward, [_r(B * T, WIDTH, grad=False), _r(WIDTH, 4 * WIDTH)]),
        ("BiasAdd", nn.bias_add, nn.bias_add_forward, [_r(B, T, 4 * WIDTH), _r(4 * WIDTH)]),
        ("BiasGelu", composed.bias_gelu, composed.bias_gelu_forward, [_r(B, T, 4 * WIDTH), _r(4 * WIDTH)]),
        ("Softmax", nn.softmax, nn.softmax_forward, [_r(B, H, T, T)]),
        ("RotaryEmbedding", composed.rotary_embedding, composed.rotary_embedding_forward,
         [_r(B, H, T, D), torch.cos(angles).repeat(1, 2), torch.sin(angles).repeat(1, 2)]),
        ("ScaledDotProductAttention", composed.scaled_dot_product_attention,
         composed.scaled_dot_product_attention_forward, [_r(B * H, T, D), _r(B * H, T, D), _r(B * H, T, D), causal]),
        ("SparseSoftmaxCrossEntropyWithLogits", nn.sparse_softmax_cross_entropy_with_logits,
         nn.sparse_softmax_cross_entropy_with_logits_forward, [_r(B * T, V), torch.randint(0, V, (B * T,))]),
        ("GatherV2 (embedding)", gather.gather_v2, gather.gather_v2_forward, [_r(V, WIDTH), torch.randint(0, V, (B, T))]),
    ]


def _step(fn, inputs):
    outputs = fn(*inputs)
    first = outputs[0] if isinstance(outputs, (tuple, list)) else outputs
    wanted = [x for x in inputs if x.requires_grad]
    torch.autograd.grad(first, wanted, torch.ones_like(first))


def _best_time(fn, inputs, repeats: int) -> float:
    """The best of `repeats` forward+backward runs, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        _step(fn, inputs)
        best = min(best, time.perf_counter() - start)
    return best


def measure(generated: Path, repeats: int) -> list[dict]:
    rows = []
    for label, op, formula, inputs in cases(generated):
        _step(op, inputs), _step(formula, inputs)  # warm up
        times = {"ours": [], "theirs": []}
        for _ in range(3):  # interleaved, so that a busy machine slows both alike
            times["ours"].append(_best_time(op, inputs, repeats))
            times["theirs"].append(_best_time(formula, inputs, repeats))
        ours_saved, _ = saved_bytes(lambda: op(*inputs))
        theirs_saved, _ = saved_bytes(lambda: formula(*inputs))
        rows.append({"op": label, "time": min(times["ours"]) / min(times["theirs"]),
                     "ms": 1e3 * min(times["ours"]), "saved": ours_saved / max(theirs_saved, 1),
                     "saved_mb": ours_saved / 2**20, "autograd_saved_mb": theirs_saved / 2**20})
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--generated", type=Path, default=ROOT / "generated")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    rows = measure(args.generated, args.repeats)
    print(f"{'op':40} {'time':>6} {'ms':>8} {'saved':>6} {'MB':>7} {'autograd MB':>12}")
    for r in rows:
        print(f"{r['op']:40} {r['time']:6.2f} {r['ms']:8.2f} {r['saved']:6.2f} {r['saved_mb']:7.2f} {r['autograd_saved_mb']:12.2f}")
    times = [r["time"] for r in rows]
    print(f"time against autograd of the formula: median {statistics.median(times):.2f}x, max {max(times):.2f}x "
          f"(torch {torch.__version__}, {torch.get_num_threads()} threads)")
    saved = [r["saved_mb"] for r in rows]
    print(f"bytes saved for backward: {sum(saved):.1f} MB against {sum(r['autograd_saved_mb'] for r in rows):.1f} MB")


if __name__ == "__main__":
    main()

"""Causal attention written the ways a new user first writes it (examples/causal_attention.py:
Sum limits `(j, 0, i)`, the same indices named apart, an `indicator(j <= i)` mask with and
without stages), timed as forward + backward of the generated PyTorch op against the
library's ScaledDotProductAttention with an additive causal bias, autograd of the formula
with that bias, and `F.scaled_dot_product_attention(is_causal=True)`, in one process.

    python benchmarks/causal_attention.py [--threads N] [--repeats N] [--json FILE]

Derived into a temporary folder first (every target verified, as `symgrad derive` does).
Printed: the median milliseconds of each over interleaved rounds, and its ratio to the
additive-bias op. No time is
asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHAPE = {"batch": 4, "heads": 4, "T": 128, "D": 32}
FORMS = {"limits": "causal_limits", "apart": "causal_apart", "mask": "causal_mask", "unstaged": "causal_unstaged"}


def derived(folder: Path):
    from symgrad.generate import generate
    from symgrad.runtime_module import import_generated

    for name, text in generate([ROOT / "examples" / "causal_attention.py"], ("numpy", "torch")).items():
        (folder / name).write_text(text)
    return import_generated(folder / "causal_attention_torch.py", "_causal_attention_torch")


def cases(torch, module):
    sys.path.insert(0, str(ROOT / "generated"))
    import composed_torch

    F = torch.nn.functional
    b, h, t, d = SHAPE["batch"], SHAPE["heads"], SHAPE["T"], SHAPE["D"]
    q, k, v = (torch.randn(b, h, t, d, requires_grad=True) for _ in range(3))
    grad = torch.randn(b, h, t, d)
    bias = torch.triu(torch.full((t, t), float("-inf")), 1)
    calls = {
        "additive bias (ScaledDotProductAttention)": lambda: composed_torch.scaled_dot_product_attention(q, k, v, bias),
        "autograd of the formula, additive bias": lambda: torch.softmax(q @ k.transpose(-1, -2) / d**0.5 + bias, -1) @ v,
        "F.scaled_dot_product_attention(is_causal=True)": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    }
    calls |= {f"derived, {form}": (lambda f=getattr(module, name): f(q, k, v)) for form, name in FORMS.items()}
    return {name: (lambda call=call: torch.autograd.grad(call(), (q, k, v), grad)) for name, call in calls.items()}


def timed(steps: dict, repeats: int) -> dict:
    """The median milliseconds of each step, the steps run in turn in each of `repeats`
    rounds (interleaved: a slow spell of the machine falls on all of them)."""
    for step in steps.values():
        for _ in range(3):
            step()
    times = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) * 1e3 for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as folder:
        steps = cases(torch, derived(Path(folder)))
        results = timed(steps, args.repeats)
    reference = results["additive bias (ScaledDotProductAttention)"]
    for name, ms in results.items():
        print(f"{name:50s} {ms:8.2f} ms  {ms / reference:5.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"shape": SHAPE, "threads": args.threads, "ms": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()

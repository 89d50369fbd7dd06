"""What passing the forward's stages to a composed op's gradient saves, numpy, float32.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/passed_stages.py [--repeats N]

Times `<op>_grad` computing the stages it reads (as a registered TensorFlow gradient must)
against `<op>_grad(..., **stages)` given them by `<op>(..., return_stages=True)`, interleaved,
and prints the medians and their ratio, for attention (8 x 512 x 64), layer norm
(4096 x 1024) and the MLP block (1024 x 1024 x 4096) from `generated/composed_numpy.py`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "generated"))

import composed_numpy as composed  # noqa: E402

SHAPES = {
    "ScaledDotProductAttention (8 x 512 x 64)": (
        composed.scaled_dot_product_attention, [(8, 512, 64), (8, 512, 64), (8, 512, 64), (8, 512, 512)]),
    "LayerNorm (4096 x 1024)": (composed.layer_norm, [(4096, 1024), (1024,), (1024,)]),
    "MlpBlock (1024 x 1024 x 4096)": (
        composed.mlp_block, [(1024, 1024), (1024, 4096), (4096,), (4096, 1024), (1024,)]),
}


def median_times(calls: dict, repeats: int) -> dict:
    """Median seconds per call of each of `calls`, run interleaved."""
    times = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    for label, (forward, shapes) in SHAPES.items():
        grad = getattr(composed, forward.__name__ + "_grad")
        inputs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        output, stages = forward(*inputs, return_stages=True)
        upstream = rng.standard_normal(output.shape).astype(np.float32)
        medians = median_times(
            {"recomputed": lambda: grad(upstream, *inputs), "given": lambda: grad(upstream, *inputs, **stages)},
            args.repeats,
        )
        print(f"{label}: stages recomputed {medians['recomputed'] * 1e3:.1f} ms, given "
              f"({', '.join(stages)}) {medians['given'] * 1e3:.1f} ms: {medians['given'] / medians['recomputed']:.2f}x")


if __name__ == "__main__":
    main()

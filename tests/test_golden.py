"""Golden files: the generated gradients of Softmax, BatchMatMulV2, Einsum's trace, Conv2D,
a StridedSlice branch (rank 2: strides of either sign, begin and end masks), and of two
composed ops, attention and layer normalisation, whole.

Regenerate after an intended change with `python tests/test_golden.py` and review the diff.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parent / "golden"
STRIDED_RANK_2 = "rank == 2 and shrink_axis_mask in (0, 1)"
# (generated module, function, the condition of one branch or None) -> golden file
PINNED = {
    ("nn_numpy.py", "softmax_grad", None): "softmax_grad_numpy.py",
    ("nn_tf.py", "softmax_vjp", None): "softmax_vjp_tf.py",
    ("batch_matmul_numpy.py", "batch_mat_mul_v2_grad", None): "batch_mat_mul_v2_grad_numpy.py",
    ("batch_matmul_tf.py", "batch_mat_mul_v2_vjp", None): "batch_mat_mul_v2_vjp_tf.py",
    ("einsum_numpy.py", "einsum_grad", 'equation == "ii->"'): "einsum_trace_grad_numpy.py",
    ("einsum_tf.py", "einsum_vjp", 'equation == "ii->"'): "einsum_trace_vjp_tf.py",
    ("array_numpy.py", "strided_slice_grad", STRIDED_RANK_2): "strided_slice_rank_2_grad_numpy.py",
    ("array_tf.py", "strided_slice_vjp", STRIDED_RANK_2): "strided_slice_rank_2_vjp_tf.py",
    ("conv_numpy.py", "conv2d_grad", None): "conv2d_grad_numpy.py",
    ("conv_tf.py", "conv2d_vjp", None): "conv2d_vjp_tf.py",
    ("composed_numpy.py", "scaled_dot_product_attention_grad", None): "attention_grad_numpy.py",
    ("composed_tf.py", "scaled_dot_product_attention_vjp", None): "attention_vjp_tf.py",
    ("composed_numpy.py", "layer_norm_grad", None): "layer_norm_grad_numpy.py",
    ("composed_tf.py", "layer_norm_vjp", None): "layer_norm_vjp_tf.py",
    ("nn_jax.py", "softmax_vjp", None): "softmax_vjp_jax.py",
    ("_symgrad_jax.py", "_custom_vjp", None): "custom_vjp_jax.py",
    ("composed_jax.py", "layer_norm_vjp", None): "layer_norm_vjp_jax.py",
    ("conv_jax.py", "conv2d_vjp", None): "conv2d_vjp_jax.py",
    ("matmul_torch.py", "matmul_vjp", None): "matmul_vjp_torch.py",
    ("nn_torch.py", "softmax_vjp", None): "softmax_vjp_torch.py",
    ("composed_torch.py", "layer_norm_vjp", None): "layer_norm_vjp_torch.py",
}


def function_source(module: str, name: str, condition: str | None) -> str:
    """The text of `def name(...)` in `module`; with `condition`, only the branch it guards."""
    start = module.index(f"\ndef {name}(") + 1
    end = module.find("\n\n\n", start)
    text = module[start : end if end != -1 else len(module)] + "\n"
    if condition is None:
        return text
    branch = text[text.index(f"{condition}:") :]
    return branch[: branch.index("\n    elif ")] + "\n"


@pytest.mark.parametrize("key", sorted(PINNED), ids=lambda k: PINNED[k])
def test_generated_gradient_matches_golden(derived, key):
    _, files = derived
    module, name, condition = key
    assert function_source(files[module], name, condition) == (GOLDEN / PINNED[key]).read_text()


if __name__ == "__main__":  # regenerate the golden files from generated/
    root = GOLDEN.parent.parent / "generated"
    for (module, name, condition), golden in PINNED.items():
        (GOLDEN / golden).write_text(function_source((root / module).read_text(), name, condition))
    sys.exit(0)

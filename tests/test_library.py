"""Every op declared in ops/, one test each: against TensorFlow's registered gradient (numpy
and TensorFlow targets, every dtype) and against central finite differences. The default run
checks the first of an op's attribute variants; `pytest -m exhaustive` every variant.

A row that differs from TensorFlow passes only with the verdict that finite differences side
with the derived gradient (a fault in TensorFlow's); a row without a reference only where
TensorFlow has no op, or rejects the dtype.
"""

from __future__ import annotations

import importlib.util

import pytest

from conftest import LIBRARY_SCOPES, OPS, require_tf
from symgrad.load import load_op_file, op_file_paths
from symgrad.verify.verdict import REFERENCE_WRONG

DECLARED = sorted(d.name for path in op_file_paths([OPS]) for d in load_op_file(path).ops)
# why an op (or some of its rows) has no TensorFlow reference
NO_REFERENCE = {
    "ReduceLogSumExp": "TensorFlow composes it; it has no op type",
    "QuantizeAndDequantize": "TensorFlow removed its kernel at GraphDef version 22 (QuantizeAndDequantizeV2 replaces it)",
    "Trace": "TensorFlow composes it (tf.linalg.trace); it has no op type",
    "SoftsignGrad": "TensorFlow registers no gradient for it",
    "Einsum": "TensorFlow's Einsum op takes one or two operands; the three-operand equation has none",
    "SparseMatMul": "TensorFlow's SparseMatMul takes float32 and bfloat16 only: float64 has none",
    "Conv2D": "TensorFlow's Conv2D gradient refuses dilations above 1 on the CPU (float32 VALID "
    "and SAME excepted, through oneDNN): those rows have none",
    "AvgPool3D": "TensorFlow's AvgPool3D has a CPU kernel for float32 only: float64 has none",
    **{name: f"TensorFlow's {name} has a CPU kernel for float32 (half, bfloat16) only: float64 has none"
       for name in ("MaxPool3D", "MaxPool3DGrad", "MaxPool3DGradGrad", "AvgPool3DGrad")},
    **{name: f"TensorFlow's {name} refuses dilations above 1 on the CPU: those rows have none"
       for name in ("Conv2DBackpropInput", "Conv2DBackpropFilter")},
    **{name: f"TensorFlow's {name} takes equal row and column strides only: strides (1, 2, 3, 1) have none"
       for name in ("DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter")},
    "BatchNormWithGlobalNormalization": "TensorFlow 2.21 refuses to run it (removed in GraphDef version 9: "
    "'Use tf.nn.batch_normalization()'), though nn_grad.py still registers its gradient",
    "LRN": "TensorFlow's LRN takes half, bfloat16 and float32 only: float64 has none",
    **{name: f"TensorFlow's {name} takes x in float32 (half, bfloat16) only: float64 has none"
       for name in ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")},
}
# compositions no framework has as one op type: tests/test_composed.py checks each against
# TensorFlow's autodiff of the same forward written in plain TF
NO_REFERENCE.update({
    name: "a composition: TensorFlow has no op type"
    for name in ("LayerNorm", "LayerNormMoments", "BatchNormTraining", "GroupNorm", "ScaledDotProductAttention",
                 "MlpBlock", "CosineSimilarity", "RbfKernel", "LogSumExpMatMul", "BiasGelu", "RotaryEmbedding")
})
# where differences of the forward cannot judge a gradient
FINITE_DIFFERENCE_LIMITS = {
    # scipy's fresnel (cephes) returns the limit 1/2 for x**2 > 36974: flat at |x| = 1000,
    # where the derivative cos(pi x**2 / 2) is 1
    "FresnelCos": "probes: large magnitudes",
}

# where a gradient is NaN or infinite at extreme inputs though the derivative there is finite
# (`symgrad.verify.extremes`): none now (CumulativeLogsumexp, Expint, BesselI0 and BesselI1 were,
# until their stable forms); an op listed here would be skipped with its reason
NONFINITE_AT_EXTREMES: dict[str, str] = {}


# the JAX target's own: what JAX lacks or computes otherwise
JAX_UNAVAILABLE = {
    name: "jax.scipy.special has no Bessel K or Y functions (JAX 0.10)"
    for name in ("BesselK0", "BesselK0e", "BesselK1", "BesselK1e", "BesselY0", "BesselY1")
}
JAX_UNAVAILABLE.update({
    name: "jax.scipy.special.bessel_jn is NaN at 0 and wrong beyond small arguments (J1(100) = -0.435)"
    for name in ("BesselJ0", "BesselJ1")
})
JAX_NONFINITE_AT_EXTREMES = {
    "Zeta": "jax.scipy.special.zeta is NaN in float32 at x + 1 = 89, large q, where scipy's is finite",
}


def test_library_size():
    assert len(DECLARED) >= 120


@pytest.mark.parametrize("library_report", LIBRARY_SCOPES, indirect=True)
@pytest.mark.parametrize("op_type", DECLARED)
def test_op_matches_tensorflow(library_report, op_type):
    rows = [r for r in library_report[1]["results"] if r["op"] == op_type]
    assert rows, f"{op_type}: no rows"
    for r in rows:
        where = (r["variant"], r["dtype"], r["target"], r["message"][:300])
        if r["status"] == "no-reference":
            assert op_type in NO_REFERENCE, where
        elif r["status"] == "mismatch":
            assert r["verdict"] == REFERENCE_WRONG, where
        else:
            assert r["status"] == "match", where
    if op_type not in NO_REFERENCE:
        assert {r["target"] for r in rows} == {"numpy", "tensorflow"}


@pytest.mark.parametrize("fd_report", LIBRARY_SCOPES, indirect=True)
@pytest.mark.parametrize("op_type", DECLARED)
def test_op_matches_finite_differences(fd_report, op_type):
    rows = [r for r in fd_report["results"] if r["op"] == op_type]
    assert rows, f"{op_type}: no rows"
    for r in rows:
        if r["status"] == "mismatch" and op_type in FINITE_DIFFERENCE_LIMITS:
            assert set(r["detail"]["failing_cases"]) == {FINITE_DIFFERENCE_LIMITS[op_type]}
            continue
        if r["status"] == "non-finite" and op_type in NONFINITE_AT_EXTREMES:
            continue
        if r["target"] == "jax" and (r["status"], op_type) in (("unavailable", op) for op in JAX_UNAVAILABLE):
            continue
        if r["target"] == "jax" and r["status"] == "non-finite" and op_type in JAX_NONFINITE_AT_EXTREMES:
            continue
        assert r["status"] == "match", (r["variant"], r["dtype"], r["target"], r["message"][:300])
    if importlib.util.find_spec("jax") is not None:  # the JAX target is checked where installed
        assert "jax" in {r["target"] for r in rows}

"""Normalisations, local response normalisation, patches and morphology from TensorFlow's nn ops.

TensorFlow writes each of these gradients by hand (nn_grad.py, array_grad.py); here they are
declared as they read on paper, channels last (NHWC, NDHWC), and derived.
"""

import sympy as sp

from symgrad import dims, indices, op, tensor

B, D, H, W, C = dims("B D H W C")
b, z, h, w, c, k = indices("b z h w c k")


@op("BatchNormWithGlobalNormalization", attrs={"variance_epsilon": float, "scale_after_normalization": bool},
    defaults={"variance_epsilon": 1e-3})
def batch_norm_with_global_normalization(variance_epsilon, scale_after_normalization):
    """(t - m) / sqrt(v + variance_epsilon), times gamma if scale_after_normalization, plus beta:
    batch normalisation with given statistics, per channel (the last axis)."""
    t = tensor("t", (B, H, W, C))
    m = tensor("m", (C,))
    v = tensor("v", (C,))
    beta = tensor("beta", (C,))
    gamma = tensor("gamma", (C,))
    normalised = (t[b, h, w, c] - m[c]) / sp.sqrt(v[c] + variance_epsilon)
    scaled = gamma[c] * normalised if scale_after_normalization else normalised
    return {"result": ((b, h, w, c), scaled + beta[c])}


@op("LRN", attrs={"depth_radius": int, "bias": float, "alpha": float, "beta": float},
    defaults={"depth_radius": 5, "bias": 1.0, "alpha": 1.0, "beta": 0.5},
    samples={"depth_radius": (1, 2)})
def lrn(depth_radius, bias, alpha, beta):
    """Local response normalisation: each entry divided by (bias + alpha * the sum of squares
    of the entries within depth_radius of it along the depth axis) ** beta; entries beyond
    the axis's ends read zero."""
    input = tensor("input", (B, H, W, C))
    window = sp.Sum(input[b, h, w, c + k - depth_radius] ** 2, (k, 0, 2 * depth_radius))
    return {"output": ((b, h, w, c), input[b, h, w, c] / (bias + alpha * window) ** beta)}

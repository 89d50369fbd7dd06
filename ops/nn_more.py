"""Normalisations, local response normalisation, patches and morphology from TensorFlow's nn ops.

TensorFlow writes each of these gradients by hand (nn_grad.py, array_grad.py); here they are
declared as they read on paper, channels last (NHWC, NDHWC), and derived.
"""

import sympy as sp

from symgrad import dims, indices, op, stage, tensor

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


FUSED_ATTRS = {"epsilon": float, "exponential_avg_factor": float, "data_format": ("NHWC",), "is_training": bool}
FUSED_DEFAULTS = {"epsilon": 1e-4, "exponential_avg_factor": 1.0, "is_training": True}
# a running average that keeps the batch's statistics alone, and one that mixes in the inputs'
FUSED_SAMPLES = {"exponential_avg_factor": (1.0, 0.5)}


def _fused_batch_norm(epsilon, exponential_avg_factor, is_training, reserve_space_3=False):
    """FusedBatchNorm's outputs, NHWC. Training: normalised by the batch's statistics over
    (batch, height, width); batch_mean and batch_variance are the running averages
    (1 - f) * input + f * batch statistic, the variance Bessel-corrected (n / (n - 1)); the
    reserve spaces hold the batch mean and the biased variance, as TensorFlow's CPU kernel.
    Inference: normalised by the given mean and variance, which the other outputs repeat."""
    x = tensor("x", (B, H, W, C))
    scale = tensor("scale", (C,))
    offset = tensor("offset", (C,))
    mean = tensor("mean", (C,))
    variance = tensor("variance", (C,))
    if is_training:
        count = B * H * W
        over_batch = lambda f: sp.Sum(f, (b, 0, B - 1), (h, 0, H - 1), (w, 0, W - 1))
        used_mean = stage("batch_mean_", (c,), over_batch(x[b, h, w, c]) / count)
        used_variance = stage("batch_variance_", (c,), over_batch((x[b, h, w, c] - used_mean[c]) ** 2) / count)
        f = exponential_avg_factor
        running_mean = (1 - f) * mean[c] + f * used_mean[c]
        running_variance = (1 - f) * variance[c] + f * used_variance[c] * count / (count - 1)
    else:
        used_mean, used_variance = mean, variance
        running_mean, running_variance = mean[c], variance[c]
    normalised = (x[b, h, w, c] - used_mean[c]) / sp.sqrt(used_variance[c] + epsilon)
    outputs = {
        "y": ((b, h, w, c), scale[c] * normalised + offset[c]),
        "batch_mean": ((c,), running_mean),
        "batch_variance": ((c,), running_variance),
        "reserve_space_1": ((c,), used_mean[c]),
        "reserve_space_2": ((c,), used_variance[c]),
    }
    if reserve_space_3:
        outputs["reserve_space_3"] = (((k, 0),), sp.S.Zero)
    return outputs


@op("FusedBatchNorm", attrs=FUSED_ATTRS, defaults=FUSED_DEFAULTS, samples=FUSED_SAMPLES)
def fused_batch_norm(epsilon, exponential_avg_factor, data_format, is_training):
    """Batch normalisation, scaled and offset per channel, with its statistics as outputs."""
    return _fused_batch_norm(epsilon, exponential_avg_factor, is_training)


@op("FusedBatchNormV2", attrs=FUSED_ATTRS, defaults=FUSED_DEFAULTS, samples=FUSED_SAMPLES)
def fused_batch_norm_v2(epsilon, exponential_avg_factor, data_format, is_training):
    """FusedBatchNorm whose scale, offset and statistics may have another dtype than x."""
    return _fused_batch_norm(epsilon, exponential_avg_factor, is_training)


@op("FusedBatchNormV3", attrs=FUSED_ATTRS, defaults=FUSED_DEFAULTS, samples=FUSED_SAMPLES)
def fused_batch_norm_v3(epsilon, exponential_avg_factor, data_format, is_training):
    """FusedBatchNormV2 with a third reserve space, empty on the CPU."""
    return _fused_batch_norm(epsilon, exponential_avg_factor, is_training, reserve_space_3=True)

"""Quantize-and-dequantize (fake quantization, for quantization-aware training): the forward
rounds each entry to one of the 2**num_bits levels of a range, and the gradient is a
convention, the straight-through estimator: the upstream gradient passes as if the rounding
were the identity (its derivative is 0 almost everywhere), none to the range.

The convention is declared, not special-cased: `input + stop_gradient(quantized - input)` has
the value `quantized` and the derivative 1 in `input`; the range is read only inside
`stop_gradient`, so it has no gradient. `symgrad check` differences the forward with each
`stop_gradient` held at its value (the function whose derivative the declaration states).

The forward is TensorFlow's kernel (`quantize_and_dequantize_op.h`): the levels
[-2**(b-1) (+1 narrow), 2**(b-1) - 1] signed or [0, 2**b - 1] unsigned; the scale the larger
side of the range allows without moving 0, that side kept and the other moved to match; the
input clamped to it, scaled, rounded (ties to even, or half up) and scaled back. The range is
given (`range_given`), one for the whole tensor (`axis` -1); QuantizeAndDequantize, the
first version, takes it as attributes (TensorFlow removed its kernel at GraphDef version 22:
no TensorFlow reference), V2 and V3 as scalar inputs, V3 the bit count as an input.
"""

import sympy as sp

from symgrad import Input, attr, elementwise, stop_gradient
from symgrad.functions import rint

# the scale where a side of the range cannot set it (TensorFlow: numeric_limits<T>::max());
# it only ever multiplies 0 (a range of 0 to 0)
LARGEST = 3.4028234663852886e38  # float32's, finite in every float dtype
MODES = {"signed_input": bool, "narrow_range": bool, "range_given": (True,), "axis": (-1,)}
SAMPLES = {"num_bits": (8, 3)}


def straight_through(x, low, high, signed_input, num_bits, narrow_range, half_up=False):
    """x + stop_gradient(quantized(x) - x): the value quantized, the derivative 1."""
    return x + stop_gradient(_quantized(x, low, high, signed_input, num_bits, narrow_range, half_up) - x)


def _quantized(x, low, high, signed_input, num_bits, narrow_range, half_up):
    top = 2 ** (num_bits - 1) - 1 if signed_input else 2**num_bits - 1
    from_high = sp.Piecewise((top / high, high > 0), (LARGEST, True))
    if signed_input:  # the bottom level is negative: the low side may set the scale, the smaller
        bottom = -(2 ** (num_bits - 1)) + (1 if narrow_range else 0)
        low_sets = sp.And(low < 0, sp.Or(high <= 0, bottom / low < top / high))
        scale = sp.Piecewise((bottom / low, low_sets), (from_high, True))
        inverse = sp.Piecewise((low / bottom, low_sets), (high / top, True))
        low, high = sp.Piecewise((low, low_sets), (bottom * inverse, True)), sp.Piecewise((top * inverse, low_sets), (high, True))
    else:  # levels from 0: the high side sets the scale, the low end is 0
        scale, inverse, low = from_high, high / top, 0
    scaled = sp.Max(sp.Min(x, high), low) * scale
    rounded = sp.floor(scaled + sp.S.Half) if half_up else rint(scaled)
    return rounded * inverse


@elementwise(
    "QuantizeAndDequantize",
    attrs={**MODES, "num_bits": int, "input_min": float, "input_max": float},
    defaults={"signed_input": True, "num_bits": 8, "input_min": -1.0, "input_max": 1.0},
    samples={**SAMPLES, "input_min": (-1.0, -0.25), "input_max": (1.0, 2.5)},
    outputs=("output",),
)
def quantize_and_dequantize(input, signed_input, narrow_range, range_given, axis, num_bits, input_min, input_max):
    """output = input rounded to the levels of [input_min, input_max] (attributes); gradient
    straight through."""
    return straight_through(input, input_min, input_max, signed_input, num_bits, narrow_range)


@elementwise(
    "QuantizeAndDequantizeV2",
    attrs={**MODES, "num_bits": int, "round_mode": ("HALF_TO_EVEN", "HALF_UP")},
    defaults={"signed_input": True, "num_bits": 8},
    samples=SAMPLES,
    outputs=("output",),
    scalars=("input_min", "input_max"),
)
def quantize_and_dequantize_v2(input, input_min, input_max, signed_input, narrow_range, range_given, axis, num_bits, round_mode):
    """output = input rounded to the levels of [input_min, input_max] (scalar inputs), ties
    to even or half up; gradient straight through."""
    return straight_through(input, input_min, input_max, signed_input, num_bits, narrow_range, round_mode == "HALF_UP")


@elementwise(
    "QuantizeAndDequantizeV3",
    attrs={**MODES, "num_bits": attr(int, Input(3))},
    defaults={"signed_input": True},
    samples=SAMPLES,
    outputs=("output",),
    scalars=("input_min", "input_max"),
)
def quantize_and_dequantize_v3(input, input_min, input_max, signed_input, narrow_range, range_given, axis, num_bits):
    """output = input rounded to the levels of [input_min, input_max], the bit count an input;
    gradient straight through."""
    return straight_through(input, input_min, input_max, signed_input, num_bits, narrow_range)

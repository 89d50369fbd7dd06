"""Inputs tied to the others, `tensor(..., equals=(indices, expr))` (MaxPoolGrad's
`orig_output`, the MaxPool of its `orig_input`): the declaration reads the input where it
wrote `expr`, and verification draws the input as `expr` of the other inputs, evaluated by
brute force (`symgrad.verify.tied`), here against loops over numpy windows."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
import sympy as sp
from conftest import OPS

from symgrad import dims, indices, op, tensor
from symgrad.errors import DeclarationError
from symgrad.instantiate import instantiate
from symgrad.load import load_op_file
from symgrad.verify.cases import bound_forward, make_cases
from symgrad.verify.ops_under_test import load_derived, variants_of
from symgrad.verify.tied import with_tied_values

(N,) = dims("N")
(i,) = indices("i")


def max_pool_by_loops(x, ksize, strides, padding):
    """NHWC max pooling, TensorFlow's geometry: padding never wins a window."""
    n, height, width, c = x.shape
    sizes, pads = [], []
    for size, window, stride in zip((height, width), ksize[1:3], strides[1:3]):
        out = -(-size // stride) if padding == "SAME" else (size - window) // stride + 1
        sizes.append(out)
        pads.append(max((out - 1) * stride + window - size, 0) // 2 if padding == "SAME" else 0)
    y = np.full((n, *sizes, c), -np.inf)
    for u, v, a, b in itertools.product(range(sizes[0]), range(sizes[1]), range(ksize[1]), range(ksize[2])):
        row, col = u * strides[1] + a - pads[0], v * strides[2] + b - pads[1]
        if 0 <= row < height and 0 <= col < width:
            y[:, u, v, :] = np.maximum(y[:, u, v, :], x[:, row, col, :])
    return y


def _attr_symbols(exprs, attrs: dict) -> dict:
    """`ksize[1]` -> attrs["ksize"][1], for each attribute symbol in `exprs`."""
    found = {}
    for s in set().union(*(sp.sympify(e).free_symbols for e in exprs)):
        match = re.fullmatch(r"(\w+)\[(\d+)\]", s.name)
        if match and match[1] in attrs:
            found[s] = attrs[match[1]][int(match[2])]
    return found


@pytest.mark.parametrize("padding", ["VALID", "SAME"])
@pytest.mark.parametrize("ksize,strides", [((1, 2, 2, 1), (1, 2, 2, 1)), ((1, 3, 2, 1), (1, 1, 2, 1))])
def test_brute_force_value_of_a_tied_input_is_the_max_pool(padding, ksize, strides):
    decl = next(d for d in load_op_file(OPS / "conv_grads.py").ops if d.name == "MaxPoolGrad")
    variant = instantiate(decl, (("padding", padding), ("data_format", "NHWC")))
    tied = tuple((t.name, *t.equals) for t in variant.inputs if t.equals is not None)
    assert [name for name, _, _ in tied] == ["orig_output"]
    x = np.random.default_rng(0).normal(size=(2, 5, 6, 3))
    expected = max_pool_by_loops(x, ksize, strides, padding)
    shapes = tuple(t.shape for t in variant.inputs)
    symbols = _attr_symbols([tied[0][2], *shapes[1]], {"ksize": ksize, "strides": strides})
    inputs = (x, np.zeros(expected.shape), np.zeros(x.shape))
    got = with_tied_values(tied, tuple(t.name for t in variant.inputs), shapes, inputs, symbols)
    np.testing.assert_array_equal(got[1], expected)
    assert got[0] is x and got[2] is inputs[2]  # the others as they were


def test_every_case_of_a_gradient_kernel_holds_its_forward_output(derived):
    """MaxPoolGrad's cases, probes (zeros, ties) included: `orig_output` is MaxPool of
    `orig_input`, which TensorFlow's MaxPoolGradGrad compares against."""
    generated = derived[0]
    ops = {o.name: o for o in load_derived([OPS / "conv_grads.py"], generated)}
    for variant in variants_of(ops["MaxPoolGrad"]):
        attrs = variant.attrs
        cases = make_cases(variant, bound_forward(variant), False)
        assert len(cases) > 5
        for case in cases:
            x, orig_output, grad = case.inputs
            expected = max_pool_by_loops(x, attrs["ksize"], attrs["strides"], attrs["padding"])
            np.testing.assert_array_equal(orig_output, expected, err_msg=case.label)
            assert grad.shape == orig_output.shape  # MaxPool's upstream gradient


def test_the_declaration_reads_the_tied_input_where_it_wrote_its_value():
    @op("TimesExp")
    def times_exp():
        x = tensor("x", (N,))
        tensor("e", (N,), equals=((i,), sp.exp(x[i])))  # exp(x), computed beside it
        return {"y": ((i,), x[i] * sp.exp(x[i]))}

    x, e = instantiate(times_exp, ()).inputs
    assert instantiate(times_exp, ()).outputs[0].expr == x.base[i] * e.base[i]


def test_equals_needs_one_index_per_axis():
    @op("Malformed")
    def malformed():
        x = tensor("x", (N,))
        tensor("m", (N, N), equals=((i,), x[i]))
        return {"y": ((i,), x[i])}

    with pytest.raises(DeclarationError, match=r"input 'm': equals=\(indices, expression\) with one index per axis"):
        instantiate(malformed, ())

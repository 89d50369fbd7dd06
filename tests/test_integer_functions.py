"""`@integer_function`: integer arithmetic a declaration names (TensorFlow's SAME padding, a
strided slice's start and length), called by name in generated code and defined once per
module, against what it stands for computed another way (Python's own slices, TensorFlow's
documented padding formula)."""

from __future__ import annotations

import math
import pickle

import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

from conftest import ROOT, import_path
from symgrad import integer_function

GENERATED = ROOT / "generated"


@pytest.fixture(scope="module")
def array_numpy():
    return import_path(GENERATED / "array_numpy.py", "_symgrad_integer_functions_array_numpy")


@pytest.fixture(scope="module")
def conv_numpy():
    return import_path(GENERATED / "conv_numpy.py", "_symgrad_integer_functions_conv_numpy")


@integer_function
def half_up(n):
    """n / 2, rounded up."""
    return sp.ceiling(n / 2)


def test_a_call_of_numbers_is_its_value_of_symbols_a_call():
    n = sp.Symbol("n", integer=True)
    assert half_up(7) == 4 and half_up(n).is_integer
    assert isinstance(half_up(n), half_up) and half_up(n).subs(n, 9) == 5


def test_a_call_pickles_by_value_and_compares_equal():
    """Workers of `symgrad derive -j` send calls back; the class is made in the op file."""
    n = sp.Symbol("n", integer=True)
    again = pickle.loads(pickle.dumps(half_up(n + 1)))
    assert again == half_up(n + 1) and again.subs(n, 2) == 2


@settings(max_examples=200, deadline=None)
@given(
    size=st.integers(1, 9),
    begin=st.integers(-12, 12),
    end=st.integers(-12, 12),
    stride=st.integers(-4, 4).filter(bool),
    begin_masked=st.booleans(),
    end_masked=st.booleans(),
)
def test_slice_start_and_length_are_pythons_slice(array_numpy, size, begin, end, stride, begin_masked, end_masked):
    taken = range(size)[slice(None if begin_masked else begin, None if end_masked else end, stride)]
    length = array_numpy._slice_length(size, begin, end, stride, int(begin_masked), int(end_masked))
    assert length == len(taken)
    if taken:
        assert array_numpy._slice_start(size, begin, stride, int(begin_masked)) == taken[0]


@settings(max_examples=200, deadline=None)
@given(size=st.integers(1, 20), kernel=st.integers(1, 6), stride=st.integers(1, 4), dilation=st.integers(1, 3))
def test_same_padding_is_tensorflows_formula(conv_numpy, size, kernel, stride, dilation):
    """TensorFlow's documented SAME padding: the total, the smaller half before."""
    total = max((math.ceil(size / stride) - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    assert conv_numpy._same_padding(size, kernel, stride, dilation) == total // 2


@pytest.mark.parametrize("target", ["numpy", "tf", "jax", "torch"])
def test_each_module_defines_an_integer_function_once_and_calls_it(target):
    for stem, name in (("conv", "_same_padding"), ("array", "_slice_start"), ("array_more", "_mirrored")):
        source = (GENERATED / f"{stem}_{target}.py").read_text()
        assert source.count(f"\ndef {name}(") == 1, (stem, target)
        assert source.count(f"{name}(") > 1, (stem, target)


@pytest.mark.parametrize("target", ["jax", "torch"])
def test_a_function_of_positions_is_defined_in_the_framework(target):
    """MirrorPad's positions are the framework's arrays: `_mirrored` selects with its `where`
    (numpy's would not trace under `jit`), where a function of sizes stays numpy's."""
    framework = {"jax": "jnp", "torch": "torch"}[target]
    mirrored = (GENERATED / f"array_more_{target}.py").read_text().split("\ndef _mirrored(")[1].split("\n\n\n")[0]
    assert f"return {framework}.where(" in mirrored
    slice_start = (GENERATED / f"array_{target}.py").read_text().split("\ndef _slice_start(")[1].split("\n\n\n")[0]
    assert f"{framework}." not in slice_start

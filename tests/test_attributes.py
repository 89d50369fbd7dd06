"""The attribute model (`symgrad.attributes`): where a value comes from and how the
declaration uses it, two independent choices; what each combination declares, and the
combinations refused with the op's name and line."""

from __future__ import annotations

import pytest
import sympy as sp

import symgrad
from symgrad import Axis, Choice, Input, Ints, LengthOf, Number, RankOf, SizeOf, attr, dims, indices, op, tensor
from symgrad.attributes import Attribute, IntSymbols
from symgrad.errors import DeclarationError

(N,) = dims("N")
(i,) = indices("i")


def _attrs(**declared):
    """The `Attr`s an op declaring `declared` gets, by name."""
    declaration = eval(f"lambda {', '.join(declared)}: None")  # a parameter per attribute
    decl = op("Example", attrs=declared, variadic="values" if "count" in declared else None)(declaration)
    return {a.name: a for a in decl.attrs}


def test_shorthands_are_uses_of_the_op_attribute():
    attrs = _attrs(flag=bool, scale=float, count_=int, mode=("A", "B"), strides=Ints(4))
    assert attrs["flag"].use == Choice((False, True)) and attrs["flag"].default is False
    assert attrs["scale"].use == Number(float) and attrs["scale"].is_float and attrs["scale"].default is None
    assert attrs["count_"].use == Number(int) and not attrs["count_"].enumerated
    assert attrs["mode"].values == ("A", "B") and attrs["mode"].default == "A"
    assert all(a.source == Attribute() and a.input_position is None for a in attrs.values())
    assert attrs["strides"].value_in_declaration == tuple(sp.Symbol(f"strides[{n}]", real=True) for n in range(4))


def test_sources_and_uses_combine_independently():
    attrs = _attrs(
        axis=attr(Axis("x", (-1, -2)), Input(1)),  # an axis, passed as a constant input
        stack=Axis("x", (-1,), inserted=True),  # an axis, an op attribute
        perm=attr(((1, 0),), Input(2)),  # a value, passed as a constant input
        num_lower=attr(int, Input(3)),  # a number read at run time from an input
        paddings=attr(Ints(), Input(4)),  # integers of no length, from an input
        rank=attr((1, 2), RankOf("x")),
        depth=attr((1, 2), SizeOf("indices", -1)),
        count=attr((2, 3), LengthOf("values")),
    )
    assert (attrs["axis"].input_position, attrs["axis"].axis_of, attrs["axis"].values) == (1, "x", (-1, -2))
    assert attrs["stack"].input_position is None and attrs["stack"].axis_inserted
    assert attrs["perm"].input_position == 2 and attrs["perm"].axis_of is None and attrs["perm"].enumerated
    assert attrs["num_lower"].input_position == 3 and not attrs["num_lower"].enumerated
    assert attrs["paddings"].is_list_input and isinstance(attrs["paddings"].value_in_declaration, IntSymbols)
    assert (attrs["rank"].rank_of, attrs["rank"].size_axis) == ("x", None)
    assert (attrs["depth"].rank_of, attrs["depth"].size_axis) == ("indices", -1)
    assert attrs["count"].length_of == "values"
    parameters = {"axis", "stack", "perm", "num_lower", "paddings"}
    assert {a.name for a in attrs.values() if a.is_parameter} == parameters  # read off the inputs: not passed


@pytest.mark.parametrize(
    "declared, message",
    [
        (attr(int, RankOf("x")), "must be a Choice of values"),
        (attr(Ints(), Attribute()), "must come from an input"),
        (attr((2,), LengthOf("values")), "names no list input"),
        ((1.5, 2.5), "must be bool, float, int, a tuple of bools, of strings or of ints"),
        (list, "is no attribute use"),
    ],
)
def test_a_combination_that_means_nothing_is_refused(declared, message):
    with pytest.raises(DeclarationError, match=message) as caught:
        op("Bad", attrs={"a": declared})(lambda a: None)
    assert "Bad" in str(caught.value) and "test_attributes.py" in str(caught.value)


def test_the_old_helpers_are_gone():
    for name in ("const_input", "const_ints", "scalar_input", "ints", "rank_of", "length_of", "axis_attr"):
        assert not hasattr(symgrad, name), name


def test_an_op_declared_with_them_derives(tmp_path):
    """A reduction over an axis passed as a constant input, as a user declares one."""
    from symgrad.instantiate import instantiate
    from symgrad.derive import derive

    @op("MySum", attrs={"axis": attr(Axis("x", (-1,)), Input(1))})
    def my_sum(axis):
        x = tensor("x", (..., N))
        k = indices("k")[0]
        return {"out": ((...,), sp.Sum(x[..., k], (k, 0, N - 1)))}

    derivation = derive(instantiate(my_sum, (("axis", -1),)))
    assert "grad" in str(derivation.vjp["x"])

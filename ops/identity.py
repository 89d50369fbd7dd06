"""Ops whose output is their input: their gradient passes the upstream gradient through."""

from symgrad import elementwise

OUTPUT = ("output",)


@elementwise("Identity", complex=True, outputs=OUTPUT)
def identity(input):
    """output = input."""
    return input


@elementwise("CheckNumerics", attrs={"message": ("symgrad",)}, outputs=OUTPUT)
def check_numerics(tensor, message):
    """output = tensor, raising where an entry is NaN or infinite."""
    return tensor


@elementwise("CheckNumericsV2", attrs={"message": ("symgrad",)}, outputs=OUTPUT)
def check_numerics_v2(tensor, message):
    """output = tensor, raising where an entry is NaN or infinite (also -0 against +0)."""
    return tensor


@elementwise("PlaceholderWithDefault", complex=True, outputs=OUTPUT)
def placeholder_with_default(input):
    """output = input: a graph placeholder's value where nothing is fed.

    TensorFlow's `shape` attribute, the shape the placeholder promises, is not part of the math."""
    return input

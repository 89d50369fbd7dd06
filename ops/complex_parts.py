"""Complex numbers taken apart and put together: ops whose output dtype is not their input's
(`output_dtypes`), and functions of conj(z), whose gradients are Wirtinger derivatives
(`symgrad/wirtinger.py`): grad_z = g * conj(df/dz) + conj(g) * df/d(conj z), TensorFlow's
convention."""

import itertools

import sympy as sp

from symgrad import DType, Input, attr, dims, elementwise, indices, op, tensor

OUTPUT = ("output",)


@elementwise("Real", complex="only", outputs=OUTPUT, output_dtypes={"output": "real"})
def real(input):
    """output = re(input), real."""
    return sp.re(input)


@elementwise("Imag", complex="only", outputs=OUTPUT, output_dtypes={"output": "real"})
def imag(input):
    """output = im(input), real."""
    return sp.im(input)


@elementwise("Angle", complex="only", outputs=OUTPUT, output_dtypes={"output": "real"})
def angle(input):
    """output = arg(input), real, in (-pi, pi]."""
    return sp.arg(input)


@elementwise("ComplexAbs", complex="only", output_dtypes={"y": "real"})
def complex_abs(x):
    """y = |x|, real; its gradient at 0 is 0, as TensorFlow's (div_no_nan)."""
    return sp.Piecewise((0, sp.Eq(x, 0)), (sp.Abs(x), True))


@elementwise("Complex", outputs=("out",), output_dtypes={"out": "complex"})
def complex_(real, imag):
    """out = real + i imag, from two real tensors (broadcasting)."""
    return real + sp.I * imag


@elementwise("Conj", complex="only", outputs=OUTPUT)
def conj(input):
    """output = conj(input)."""
    return sp.conjugate(input)


@elementwise(
    "Cast", attrs={"DstT": DType()}, complex=True, output_dtypes={"y": "DstT"},
    samples={"DstT": ("float64", "float32", "complex64", "complex128")},
)
def cast(x, DstT):
    """y = x in dtype DstT (the real part, from complex to real)."""
    return x


SIZES = dims("D0 D1 D2 D3")
AXES = indices("i0 i1 i2 i3")
# every permutation of 2 and 3 axes, and NHWC <-> NCHW (as Transpose's in ops/array.py)
PERMS = tuple(p for n in (2, 3) for p in itertools.permutations(range(n)) if p != tuple(range(n)))
PERMS += ((0, 3, 1, 2), (0, 2, 3, 1))


@op("ConjugateTranspose", attrs={"perm": attr(PERMS, Input(1))}, complex=True)
def conjugate_transpose(perm):
    """Axis n of the output is axis `perm[n]` of the input, conjugated."""
    x = tensor("x", SIZES[: len(perm)])
    inverse = [perm.index(k) for k in range(len(perm))]
    return {"y": (tuple(AXES[: len(perm)]), sp.conjugate(x[tuple(AXES[inverse[k]] for k in range(len(perm)))]))}

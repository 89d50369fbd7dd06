"""Wirtinger derivatives (`symgrad/wirtinger.py`) and per-output dtypes (`symgrad/dtypes.py`):
the derived gradient of functions of conj(z) against a brute-force numerical complex
derivative, declarations of outputs of another dtype, and gradients in their inputs' dtypes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from conftest import OPS, import_path
from symgrad import DType, elementwise
from symgrad.derive import derive
from symgrad.dtypes import complex_dtype, output_dtype, real_dtype
from symgrad.errors import DeclarationError
from symgrad.functions import modulus
from symgrad.instantiate import instantiate
from symgrad.load import load_op_file
from symgrad.wirtinger import uses_wirtinger

RNG = np.random.default_rng(7)
Z = RNG.normal(size=5) + 1j * RNG.normal(size=5)


def _vjp(decl, name="z"):
    """The derived gradient of input `name` as a numpy function of (upstream, z), z as the
    caller has it (the generated code reads it conjugated: that is done here)."""
    derivation = derive(instantiate(decl, ()))
    expr = derivation.vjp[name]
    z = next(t.base for t in derivation.variant.inputs if t.name == name)
    grad = next((s for s in expr.free_symbols if s.name == "grad"), sp.Symbol("grad"))
    f = sp.lambdify((grad, z), expr, modules=[{"conjugate": np.conj, "modulus": np.abs}, "numpy"])
    return lambda g, x: f(g, np.conj(x))


def _brute_force(forward, g, z, h=1e-6):
    """dL/dx + i dL/dy of L = Re(sum(conj(g) * forward(z))), per element: TensorFlow's gradient."""
    loss = lambda w: np.real(np.conj(g) * forward(w))
    return (loss(z + h) - loss(z - h)) / (2 * h) + 1j * (loss(z + 1j * h) - loss(z - 1j * h)) / (2 * h)


CASES = {  # declaration, its forward in numpy, whether the output is real
    "conj(z)": (lambda z: sp.conjugate(z), np.conj, False),
    "z * conj(z)": (lambda z: z * sp.conjugate(z), lambda z: z * np.conj(z), True),
    "z**2 * conj(z)": (lambda z: z**2 * sp.conjugate(z), lambda z: z**2 * np.conj(z), False),
    "re(z) * im(z)": (lambda z: sp.re(z) * sp.im(z), lambda z: z.real * z.imag, True),
    "|z|": (lambda z: sp.Abs(z), np.abs, True),
    "arg(z)": (lambda z: sp.arg(z), np.angle, True),
    "exp(z) * conj(z)": (lambda z: sp.exp(z) * sp.conjugate(z), lambda z: np.exp(z) * np.conj(z), False),
}


@pytest.mark.parametrize("label", sorted(CASES))
def test_wirtinger_gradient_is_the_numerical_complex_derivative(label):
    declared, forward, real_output = CASES[label]
    decl = elementwise("F", complex="only", output_dtypes={"y": "real"} if real_output else {})(declared)
    g = RNG.normal(size=5) + (0 if real_output else 1j * RNG.normal(size=5))
    np.testing.assert_allclose(_vjp(decl)(g, Z), _brute_force(forward, g, Z), rtol=1e-6, atol=1e-7)


def test_conj_is_not_taken_as_holomorphic():
    """The holomorphic rule g * conj(df/dz) gives 0 for conj(z) (df/dz = 0): the gradient is conj(g)."""
    decl = elementwise("Conj", complex="only")(lambda z: sp.conjugate(z))
    expr = derive(instantiate(decl, ())).vjp["z"]
    assert expr == sp.conjugate(sp.Symbol("grad"))


def test_real_input_takes_the_real_part_formula():
    """Complex(re, im): grad_re = re(g), grad_im = im(g), once cast to the inputs' dtype:
    before the cast, g and -i g."""
    decl = elementwise("Complex", outputs=("out",), output_dtypes={"out": "complex"})(lambda re, im: re + sp.I * im)
    vjp = derive(instantiate(decl, ())).vjp
    g = sp.Symbol("grad")
    assert vjp["re"] == g and vjp["im"] == -sp.I * g
    assert np.real(-1j * (1 + 2j)) == 2  # im(1 + 2j): the real part taken is im(g)


def test_complex_abs_gradient_in_the_input_dtype_and_zero_at_zero():
    decl = elementwise("ComplexAbs", complex="only", output_dtypes={"y": "real"})(
        lambda z: sp.Piecewise((0, sp.Eq(z, 0)), (sp.Abs(z), True))
    )
    expr = derive(instantiate(decl, ())).vjp["z"]
    assert expr.has(modulus) and not expr.has(sp.Abs)  # |z| in z's dtype (TensorFlow's arithmetic)
    assert expr.args[0] == (0, sp.Eq(sp.Symbol("z"), 0))  # 0 at 0, as TensorFlow's div_no_nan


def test_holomorphic_ops_keep_the_engine_rule():
    decl = elementwise("Exp", complex=True)(lambda x: sp.exp(x))
    variant = instantiate(decl, ())
    assert not uses_wirtinger(variant)
    assert variant.inputs[0].base.is_real  # declared in real symbols, as before
    assert derive(variant).vjp["x"] == sp.Symbol("grad", real=True) * sp.exp(sp.Symbol("x", real=True))


# --- declarations ------------------------------------------------------------------------------


def test_output_dtypes_are_checked():
    with pytest.raises(DeclarationError, match="output_dtypes"):
        elementwise("A", output_dtypes={"y": "float16"})(lambda x: x)
    with pytest.raises(DeclarationError, match="not an output"):
        elementwise("A", output_dtypes={"z": "real"})(lambda x: x)
    with pytest.raises(DeclarationError, match="complex is"):
        elementwise("A", complex="yes")(lambda x: x)
    decl = elementwise("Cast", attrs={"DstT": DType()}, complex=True, output_dtypes={"y": "DstT"})(lambda x, DstT: x)
    assert decl.wirtinger and decl.real_ok and decl.output_dtypes == (("y", "DstT"),)


def test_output_dtype_of_each_kind():
    real = elementwise("R", complex="only", output_dtypes={"y": "real"})(lambda x: sp.re(x))
    assert output_dtype(real, "y", "complex64", {}) == np.float32
    cast = elementwise("C", attrs={"DstT": DType()}, complex=True, output_dtypes={"y": "DstT"})(lambda x, DstT: x)
    assert output_dtype(cast, "y", "float32", {"DstT": "complex128"}) == np.complex128
    assert real_dtype("complex128") == np.float64 and complex_dtype("float32") == np.complex64
    assert not real.real_ok  # verified in complex64 and complex128 only


def test_library_declares_complex_parts():
    names = {d.name: d for d in load_op_file(Path(OPS) / "complex_parts.py").ops}
    assert set(names) >= {"Real", "Imag", "Angle", "ComplexAbs", "Complex", "Conj", "ConjugateTranspose", "Cast"}
    assert uses_wirtinger(instantiate(names["ConjugateTranspose"], names["ConjugateTranspose"].variants()[0]))


# --- generated code: each gradient in its input's dtype --------------------------------------------


@pytest.fixture(scope="module")
def numpy_module(tmp_path_factory):
    from symgrad.generate import compile_op
    from symgrad.render import render_module
    from symgrad.runtime_module import runtime_files

    path = Path(OPS) / "complex_parts.py"
    ops = [compile_op(d) for d in load_op_file(path).ops]
    folder = tmp_path_factory.mktemp("gen")
    for name, text in {"complex_parts_numpy.py": render_module("numpy", str(path), ops), **runtime_files(("numpy",))}.items():
        (folder / name).write_text(text)
    return import_path(folder / "complex_parts_numpy.py", "complex_parts_numpy")


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_real_output_gradients_take_the_complex_input_dtype(numpy_module, dtype):
    z = Z.astype(dtype)
    g = RNG.normal(size=5).astype(real_dtype(dtype))
    for name in ("real", "imag", "angle", "complex_abs"):
        (grad,) = getattr(numpy_module, f"{name}_grad")(g, z)
        assert grad.dtype == np.dtype(dtype), name
    (grad,) = numpy_module.imag_grad(g, z)
    np.testing.assert_allclose(grad, 1j * g)  # TensorFlow's complex(0, grad)


def test_complex_and_cast_gradients_take_the_real_input_dtype(numpy_module):
    re, im = RNG.normal(size=3).astype("float32"), RNG.normal(size=3).astype("float32")
    g = (RNG.normal(size=3) + 1j * RNG.normal(size=3)).astype("complex64")
    grad_re, grad_im = numpy_module.complex__grad(g, re, im)
    assert grad_re.dtype == grad_im.dtype == np.float32
    np.testing.assert_allclose(grad_re, g.real) and np.testing.assert_allclose(grad_im, g.imag)
    assert numpy_module.cast(re, DstT="complex128").dtype == np.complex128
    (grad,) = numpy_module.cast_grad(g.astype("complex128"), re, DstT="complex128")
    assert grad.dtype == np.float32
    np.testing.assert_allclose(grad, g.real, rtol=1e-6)


@pytest.mark.parametrize("name", ["angle", "complex_abs"])
def test_second_order_is_the_numerical_derivative_of_the_gradient(numpy_module, name):
    """`<op>_grad_grad`, derived from the gradient op declared in z and conj(z), against central
    differences of `<op>_grad` (g real, z complex, the cotangent v complex)."""
    grad_fn, grad_grad = getattr(numpy_module, f"{name}_grad"), getattr(numpy_module, f"{name}_grad_grad")
    g, v = RNG.normal(size=5), RNG.normal(size=5) + 1j * RNG.normal(size=5)
    by_g, by_z = grad_grad(v, g, Z)
    second = lambda gg, z: np.real(np.conj(v) * grad_fn(gg, z)[0])
    h = 1e-6
    np.testing.assert_allclose(by_g, (second(g + h, Z) - second(g - h, Z)) / (2 * h), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(by_z, _brute_force(lambda z: grad_fn(g, z)[0], v, Z), rtol=1e-6, atol=1e-8)
    assert by_g.dtype == g.dtype and by_z.dtype == Z.dtype


def test_index_op_reads_every_complex_input_conjugated():
    """y[i] = x[i] * conj(w[i]): grad_x = g w, grad_w = conj(g) x, written in the values the
    generated code reads (each input conjugated by its prologue): g conj(w), conj(g) conj(x)."""
    from symgrad import dims, indices, op, tensor

    (N,) = dims("N")
    (i,) = indices("i")

    @op("XConjW", complex=True)
    def x_conj_w():
        x, w = tensor("x", (N,)), tensor("w", (N,))
        return {"y": ((i,), x[i] * sp.conjugate(w[i]))}

    vjp = derive(instantiate(x_conj_w, ())).vjp
    (x_term,), (w_term,) = vjp["x"].terms, vjp["w"].terms
    x_axis, w_axis = vjp["x"].indices[0], vjp["w"].indices[0]
    bases = {str(e.base.label): e.base for term in (x_term, w_term) for e in term.factor.atoms(sp.Indexed)}
    grad, x, w = bases["grad"], bases["x"], bases["w"]
    assert x_term.factor == grad[x_axis] * sp.conjugate(w[x_axis])
    assert w_term.factor == sp.conjugate(grad[w_axis]) * sp.conjugate(x[w_axis])


def test_explain_shows_both_wirtinger_partials():
    from symgrad.explain import explain_op

    ops = {d.name: d for d in load_op_file(Path(OPS) / "complex_parts.py").ops}
    text = explain_op(ops["Angle"])
    assert "Wirtinger derivatives" in text
    assert "d output / d input = (-i / (2 * input), i / (2 * conj(input)))" in text

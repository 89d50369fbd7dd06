"""Index notation (`symgrad.notation`): the formulas the generated gradients' docstrings state,
checked on the library's declarations and on the printer's cases one by one."""

from __future__ import annotations

import dataclasses
import pytest
import sympy as sp

from symgrad.instantiate import instantiate
from symgrad.derive import derive
from symgrad.docstring import gradient_doc
from symgrad.ir import Formula
from symgrad.load import load_op_file
from symgrad.lowering.op import lower_op
from symgrad.lowering.signature import OpSignature
from symgrad.notation import IndexNotationPrinter, gradient_formulas, with_formulas
from symgrad.simplify import simplify

from conftest import ROOT


def formulas(op_file: str, name: str, attr_values=()) -> list[str]:
    decl = next(d for d in load_op_file(ROOT / "ops" / op_file).ops if d.name == name)
    derivation = simplify(derive(instantiate(decl, tuple(attr_values))))
    return [str(f) for f in gradient_formulas(derivation)]


def test_matmul_states_each_inputs_gradient_as_the_contraction_it_is():
    assert formulas("matmul.py", "MatMul", (("transpose_a", False), ("transpose_b", False))) == [
        "grad_a[i, k] = sum_j grad[i, j] * conj(b[k, j])",
        "grad_b[k, j] = sum_i grad[i, j] * conj(a[i, k])",
    ]


def test_transposed_operands_are_read_with_their_declared_indices():
    assert formulas("matmul.py", "MatMul", (("transpose_a", True), ("transpose_b", True))) == [
        "grad_a[k, i] = sum_j grad[i, j] * conj(b[j, k])",
        "grad_b[j, k] = sum_i grad[i, j] * conj(a[k, i])",
    ]


def test_a_real_op_reads_nothing_conjugated():
    assert formulas("matmul.py", "SparseMatMul", (("transpose_a", False), ("transpose_b", False)))[
        0
    ] == ("grad_a[i, k] = sum_j grad[i, j] * b[k, j]")


def test_a_composed_op_states_its_stages_and_their_gradients_first():
    stated = formulas("composed.py", "LayerNorm")
    assert stated[:2] == [
        "sum1[batch] = sum_{k_1} x[batch, k_1]",
        "affine1[batch] = epsilon + sum_k (x[batch, k] - sum1[batch] / N)**2 / N",
    ]
    # the mean's gradient through the variance, sum_k (x - sum1 / N), is zero and left out:
    # the variance's gradient, then read once, is stated inside grad_x
    assert [s.partition(" = ")[0] for s in stated[2:]] == ["grad_x[batch, k]", "grad_scale[i]", "grad_offset[i]"]
    assert stated[-1] == "grad_offset[i] = sum_batch grad[batch, i]"
    moments = formulas("composed.py", "LayerNormMoments")  # its variance's gradient read twice
    assert [s.partition(" = ")[0] for s in moments] == [
        "sum1[batch]",
        "affine1[batch]",
        "grad_affine1[batch]",
        "grad_x[batch, k]",
        "grad_scale[i]",
        "grad_offset[i]",
    ]


def test_an_elementwise_gradient_reads_the_forward_output_it_reuses():
    assert formulas("unary.py", "Sigmoid") == ["grad_x = grad * conj(y) * (1 - conj(y))"]


def test_a_cumulative_sum_states_its_bounds():
    assert formulas(
        "reductions.py", "Cumsum", (("axis", -1), ("exclusive", False), ("reverse", False))
    ) == ["grad_x[batch, k] = sum_{i = k..N - 1} grad[batch, i]"]


i, j, k = sp.symbols("i j k", integer=True)
N = sp.Symbol("N", integer=True, positive=True)
x, grad = sp.IndexedBase("x"), sp.IndexedBase("grad")


@pytest.mark.parametrize(
    "expr, text",
    [
        (sp.KroneckerDelta(i, j) * x[j], "delta(i, j) * x[j]"),
        (sp.Piecewise((grad[i], x[i] > 0), (0, True)), "(grad[i] if x[i] > 0 else 0)"),
        (
            sp.Piecewise((1, sp.Eq(x[i], 0) & (x[j] < 1)), (x[i], True)),
            "(1 if x[i] == 0 and x[j] < 1 else x[i])",
        ),
        (
            x[i] * sp.Sum(x[k], (k, 0, N - 1)),
            "x[i] * (sum_k x[k])",
        ),  # a sum in a product: bracketed
        (
            -sp.Sum(x[k] * grad[k], (k, 0, N - 1)),
            "-sum_k grad[k] * x[k]",
        ),  # the upstream gradient first
        (
            sp.Sum(x[k] + 1, (k, 0, i)),
            "sum_{k = 0..i} (x[k] + 1)",
        ),  # bounds other than a whole axis
        (3 * x[i] / (2 * N * sp.sqrt(x[j])), "3 * x[i] / (2 * N * sqrt(x[j]))"),
        (1 / x[i], "1 / x[i]"),
    ],
)
def test_the_printer_writes_sums_deltas_and_selects_as_on_paper(expr, text):
    assert IndexNotationPrinter(upstream=("grad",)).doprint(expr) == text


def test_a_docstring_states_every_short_variant_with_the_code_next_to_it():
    code = _matmul_code()
    printed = [{"grad_a": "grad @ b.T", "grad_b": "a.T @ grad"}] * len(code.vjp.branches)
    doc = gradient_doc(code, printed)
    assert doc.splitlines()[:4] == [
        "In index notation, next to the code computing it, per variant:",
        "    transpose_a=False, transpose_b=False:",
        "        grad_a[i, k] = sum_j grad[i, j] * conj(b[k, j]), i.e. `grad @ b.T`",
        "        grad_b[k, j] = sum_i grad[i, j] * conj(a[i, k]), i.e. `a.T @ grad`",
    ]
    assert doc.count("transpose_b=True:") == 2


def test_a_long_formula_wraps_before_a_term_and_its_long_code_is_elided():
    code = _matmul_code()
    long_terms = tuple(f"grad[i, j] * b{n}[k, j]" for n in range(8))
    branch = dataclasses.replace(
        code.vjp.branches[0], formulas=(Formula("grad_a", "grad_a[i, k]", long_terms),)
    )
    code = dataclasses.replace(code, vjp=dataclasses.replace(code.vjp, branches=(branch,) * 5))
    doc = gradient_doc(code, [{"grad_a": " + ".join(f"t{n} * b{n}" for n in range(40))}] * 5)
    lines = doc.splitlines()
    # five variants are too many: the default one, naming the attributes that change it
    assert (
        lines[0]
        == "In index notation, next to the code computing it, for transpose_a=False, transpose_b=False"
    )
    assert lines[1] == "(other values of transpose_a, transpose_b change it):"
    assert lines[2].startswith(
        "    grad_a[i, k] = grad[i, j] * b0[k, j] + grad[i, j] * b1[k, j] + "
    )
    assert lines[3].startswith("        + grad[i, j] * b")
    assert lines[-1].startswith("        i.e. `t0 * b0 + t1 * b1 + ") and lines[-1].endswith(
        " ...`"
    )
    assert max(map(len, lines)) <= 100 - 4


def _matmul_code():
    """MatMul's code, its gradient's branches holding their formulas (as `compile_op`'s)."""
    decl = next(d for d in load_op_file(ROOT / "ops" / "matmul.py").ops if d.name == "MatMul")
    simplified = [simplify(derive(instantiate(decl, v))) for v in decl.variants()]
    code = lower_op(OpSignature.of(decl), simplified)
    return dataclasses.replace(code, vjp=with_formulas(code.vjp, simplified))


def test_the_generated_numpy_gradient_states_the_notation(numpy_module):
    doc = numpy_module("matmul").matmul_grad.__doc__
    assert "grad_a[i, k] = sum_j grad[i, j] * conj(b[k, j]), i.e. `grad @ b.T`" in doc
    assert "grad_b[k, j] = sum_i grad[i, j] * conj(a[i, k]), i.e. `a.T @ grad`" in doc
    layer_norm = numpy_module("composed").layer_norm_grad.__doc__
    assert "grad_offset[i] = sum_batch grad[batch, i]" in layer_norm
    assert "i.e. `np.sum(grad, axis=tuple(range(np.ndim(grad) - 1)))`" in layer_norm

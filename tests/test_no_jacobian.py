"""No Jacobian, ever: no intermediate array of a generated gradient has more axes than the
largest input or output of its op (a leading `...` counting as one axis on both sides).

An op with index maps (a convolution) may read its input in windows: one more axis per
window index in a mapped subscript, or in the map a Kronecker delta places an output index by
(AvgPoolGrad's `delta(h, i*s + a - p)`): im2col's size, output times window, never input
times output."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sympy as sp

from conftest import OPS
from symgrad.declaration import INDEX
from symgrad.instantiate import instantiate
from symgrad.generate import compile_op
from symgrad.load import load_op_file, op_file_paths

DECLS = [d for path in op_file_paths([OPS]) for d in load_op_file(path).ops if d.kind == INDEX]


def _largest_declared_rank(decl) -> int:
    ranks = []
    for variant in decl.variants():
        op = instantiate(decl, variant)
        windows = len(_window_indices(op))
        ranks += [len(t.shape) + windows for t in op.inputs] + [len(o.indices) + windows for o in op.outputs]
    return max(ranks)


def _window_indices(op) -> set:
    """Summation indices inside mapped (non-plain) subscripts and delta-placed maps: a
    convolution's window."""
    found = set()
    for out in op.outputs:
        subscripts = [sub for entry in out.expr.atoms(sp.Indexed) for sub in entry.indices]
        subscripts += [arg for delta in out.expr.atoms(sp.KroneckerDelta) for arg in delta.args]
        for sub in subscripts:
                if not isinstance(sub, sp.Symbol) and not sub.is_Integer:
                    found |= {s for s in sub.free_symbols if isinstance(s, sp.Symbol) and s.is_integer
                              and s.is_positive is not True and s not in out.indices}
    return found


def test_the_library_has_index_ops():
    assert len(DECLS) >= 20


def measure(out: str) -> None:
    """In a subprocess (conftest.no_jacobian_runs starts it with the session): per index op,
    the largest rank of an intermediate of its compiled forward and gradient, and the largest
    declared, as JSON in `out`."""
    import json

    ranks = {}
    for decl in DECLS:
        code = compile_op(decl)
        largest = max(b.largest_rank for b in code.vjp.branches + code.forward.branches)
        ranks[decl.name] = (largest, _largest_declared_rank(decl))
    Path(out).write_text(json.dumps(ranks))


@pytest.fixture(scope="module")
def ranks(no_jacobian_runs):
    import json

    out, process = no_jacobian_runs
    done = process.wait()
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(out.read_text())


@pytest.mark.parametrize("decl", DECLS, ids=lambda d: d.name)
def test_no_intermediate_is_larger_than_the_op(decl, ranks):
    largest, declared = ranks[decl.name]
    assert 0 < largest <= declared


def test_the_measure_sees_an_intermediate_larger_than_the_op(tmp_path):
    """A sum over k of a function of x[i, k] and y[k, j] needs an (i, k, j) array: counted."""
    (tmp_path / "coupled.py").write_text(
        "import sympy as sp\nfrom symgrad import dims, indices, op, tensor\n"
        "M, K, N = dims('M K N')\ni, j, k = indices('i j k')\n\n"
        "@op('Coupled')\ndef coupled():\n"
        "    x = tensor('x', (M, K))\n    y = tensor('y', (K, N))\n"
        "    return {'z': ((i, j), sp.Sum(sp.exp(x[i, k] + y[k, j]), (k, 0, K - 1)))}\n"
    )
    (decl,) = load_op_file(tmp_path / "coupled.py").ops
    code = compile_op(decl)
    assert max(b.largest_rank for b in code.forward.branches) == 3 > _largest_declared_rank(decl)


def test_each_scatter_add_says_there_is_no_gather_form(derived):
    _, files = derived
    # each statement, to the end of its last line (black wraps a long one: the comment follows
    # its closing parenthesis)
    calls = [
        statement
        for text in files.values()
        for statement in re.findall(r"= _scatter_add\((?:[^()]|\([^()]*\))*\)[^\n]*", text)
    ]
    assert len(calls) >= 4  # UnsortedSegmentSum, Gather's gradients, MaxPool's, ...
    assert all(s.endswith("# no gather form: an explicit scatter-add") for s in calls), calls

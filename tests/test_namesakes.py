"""The PyTorch and JAX wrappers of ops with a namesake (`symgrad.namesakes`) take that
function's conventions and compute what it computes: each `Namesake.call` of the library is
evaluated, with the framework's own function, against the generated wrapper on the same
arguments (the wrapper's defaults included), values and gradients, in float64; then the
conventions one by one: `eps` and its default, TensorFlow's `epsilon` beside it, `is_causal`,
`scale`, a mask left out, leading batch axes, and the docstring quoting the call."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from symgrad.load import load_op_file, op_file_paths

LIBRARY = [decl for path in op_file_paths([ROOT / "ops"]) for decl in load_op_file(Path(path)).ops]
WITH_NAMESAKES = [(decl, framework) for decl in LIBRARY for framework, _ in decl.namesakes]
STEMS = {decl.name: Path(decl.location.file).stem for decl in LIBRARY}
rng = np.random.default_rng(0)


def _probabilities(shape):
    p = rng.uniform(0.1, 1.0, size=shape)
    return p / p.sum(axis=-1, keepdims=True)


# op type -> calls of its wrapper: (positional arrays, keywords, or keywords per framework);
# labels are integers
CALLS = {
    "LayerNorm": [((rng.normal(size=(2, 3, 5)), rng.normal(size=5), rng.normal(size=5)), {}),
                  ((rng.normal(size=(4, 6)), rng.normal(size=6), rng.normal(size=6)),
                   {"torch": {"eps": 0.25}, "jax": {"epsilon": 0.25}})],
    "ScaledDotProductAttention": [
        ((rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 4, 5))), {}),
        ((rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 4, 3))), {"is_causal": True}),
        ((rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5, 3))), {"scale": 0.3}),
        ((rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 6, 3)), rng.normal(size=(2, 6, 3))), {"is_causal": True, "scale": 2.0}),
    ],
    "Softmax": [((rng.normal(size=(2, 3, 5)),), {})],
    "LogSoftmax": [((rng.normal(size=(2, 3, 5)),), {})],
    "SoftmaxCrossEntropyWithLogits": [((rng.normal(size=(2, 3, 5)), _probabilities((2, 3, 5))), {}),
                                      ((rng.normal(size=(4, 5)), _probabilities((4, 5))), {})],
    "SparseSoftmaxCrossEntropyWithLogits": [((rng.normal(size=(2, 3, 5)), rng.integers(0, 5, size=(2, 3))), {}),
                                            ((rng.normal(size=(4, 5)), rng.integers(0, 5, size=4)), {})],
    "MatMul": [((rng.normal(size=(3, 4)), rng.normal(size=(4, 5))), {}),
               ((rng.normal(size=(4, 3)), rng.normal(size=(5, 4))), {"transpose_a": True, "transpose_b": True})],
}


# JAX's dot_product_attention takes its softmax in float32 whatever the inputs' dtype
RTOL = {("jax", "ScaledDotProductAttention"): 1e-5}


class Torch:
    name = "torch"

    def __init__(self, torch_module):
        import torch

        self.torch, self.module = torch, torch_module

    def arrays(self, values):
        t = self.torch
        return [t.tensor(v) if v.dtype.kind == "i" else t.tensor(v, requires_grad=True) for v in values]

    def namespace(self):
        return {"torch": self.torch}

    def numpy(self, x):
        return x.detach().numpy()

    def value_and_grads(self, f, arrays):
        """f's first output, and the gradient of its sum against random weights per array."""
        out = f(*arrays)
        out = out[0] if isinstance(out, (tuple, list)) else out
        weights = self.torch.tensor(np.random.default_rng(1).normal(size=tuple(out.shape)))
        floats = [a for a in arrays if a.is_floating_point()]
        grads = self.torch.autograd.grad((out * weights).sum(), floats)
        return out.detach().numpy(), [g.numpy() for g in grads]


class Jax:
    name = "jax"

    def __init__(self, jax_module):
        import jax
        import jax.numpy as jnp

        self.jax, self.jnp, self.module = jax, jnp, jax_module

    def arrays(self, values):
        return [self.jnp.asarray(v) for v in values]

    def namespace(self):
        return {"jax": self.jax, "jnp": self.jnp}

    def numpy(self, x):
        return np.asarray(x)

    def value_and_grads(self, f, arrays):
        first = lambda *a: (lambda out: out[0] if isinstance(out, (tuple, list)) else out)(f(*a))
        out = first(*arrays)
        weights = self.jnp.asarray(np.random.default_rng(1).normal(size=out.shape))
        floats = [n for n, a in enumerate(arrays) if self.jnp.issubdtype(a.dtype, self.jnp.floating)]
        grads = self.jax.grad(lambda *a: (first(*a) * weights).sum(), argnums=tuple(floats))(*arrays)
        return np.asarray(out), [np.asarray(g) for g in grads]


@pytest.fixture(params=["torch", "jax"])
def framework(request, torch_module, jax_module):
    return Torch(torch_module) if request.param == "torch" else Jax(jax_module)


def _wrapper(framework, op_type: str):
    decl = next(d for d in LIBRARY if d.name == op_type)
    return getattr(framework.module(STEMS[op_type]), decl.func_name)


def test_every_namesake_in_the_library_has_calls_here():
    assert {decl.name for decl, _ in WITH_NAMESAKES} == set(CALLS)


@pytest.mark.parametrize("op_type", sorted(CALLS))
def test_the_wrapper_computes_its_namesakes_call(framework, op_type):
    """Values and gradients of the wrapper against the namesake's call, evaluated with the
    framework's function on the wrapper's arguments (its defaults included)."""
    decl = next(d for d in LIBRARY if d.name == op_type)
    namesake = dict(decl.namesakes).get(framework.name)
    if namesake is None:
        pytest.skip(f"{op_type} has no {framework.name} namesake")
    wrapper = _wrapper(framework, op_type)
    assert f"Matches `{namesake.call}`." in wrapper.__doc__
    parameters = inspect.signature(wrapper)
    for values, keywords in CALLS[op_type]:
        keywords, arrays = keywords.get(framework.name, keywords), framework.arrays(values)

        def theirs(*arrays):
            bound = parameters.bind(*arrays, **keywords)
            bound.apply_defaults()
            return eval(namesake.call, {**framework.namespace(), **bound.arguments})

        ours_value, ours_grads = framework.value_and_grads(lambda *a: wrapper(*a, **keywords), arrays)
        their_value, their_grads = framework.value_and_grads(theirs, arrays)
        where = f"{op_type} {keywords} {[np.shape(v) for v in values]}"
        rtol = RTOL.get((framework.name, op_type), 1e-9)
        np.testing.assert_allclose(ours_value, their_value, rtol=rtol, atol=rtol * 1e-3, err_msg=where)
        assert len(ours_grads) == len(their_grads)
        for ours, theirs_grad in zip(ours_grads, their_grads):
            np.testing.assert_allclose(ours, theirs_grad, rtol=rtol * 10, atol=rtol * 1e-2, err_msg=where)


def test_layer_norm_takes_eps_defaulting_to_1e_5_and_epsilon_beside_it(framework):
    layer_norm = _wrapper(framework, "LayerNorm")
    parameters = inspect.signature(layer_norm).parameters
    assert parameters["eps" if framework.name == "torch" else "epsilon"].default == 1e-5
    x, scale, offset = framework.arrays([rng.normal(size=(3, 4)), np.ones(4), np.zeros(4)])
    forward = framework.module("composed").layer_norm_forward
    as_numpy = framework.numpy
    np.testing.assert_allclose(as_numpy(layer_norm(x, scale, offset)),
                               as_numpy(forward(x, scale, offset, epsilon=1e-5)), rtol=1e-12)
    if framework.name == "torch":
        by_tf_name = as_numpy(layer_norm(x, scale, offset, epsilon=0.5))
        np.testing.assert_allclose(by_tf_name, as_numpy(layer_norm(x, scale, offset, eps=0.5)), rtol=1e-12)
        assert not np.allclose(by_tf_name, as_numpy(layer_norm(x, scale, offset)))


def test_an_explicit_mask_and_is_causal_are_refused_as_pytorch_does(framework):
    attention = _wrapper(framework, "ScaledDotProductAttention")
    q, k, v, mask = framework.arrays([rng.normal(size=(1, 3, 2))] * 3 + [np.zeros((1, 3, 3))])
    with pytest.raises(ValueError, match="is_causal"):
        attention(q, k, v, mask, is_causal=True)


def test_causal_attention_under_torch_compile_and_jax_jit(framework):
    """The mask is built inside the traced function: fullgraph in PyTorch, jit in JAX."""
    attention = _wrapper(framework, "ScaledDotProductAttention")
    q, k, v = framework.arrays([rng.normal(size=(2, 5, 3)) for _ in range(3)])
    eager = attention(q, k, v, is_causal=True)
    if framework.name == "torch":
        compiled = framework.torch.compile(lambda q, k, v: attention(q, k, v, is_causal=True),
                                           fullgraph=True, backend="aot_eager")
        np.testing.assert_allclose(framework.numpy(compiled(q, k, v)), framework.numpy(eager), rtol=1e-12)
    else:
        jitted = framework.jax.jit(lambda q, k, v: attention(q, k, v, is_causal=True, scale=0.5))
        np.testing.assert_allclose(jitted(q, k, v), attention(q, k, v, is_causal=True, scale=0.5), rtol=1e-12)


def test_an_op_without_a_namesake_keeps_tensorflows_signature(framework):
    bias_add = getattr(framework.module("nn"), "bias_add")
    assert str(inspect.signature(bias_add)) == "(value, bias, *, data_format='NHWC')"
    assert "Matches" not in bias_add.__doc__


# --- a namesake declared wrongly: one error naming the op, its file and line ---------------------

BAD_NAMESAKES = {
    "a framework of no wrapper": ('{"tensorflow": Namesake("tf.nn.softmax(x)")}', "namesakes are for torch and jax"),
    "a keyword of no attribute": ('{"torch": Namesake("f(x)", keywords={"eps": "epsilon"})}', "not attributes"),
    "no Namesake": ('{"torch": "torch.softmax(x, -1)"}', "must be a Namesake"),
    "a causal mask that is not the last input": ('{"torch": Namesake("f(x)", causal_mask="x")}', "not the op's last input"),
    "a scale over a size no other input has": ('{"torch": Namesake("f(x)", scaled=("x", 1 / sp.sqrt(Q)))}',
                                               "size Q is the size of no other input's axis"),
}


@pytest.mark.parametrize("case", sorted(BAD_NAMESAKES))
def test_a_bad_namesake_is_an_error_naming_the_op(tmp_path, case):
    from symgrad.errors import SymgradError
    from symgrad.generate import generate

    namesakes, words = BAD_NAMESAKES[case]
    path = tmp_path / "bad.py"
    path.write_text(
        "import sympy as sp\nfrom symgrad import Namesake, dims, indices, op, tensor\n\n"
        'N, Q = dims("N Q")\n(i,) = indices("i")\n\n\n'
        f'@op("Scaled", attrs={{"epsilon": float}}, defaults={{"epsilon": 0.5}}, namesakes={namesakes})\n'
        "def scaled(epsilon):\n"
        '    x, w = tensor("x", (N,)), tensor("w", (N,))\n'
        '    return {"y": ((i,), x[i] * w[i] * epsilon)}\n'
    )
    with pytest.raises(SymgradError) as failure:
        generate([path], ("numpy",), verify=False)
    message = str(getattr(failure.value, "errors", [failure.value])[0])
    assert words in message and "Scaled" in message and "bad.py:8" in message, message

"""How verification obtains the PyTorch target's gradients: `torch.autograd.grad` of a
generated function (the op, whose backward is the derived `<op>_vjp`, or `<op>_forward`,
whose gradient is PyTorch's own autograd), and of that gradient again for second order.

PyTorch's complex convention is TensorFlow's (and symgrad's): for a holomorphic f the
gradient is `grad * conj(f'(z))`, so no conversion is needed.
"""

from __future__ import annotations

import numpy as np

from symgrad.verify.compare import upstream_names
from symgrad.verify.sources import Gradients, Skipped, _error_text, _input_args, accepted_kwargs, call_failed, derived_import_lines


class _TorchSource:
    """A verification source over the generated function `<op><suffix>` of the op's PyTorch
    module."""

    def __init__(self, fn, label: str, imports: list[str], call_name: str | None = None, reference: bool = False):
        self.fn, self.label, self.imports = fn, label, imports
        self.call_name = call_name or fn.__name__  # what the snippet calls it
        self.reference = reference  # a function that refuses the inputs skips the case

    def run(self, variant, cases) -> list:
        return [self._run_one(variant, case) for case in cases]

    def run_many(self, groups) -> list[list]:
        return [self.run(variant, cases) for variant, cases in groups]

    def _run_one(self, variant, case):
        try:
            return self._gradients(variant, case)
        except Exception as exc:  # the function under test failed: report it, go on
            return call_failed(exc)

    def _outputs(self, variant, inputs: list) -> list:
        """The function's outputs at `inputs` (tensors) as one flat list."""
        attrs = {k: variant.attrs[k] for k in accepted_kwargs(self.fn, variant.attrs)}
        outputs = self.fn(*_input_args(variant, inputs), **attrs)
        return list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]


def _tensors(variant, arrays, differentiable: bool = True) -> tuple[list, list[int]]:
    """`arrays` as tensors, and the positions of those with a gradient (requiring one)."""
    import torch

    tensors, free = [], []
    for k, (name, x) in enumerate(zip(variant.inputs, arrays)):
        t = torch.as_tensor(np.asarray(x))
        if differentiable and name not in variant.integers and (t.is_floating_point() or t.is_complex()):
            t.requires_grad_(True)
            free.append(k)
        tensors.append(t)
    return tensors, free


def _vjp(outputs: list, inputs: list, upstream: list, create_graph: bool = False) -> list:
    """`torch.autograd.grad` of the differentiable `outputs` at `inputs` for `upstream`: one
    gradient per input, zeros where nothing depends on it."""
    import torch

    pairs = [(o, torch.as_tensor(np.asarray(u) if not isinstance(u, torch.Tensor) else u, dtype=o.dtype))
             for o, u in zip(outputs, upstream) if o.requires_grad]
    wanted = [x for x in inputs if x.requires_grad]  # not an integer output's upstream gradient
    if not pairs or not wanted:
        return [torch.zeros_like(x) for x in inputs]
    grads = iter(torch.autograd.grad([o for o, _ in pairs], wanted, [u for _, u in pairs],
                                     create_graph=create_graph, allow_unused=True))
    grads = [next(grads) if x.requires_grad else None for x in inputs]
    return [torch.zeros_like(x) if g is None else g for g, x in zip(grads, inputs)]


class TorchGradient(_TorchSource):
    """`torch.autograd.grad` of a function of torch tensors taking the numpy forward's
    arguments: a generated one (`derived`) or PyTorch's own function of the op type
    (`symgrad.backends.torch.functions`)."""

    @classmethod
    def derived(cls, op, suffix: str = "", label: str | None = None) -> "TorchGradient":
        """Of the generated function `<op><suffix>` of the op's PyTorch module."""
        fn = op.function("torch", suffix)
        label = label or f"derived {op.stem}_torch.{op.decl.func_name}{suffix} under torch.autograd.grad"
        return cls(fn, label, derived_import_lines(op, fn, label))

    def _gradients(self, variant, case):
        inputs, free = _tensors(variant, case.inputs)
        try:
            outputs = self._outputs(variant, inputs)
        except Exception as exc:  # PyTorch's function refuses them (complex xlogy): no verdict
            if not self.reference:
                raise
            return Skipped(f"{self.label} rejects the inputs: {_error_text(exc)}")
        grads = _vjp(outputs, [inputs[k] for k in free], list(case.upstream))
        result = [None] * len(inputs)
        for k, g in zip(free, grads):
            result[k] = _array(g)
        # a reference's outputs are checked against the declaration's (the same op?)
        return Gradients(result, tuple(_array(o) for o in outputs) if self.reference else None)

    def call_lines(self, variant) -> list[str]:
        ups = ", ".join(upstream_names(variant))
        return self.imports + [
            "import torch",
            f"tensors = [torch.tensor(v, requires_grad=True) for v in ({', '.join(variant.inputs)},)]",
            f"outputs = {self.call_name}(*tensors, **attrs)",
            f"print({self.label!r}, torch.autograd.grad(outputs, tensors, [torch.tensor(g) for g in ({ups},)]))",
        ]


class TorchSecondOrder(_TorchSource):
    """The second order of the PyTorch target, as the gradient of the gradient op G (see
    `symgrad.verify.second_order`): autograd of `(g, x) -> torch.autograd.grad(<op>(x), x, g,
    create_graph=True)`, the inner gradient the derived backward, differentiated by PyTorch
    (double backward)."""

    def __init__(self, op):
        fn = op.function("torch", "")
        label = f"derived {op.stem}_torch.{op.decl.func_name} under torch.autograd.grad twice"
        super().__init__(fn, label, derived_import_lines(op, fn, label))

    def _gradients(self, variant, case):
        first = variant.first
        count = len(variant.inputs) - len(first.inputs)  # upstream gradients before the inputs
        ups = [_leaf(u) for u in case.inputs[:count]]
        xs, free = _tensors(first, case.inputs[count:])
        grads = _vjp(self._outputs(first, xs), [xs[k] for k in free], ups, create_graph=True)
        cotangents = [case.upstream[k] for k in free]
        second = _vjp(grads, ups + [xs[k] for k in free], cotangents)
        result = [_array(g) for g in second[:count]] + [None] * len(xs)
        for k, g in zip(free, second[count:]):
            result[count + k] = _array(g)
        return Gradients(result)

    def call_lines(self, variant) -> list[str]:
        return self.imports + ["# torch.autograd.grad of torch.autograd.grad(op(x), x, g, create_graph=True)"]


def _leaf(x):
    """`x` as a tensor requiring a gradient, unless it is of an integer dtype (the upstream
    gradient of an integer output: ArgMax's)."""
    import torch

    t = torch.as_tensor(np.asarray(x))
    return t.requires_grad_(True) if t.is_floating_point() or t.is_complex() else t


def _array(t) -> np.ndarray:
    """A gradient as numpy holds it (a lazily conjugated tensor resolved first)."""
    return t.detach().resolve_conj().numpy()

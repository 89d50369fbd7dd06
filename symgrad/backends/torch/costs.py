"""What a generated PyTorch op costs beside autograd of its formula: the bytes its Function
saves for backward, counted as PyTorch's own docs count them (`saved_tensors_hooks`, each
storage once), and the library's ops laid out as calls that tests and benchmarks time,
compile and transform."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


def saved_bytes(run) -> tuple[int, object]:
    """(bytes of the distinct storages autograd saves for backward while `run()` runs,
    what it returned)."""
    import torch

    storages = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        storages[(storage.data_ptr(), str(tensor.device))] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        result = run()
    return sum(storages.values()), result


@dataclass
class LibraryCall:
    """One variant of a library op, at its first probe case, as torch tensors."""

    op: object  # `symgrad.verify.ops_under_test.DerivedOp`
    variant: object  # `symgrad.verify.cases.Variant`
    tensors: list  # the inputs, those with a gradient requiring one
    free: list[int]  # the positions of those

    def __call__(self, suffix: str = "", tensors: list | None = None):
        """The generated function `<op><suffix>` ("": the op, "_forward": its formula, which
        autograd differentiates by itself) at the case's inputs (or at `tensors`)."""
        from symgrad.verify.sources import _input_args, accepted_kwargs

        fn = self.op.function("torch", suffix)
        attrs = {k: self.variant.attrs[k] for k in accepted_kwargs(fn, self.variant.attrs)}
        return fn(*_input_args(self.variant, self.tensors if tensors is None else tensors), **attrs)

    def loss(self, suffix: str = "", tensors: list | None = None):
        """The sum of the call's floating outputs (real parts): a scalar to differentiate."""
        outputs = self(suffix, tensors)
        outputs = outputs if isinstance(outputs, (list, tuple)) else (outputs,)
        return sum(o.real.sum() if o.is_complex() else o.sum() for o in outputs if o.is_floating_point() or o.is_complex())


def library_calls(generated: str | Path, ops_folder: str | Path = "ops", dtype: str = "float32",
                  every_variant: bool = False) -> list[LibraryCall]:
    """Each op of `ops_folder` that the PyTorch module in `generated` has, at its first variant
    (each variant with `every_variant`), as a `LibraryCall` in `dtype`."""
    from symgrad.backends.torch import unavailable_reason
    from symgrad.backends.torch.verify import _tensors
    from symgrad.verify.cases import case_groups
    from symgrad.verify.ops_under_test import load_derived

    calls = []
    for op in load_derived([Path(ops_folder)], generated=Path(generated)):
        if unavailable_reason(op):
            continue
        for variant, _, cases in case_groups(op, (dtype,), quick=True, sample=None if every_variant else 1):
            tensors, free = _tensors(variant, cases[0].inputs)
            calls.append(LibraryCall(op, variant, tensors, free))
    return calls

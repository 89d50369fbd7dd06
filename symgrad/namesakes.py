"""What an op stands for in PyTorch or JAX: `Namesake`, given to `@op(..., namesakes=...)` or
`@elementwise(..., namesakes=...)`.

Op types and attribute names are TensorFlow's, as `symgrad diff --against tensorflow` needs.
A PyTorch user reads `F.layer_norm`'s conventions instead: `eps`, defaulting to 1e-5; an
attention with `is_causal` and `scale`; a loss over any number of leading batch axes. An op's
namesake in a framework gives the op's wrapper in that framework's module (`layer_norm` in
`<stem>_torch.py`, not `layer_norm_forward` or the vjp) those conventions, beside
TensorFlow's, and the wrapper's docstring the call it matches:

    @op("LayerNorm", attrs={"epsilon": float}, defaults={"epsilon": 1e-3}, namesakes={
        "torch": Namesake("torch.nn.functional.layer_norm(x, x.shape[-1:], scale, offset, eps)",
                          keywords={"epsilon": "eps"}, defaults={"epsilon": 1e-5}),
    })

The wrapper then reads `layer_norm(x, scale, offset, *, eps=1e-05, epsilon=None)`, `epsilon`
taking precedence where given. `tests/test_namesakes.py` evaluates each `call` in the library
against its wrapper, values and gradients.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy as sp

from symgrad.errors import DeclarationError

FRAMEWORKS = ("torch", "jax")  # the targets whose wrappers follow a namesake


@dataclass(frozen=True)
class Namesake:
    """The function an op stands for in one framework, and how its wrapper there follows it.

    * `call`: the call the wrapper computes, written with the wrapper's own argument names
      (`"torch.softmax(logits, dim=-1)"`); its docstring quotes it, and the tests evaluate it.
    * `keywords`: attribute -> that function's keyword for it (`{"epsilon": "eps"}`), taken
      beside the attribute's own name.
    * `defaults`: attribute -> that function's default (`{"epsilon": 1e-5}`).
    * `causal_mask`: an input that is an additive mask over the last two axes, `(..., M, N)`:
      it may be left out (no mask), and `is_causal=True` makes it -inf above the diagonal
      (`j > i`), as `F.scaled_dot_product_attention`'s `is_causal` does.
    * `scaled`: `(input, factor)`: the op scales the products of `input` by `factor`, an
      expression in the dims (`("q", 1 / sp.sqrt(D))`); `scale=` replaces that factor (None:
      the op's own).
    * `batch_axes`: the op's inputs and outputs that lead with the first input's first axis take
      any number of leading axes in its place (flattened into one, and back).
    """

    call: str
    keywords: dict = field(default_factory=dict)
    defaults: dict = field(default_factory=dict)
    causal_mask: str | None = None
    scaled: tuple[str, Any] | None = None
    batch_axes: bool = False

    def __hash__(self) -> int:
        return hash((self.call, tuple(sorted(self.keywords.items())), tuple(sorted(self.defaults.items())),
                     self.causal_mask, self.scaled, self.batch_axes))


def checked_namesakes(name: str, location, namesakes: dict | None, attr_names: list[str]) -> tuple:
    """`namesakes` ({framework: Namesake}) as (framework, Namesake) pairs in FRAMEWORKS order,
    each naming only the op's attributes.

    Raises:
        DeclarationError: a framework other than FRAMEWORKS, a value that is no Namesake, or a
            keyword or default of no attribute.
    """
    namesakes = dict(namesakes or {})
    unknown = sorted(set(namesakes) - set(FRAMEWORKS))
    if unknown:
        raise DeclarationError(f"namesakes are for {' and '.join(FRAMEWORKS)}, got {unknown}", name, location)
    for framework, namesake in namesakes.items():
        if not isinstance(namesake, Namesake):
            raise DeclarationError(f"namesakes[{framework!r}] must be a Namesake, got {namesake!r}", name, location)
        stray = sorted((set(namesake.keywords) | set(namesake.defaults)) - set(attr_names))
        if stray:
            raise DeclarationError(f"the {framework} namesake's keywords and defaults name {stray}, not attributes "
                                   f"of the op ({attr_names})", name, location)
        if namesake.scaled is not None and not (len(namesake.scaled) == 2 and isinstance(namesake.scaled[0], str)):
            raise DeclarationError(f"the {framework} namesake's scaled is (input, factor), got {namesake.scaled!r}",
                                   name, location)
    return tuple((f, namesakes[f]) for f in FRAMEWORKS if f in namesakes)


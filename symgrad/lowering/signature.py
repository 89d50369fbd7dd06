"""What lowering reads of a declaration: a small frozen signature, not the declaration itself.

Derivation has called the user's function for every variant; lowering needs only the op's
names, where it is declared (for errors), its kind and the attributes its code reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from symgrad.attributes import Attr, AttributeGroups
from symgrad.declaration import ELEMENTWISE, Location, OpDecl


@dataclass(frozen=True)
class OpSignature(AttributeGroups):
    """One op as lowering sees it."""

    name: str  # the op type, e.g. "MatMul"
    func_name: str  # the Python name of the generated functions, e.g. "matmul"
    doc: str  # first line of the declaration's docstring
    location: Location  # where it is declared, for errors
    elementwise: bool  # a scalar expression broadcast like numpy (else index-summation)
    complex_ok: bool  # complex dtypes supported: the gradient conjugates what it reads
    attrs: tuple[Attr, ...]  # every attribute, in declaration order
    variadic: str | None = None  # the one list input whose length varies by variant
    broadcast_to: str | None = None  # elementwise: the attribute holding the output's shape
    output_dtypes: tuple = ()  # (output, dtype kind): an output whose dtype is not its inputs'
    cast_grads: bool = False  # each gradient is cast to its input's dtype (`OpDecl.wirtinger`)
    namesakes: tuple = ()  # (framework, `symgrad.namesakes.Namesake`): what it stands for there

    @classmethod
    def of(cls, decl: OpDecl) -> OpSignature:
        return cls(
            decl.name, decl.func_name, decl.doc, decl.location, decl.kind == ELEMENTWISE,
            decl.complex_ok, decl.attrs, decl.variadic, decl.broadcast_to, decl.output_dtypes, decl.wirtinger,
            decl.namesakes,
        )

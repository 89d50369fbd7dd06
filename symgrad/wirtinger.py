"""Gradients by Wirtinger derivatives: functions of z and conj(z), and outputs of another dtype.

For an output f(z, conj z) with upstream gradient g, TensorFlow's convention (its gradients
of Conj, Real, Imag, Angle, ComplexAbs in math_grad.py) is

    grad_z = g * conj(df/dz) + conj(g) * df/d(conj z),

the derivatives taken with z and conj(z) independent. For a holomorphic f the second term is
0 and this is `g * conj(f'(z))`, the engine's rule for complex ops. `re`, `im`, `Abs` and
`arg` of a complex value are written in z and conj(z) first (|z| = sqrt(z conj z), arg z =
(log z - log conj z) / 2i), and so stay in the gradient: |z| as sqrt(z conj z), a complex
value, `modulus(z)` in the gradient, which TensorFlow's arithmetic does not mix with real ones. A real input x takes the real part, re(g * conj(df/dx)), which
is the same formula's: that is done by returning each input's gradient in its dtype
(`symgrad.lowering`). A real output has a real g.

The generated gradient reads each input conjugated (the prologue `x = conj(x)` of every
complex op), so the result is written in that variable: z is conj(x), conj(z) is x.
"""

from __future__ import annotations

import sympy as sp

from symgrad.functions import modulus

NON_HOLOMORPHIC = (sp.conjugate, sp.re, sp.im, sp.arg)


def uses_wirtinger(variant) -> bool:
    """Whether `variant`'s gradient is taken by Wirtinger derivatives: its declaration says
    so (an output of its own dtype, complex inputs only), or an output reads conj, re, im or
    arg of a complex value."""
    decl = variant.decl
    if decl.wirtinger:
        return True
    return decl.complex_ok and any(o.expr.has(*NON_HOLOMORPHIC) for o in variant.outputs)


def independent(expr: sp.Expr, z) -> tuple[sp.Expr, sp.Expr]:
    """`expr` in z and a new symbol standing for conj(z), and that symbol."""
    zc = sp.Dummy(f"conj_{z}")
    rules = {
        sp.conjugate: lambda a: zc,
        sp.re: lambda a: (z + zc) / 2,
        sp.im: lambda a: (z - zc) / (2 * sp.I),
        sp.Abs: lambda a: sp.sqrt(z * zc),
        sp.arg: lambda a: -sp.I * (sp.log(z) - sp.log(zc)) / 2,
    }
    for function, rule in rules.items():
        expr = expr.replace(lambda e, f=function: isinstance(e, f) and e.args[0] == z, lambda e, r=rule: r(e.args[0]))
    return expr, zc


def wirtinger_vjp(expr: sp.Expr, z, grad, differentiate) -> sp.Expr:
    """g * conj(df/dz) + conj(g) * df/d(conj z) for f = `expr`, written in the generated
    code's conjugated input (z -> conj(z), conj(z) -> z). `differentiate(expr, wrt)` is the
    engine's derivative (which checks what SymPy left unevaluated)."""
    if z.is_real:  # a real input: the real part is taken when it is cast to its dtype
        return _in_code(grad * sp.conjugate(differentiate(expr, z)), z, z)
    f, zc = independent(expr, z)
    by_z, by_zc = differentiate(f, z), differentiate(f, zc)
    total = grad * sp.conjugate(by_z) + sp.conjugate(grad) * by_zc
    return _tidied(_in_code(total, z, zc), z)


def _in_code(expr: sp.Expr, z, zc) -> sp.Expr:
    """`expr` with z read as conj(z) and conj(z) as z (the prologue conjugated z)."""
    if z.is_real:
        return expr
    return expr.xreplace({z: sp.conjugate(z), zc: z})


def _tidied(expr: sp.Expr, z) -> sp.Expr:
    """sqrt(z conj z)**k as |z|**k (`modulus`, in z's dtype), conj(z) == 0 as z == 0."""
    square = z * sp.conjugate(z)
    expr = expr.replace(
        lambda e: isinstance(e, sp.Pow) and e.base == square and (2 * e.exp).is_Integer,
        lambda e: modulus(z) ** (2 * e.exp),
    )
    return expr.replace(
        lambda e: isinstance(e, sp.Eq) and sp.conjugate(z) in e.args and 0 in e.args, lambda e: sp.Eq(z, 0)
    )


def indexed_vjp(expr: sp.Expr, entry, grad, differentiate) -> sp.Expr:
    """`wirtinger_vjp` of an index op's output entry `expr` by the input entry `entry`
    (`x[a, b]`): conj(x[...]) stands for entries of a tensor of its own, conj(x)."""
    base = entry.base
    conj_base = sp.IndexedBase(sp.Dummy(f"conj_{base.label}"), shape=base.shape)
    separated = expr.replace(
        lambda e: isinstance(e, sp.conjugate) and isinstance(e.args[0], sp.Indexed) and e.args[0].base == base,
        lambda e: conj_base[e.args[0].indices],
    )
    by_z = differentiate(separated, entry)
    by_zc = differentiate(separated, conj_base[entry.indices])
    total = grad * sp.conjugate(by_z) + sp.conjugate(grad) * by_zc
    back = {conj_base: base}
    return total.replace(
        lambda e: isinstance(e, sp.Indexed) and e.base == base, lambda e: sp.conjugate(e)
    ).xreplace(back)

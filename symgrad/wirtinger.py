"""Gradients by Wirtinger derivatives: functions of z and conj(z), and outputs of another dtype.

For an output f(z, conj z) with upstream gradient g, TensorFlow's convention (its gradients
of Conj, Real, Imag, Angle, ComplexAbs in math_grad.py) is

    grad_z = g * conj(df/dz) + conj(g) * df/d(conj z),

the derivatives taken with z and conj(z) independent. For a holomorphic f the second term is
0 and this is `g * conj(f'(z))`, the engine's rule for complex ops. `re`, `im`, `Abs` and
`arg` of a complex value are written in z and conj(z) first (|z| = sqrt(z conj z), arg z =
(log z - log conj z) / 2i); |z| in a gradient is `modulus(z)`, computed in z's dtype, which
TensorFlow's arithmetic does not mix with real ones. A real input x takes the real part,
re(g * conj(df/dx)), which is the same formula's: that is done by returning each input's
gradient in its dtype (`symgrad.lowering`). A real output has a real g.

The generated gradient reads each input conjugated (the prologue `x = conj(x)` of every
complex op), so the result is written in that variable: z is conj(x), conj(z) is x.
"""

from __future__ import annotations

import sympy as sp

from symgrad.functions import modulus, promoted

NON_HOLOMORPHIC = (sp.conjugate, sp.re, sp.im, sp.arg)


def uses_wirtinger(variant) -> bool:
    """Whether `variant`'s gradient is taken by Wirtinger derivatives: its declaration says
    so (an output of its own dtype, complex inputs only), or an output reads conj, re, im or
    arg of a complex value."""
    decl = variant.decl
    if decl.wirtinger:
        return True
    return decl.complex_ok and any(o.expr.has(*NON_HOLOMORPHIC) for o in variant.outputs)


RULES = {  # each non-holomorphic function in u and conj(u)
    sp.re: lambda u: (u + sp.conjugate(u)) / 2,
    sp.im: lambda u: (u - sp.conjugate(u)) / (2 * sp.I),
    sp.Abs: lambda u: sp.sqrt(u * sp.conjugate(u)),
    sp.arg: lambda u: -sp.I * (sp.log(u) - sp.log(sp.conjugate(u))) / 2,
}


def independent(expr: sp.Expr, z) -> tuple[sp.Expr, sp.Expr]:
    """`expr` in z and a new symbol standing for conj(z), and that symbol: re, im, |.| and arg
    of a value that reads z written in it and its conjugate (SymPy conjugates a product, a
    power or an exponential factor by factor)."""
    zc = sp.Dummy(f"conj_{z}")
    for function, rule in RULES.items():
        expr = expr.replace(lambda e, f=function: isinstance(e, f) and e.args[0].has(z), lambda e, r=rule: r(e.args[0]))
    return expr.xreplace({sp.conjugate(z): zc}), zc


def wirtinger_vjp(expr: sp.Expr, z, grad, differentiate, conjugated=None) -> sp.Expr:
    """g * conj(df/dz) + conj(g) * df/d(conj z) for f = `expr`, written in the generated
    code's values: each complex input of `conjugated` is read conjugated there (w -> conj(w),
    conj(w) -> w). With `conjugated` None, in z itself, the real part taken for a real z (the
    gradient op's value, `symgrad.second_order`). `differentiate(expr, wrt)` is the engine's
    derivative (which checks what SymPy left unevaluated)."""
    f, zc = independent(expr, z)
    if z.is_real:  # a real input: the real part is taken when it is cast to its dtype
        total = grad * sp.conjugate(differentiate(f.xreplace({zc: z}), z))
        return sp.re(total) if conjugated is None else _tidied(_in_code(total, conjugated), conjugated)
    by_z, by_zc = differentiate(f, z), differentiate(f, zc)
    total = (grad * sp.conjugate(by_z) + sp.conjugate(grad) * by_zc).xreplace({zc: sp.conjugate(z)})
    if conjugated is None:
        return _real_moduli(total)
    return _tidied(_in_code(total, conjugated), conjugated)


def _in_code(expr: sp.Expr, conjugated) -> sp.Expr:
    """`expr` with each of `conjugated` read as its conjugate (the prologue conjugated it)."""
    return expr.xreplace({w: sp.conjugate(w) for w in conjugated})


def _real_moduli(expr: sp.Expr) -> sp.Expr:
    """conj((w conj(w))**p) as (w conj(w))**p, a real value."""
    is_square = lambda b: isinstance(b, sp.Mul) and len(b.args) == 2 and sp.conjugate(b.args[0]) == b.args[1]
    return expr.replace(
        lambda e: isinstance(e, sp.conjugate) and isinstance(e.args[0], sp.Pow) and is_square(e.args[0].base),
        lambda e: e.args[0],
    )


def promoted_reals(expr: sp.Expr, symbols) -> sp.Expr:
    """`expr` with each real one of `symbols` (the inputs: a gradient op's real upstream
    gradient) read in the complex dtype of the first complex one, where there is one
    (`promoted`): TensorFlow multiplies no real tensor by a complex one (a real output's
    upstream gradient is promoted once, first: `lowering.op`)."""
    like = next((s for s in symbols if not s.is_real), None)
    if like is None or not isinstance(expr, sp.Basic):
        return expr
    return expr.xreplace({s: promoted(s, like) for s in symbols if s.is_real})


def _tidied(expr: sp.Expr, conjugated) -> sp.Expr:
    """sqrt(w conj w)**k as |w|**k (`modulus`, in w's dtype), conj(w) == 0 as w == 0."""
    expr = _real_moduli(expr)
    for w in conjugated:
        square = w * sp.conjugate(w)
        expr = expr.replace(
            lambda e: isinstance(e, sp.Pow) and e.base == square and (2 * e.exp).is_Integer,
            lambda e, w=w: modulus(w) ** (2 * e.exp),
        )
        expr = expr.replace(
            lambda e, w=w: isinstance(e, sp.Eq) and sp.conjugate(w) in e.args and 0 in e.args, lambda e, w=w: sp.Eq(w, 0)
        )
    return expr


def indexed_vjp(expr: sp.Expr, entry, grad, differentiate, conjugated=()) -> sp.Expr:
    """`wirtinger_vjp` of an index op's output entry `expr` by the input entry `entry`
    (`x[a, b]`): the conjugates of each tensor's entries stand for entries of a tensor of its
    own, conj(x). Entries of the tensors `conjugated` (the bases the generated code reads
    conjugated) are read so."""
    pairs = {}  # base -> the base of its conjugate

    def separated(e):
        base = e.args[0].base
        pairs.setdefault(base, sp.IndexedBase(sp.Dummy(f"conj_{base.label}"), shape=base.shape))
        return pairs[base][e.args[0].indices]

    expr = expr.replace(lambda e: isinstance(e, sp.conjugate) and isinstance(e.args[0], sp.Indexed), separated)
    conj_entry = pairs[entry.base][entry.indices] if entry.base in pairs else None
    by_z = differentiate(expr, entry)
    total = grad * sp.conjugate(by_z)
    if conj_entry is not None:
        total += sp.conjugate(grad) * differentiate(expr, conj_entry)
    read = set(conjugated) | {entry.base}
    total = total.replace(lambda e: isinstance(e, sp.Indexed) and e.base in read, lambda e: sp.conjugate(e))
    return total.xreplace({conj_base: base for base, conj_base in pairs.items()})

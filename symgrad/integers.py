"""Integer-valued functions of indices, sizes and attributes that declarations use in
subscripts and sizes, and that the engine keeps whole:

* `computed_position`: a subscript not affine in its indices (a modulo, a clamp, a mirror
  image), read by a gather and scattered back by its adjoint, never solved for an index;
* `integer_function`: a decorator naming integer arithmetic (TensorFlow's SAME padding, a
  strided slice's start), which generated modules define once and call by name.
"""

from __future__ import annotations

import functools
import inspect

import sympy as sp


class computed_position(sp.Function):
    """A position computed from indices by a map that is not affine (a modulo, a mirror
    image, a clamp): a gather reads it and its adjoint is a scatter-add. Kept whole, so no
    delta is solved through it and SymPy does not split its branches into several reads."""

    nargs = 1
    is_integer = True

    @classmethod
    def eval(cls, position):
        if position.is_Integer or isinstance(position, (sp.Symbol, cls)):
            return position
        if position.has(sp.Piecewise):  # as selects: a Sum folds a Piecewise out of any call
            return cls(position.replace(lambda e: isinstance(e, sp.Piecewise), _as_selects))
        return None

    def _eval_derivative(self, s):
        return sp.S.Zero  # an integer position: constant wherever it is differentiable


class position_select(sp.Function):
    """`then` where `condition` holds, else `otherwise`: a branch inside a
    `computed_position`, which SymPy does not fold out of it as it would a Piecewise."""

    nargs = 3
    is_integer = True

    @classmethod
    def eval(cls, condition, then, otherwise):
        if condition == sp.true:
            return then
        if condition == sp.false:
            return otherwise
        return None

    def _eval_derivative(self, s):
        return sp.S.Zero  # an integer position: constant wherever it is differentiable

    def as_piecewise(self) -> sp.Piecewise:
        condition, then, otherwise = self.args
        return sp.Piecewise((then, condition), (otherwise, True))


def _as_selects(piecewise: sp.Piecewise) -> sp.Expr:
    value = piecewise.args[-1].expr if piecewise.args[-1].cond == sp.true else sp.S.NegativeOne
    for expr, condition in reversed(piecewise.args[:-1] if piecewise.args[-1].cond == sp.true else piecewise.args):
        value = position_select(condition, expr, value)
    return value


class IntegerFunctionBase(sp.Function):  # "Base": SymPy's printers dispatch a subclass here
    """A call of an integer function the declarations define in Python (`integer_function`):
    a generated module defines it once, as `_<name>`, and calls it by name. Numbers in, its
    value out; anything else stays a call, which the engine treats as an opaque integer."""

    is_integer = True
    parameters: tuple[sp.Symbol, ...] = ()  # formal parameters, integers
    template: sp.Expr = sp.S.Zero  # the value, of the parameters

    @classmethod
    def eval(cls, *args):
        return cls.applied(args) if all(a.is_number for a in args) else None

    @classmethod
    def applied(cls, args) -> sp.Expr:
        """The definition at `args`."""
        return cls.template.xreplace(dict(zip(cls.parameters, args)))

    def _eval_derivative(self, s):
        return sp.S.Zero  # integer valued: constant wherever it is differentiable

    def _eval_is_nonnegative(self):
        return self.applied(self.args).is_nonnegative

    def _eval_is_positive(self):
        return self.applied(self.args).is_positive

    def __reduce__(self):  # by value: the class is made at run time, in a user's op file
        cls = type(self)
        return _integer_call, (cls.__name__, cls.parameters, cls.template, cls.__doc__, self.args)


def integer_function(function) -> type[IntegerFunctionBase]:
    """Decorator: the Python function `function` of integers (sizes, attributes, indices),
    returning a SymPy expression, as a function generated code defines once and calls by
    name (TensorFlow's SAME padding, a slice's start) instead of printing it expanded where
    it is used. Its docstring is the generated function's."""
    parameters = tuple(sp.Symbol(name, integer=True) for name in inspect.signature(function).parameters)
    return _integer_function(function.__name__, parameters, sp.sympify(function(*parameters)), function.__doc__)


@functools.lru_cache(maxsize=None)
def _integer_function(name: str, parameters: tuple, template: sp.Expr, doc: str | None) -> type[IntegerFunctionBase]:
    """One class per definition in a process, so that calls compare equal."""
    namespace = {"parameters": parameters, "template": template, "nargs": len(parameters), "__doc__": doc}
    return type(name, (IntegerFunctionBase,), namespace)


def _integer_call(name, parameters, template, doc, args) -> sp.Expr:
    return _integer_function(name, parameters, template, doc)(*args)

"""What the numpy and TensorFlow printers print alike: operators, numbers, conditions."""

from __future__ import annotations

import sympy as sp
from sympy.printing.precedence import PRECEDENCE

from symgrad import ir
from symgrad.functions import indicator, scaled_besseli
from symgrad.guards import safe_where


SCAN_IDENTITY = {"sum": "0", "prod": "1", "logsumexp": "-float('inf')"}  # an exclusive scan's first entry


class ArrayCodeMixin:
    """Overrides shared by both backends' SymPy printers.

    A subclass sets `where` (the broadcasting select) and `sqrt`; both are module-qualified
    names passed through `_module_format`, which maps them to the module's import alias.
    """

    where: str
    sqrt: str
    int_extreme: str  # "...{}": maximum or minimum of integers
    aliases: dict[str, str] = {}  # module prefix -> alias used in generated code

    def __init__(self, settings=None):
        # not strict: what cannot be printed is collected in `_not_supported`, and `render`
        # reports it as a LoweringError naming the op instead of a SymPy traceback
        super().__init__({"strict": False, **(settings or {})})
        self._not_supported = set()  # CodePrinter.doprint sets this; we print with _print
        self.integer_functions: dict[str, type] = {}  # name -> IntegerFunctionBase class called
        self.array_functions: dict[str, type] = {}  # those called on arrays (`array_definition`)

    def emptyPrinter(self, expr):
        """What no `_print_<Class>` prints (an IR value a backend lacks): collected, so that
        `render` names the op and the class, instead of printing its `str`."""
        self._not_supported.add(expr)
        return f"<{type(expr).__name__}>"

    def _print_Softmax(self, value: ir.Softmax):
        """As its formula: the row maximum kept for broadcasting and subtracted, exp of that
        over its row sum (a log-softmax: the shifted row minus the log of the sum; masked: the
        exponentials outside the mask 0)."""
        x = sp.Symbol(value.x)
        top = sp.Symbol(self._print(ir.Reduce("max", ir.Elementwise(x), (value.axis,), True)))
        shifted = sp.exp(x - top) * (indicator(sp.Symbol(value.mask)) if value.mask else 1)
        total = sp.Symbol(self._print(ir.Reduce("sum", ir.Elementwise(shifted), (value.axis,), True)))
        return self._print(x - top - sp.log(total) if value.log else shifted / total)

    def _print_SoftmaxBackward(self, value: ir.SoftmaxBackward):
        """As its formula: a row sum kept for broadcasting, then one elementwise expression."""
        grad, output = sp.Symbol(value.grad), sp.Symbol(value.output)
        total = self._print(ir.Reduce("sum", ir.Elementwise(grad if value.log else grad * output), (value.axis,), True))
        if value.log:
            return f"{value.grad} - {self._print(sp.exp(output))} * {total}"
        return f"{value.output} * ({value.grad} - {total})"

    def _module_format(self, fqn, register=True):
        for prefix, alias in self.aliases.items():
            if fqn.startswith(prefix + "."):
                self.module_imports[prefix].add(fqn[len(prefix) + 1 :])
                return alias + fqn[len(prefix) :]
        return super()._module_format(fqn, register)

    def _print(self, expr, **kwargs):
        if _is_real_constant(expr):
            # folded to a literal: `tf.math.sqrt(3.14...)` would make a float32 tensor
            return self._print_Float(expr)
        return super()._print(expr, **kwargs)

    def begin_function(self, op) -> None:
        """Called before a generated function of `op` is printed (a backend may track values)."""

    def assigned(self, target: str, value) -> None:
        """Called after the statement `target = value` is printed."""

    def _print_operand(self, x) -> str:
        """An IR operand: a variable's name, or an elementwise value printed in place."""
        return x if isinstance(x, str) else self._print(x)

    def _print_linear_scan(self, value) -> str:
        """A linear recurrence (`ir.Scan` of kind "linear"): every runtime's `_linear_scan`."""
        flags = "".join(f", {flag}=True" for flag in ("exclusive", "reverse") if getattr(value, flag))
        x, by = self._print_operand(value.x), self._print_operand(value.by)
        return f"_linear_scan({x}, {by}, axis={value.axis}{flags})"

    def _print_Float(self, expr):
        return repr(float(expr))  # the shortest text that round-trips the double

    def _print_Mul(self, expr):
        numbers = [a for a in expr.args if a.is_number]
        if numbers and _is_real_constant(sp.Mul(*numbers)):
            # one coefficient, as TensorFlow writes `2 / sqrt(pi)`: a single literal
            rest = [a for a in expr.args if not a.is_number]
            expr = sp.Mul(sp.Mul(*numbers).evalf(30), *rest, evaluate=False)
        return super()._print_Mul(expr)

    def _print_Pow(self, expr, rational=False):
        base, exp = expr.as_base_exp()
        if exp == sp.S.Half:
            return f"{self._module_format(self.sqrt)}({self._print(base)})"
        if exp == -1:
            return f"1 / {self.parenthesize(base, PRECEDENCE['Mul'] + 1)}"
        if exp.is_Number and exp < 0:
            return f"1 / {self.parenthesize(sp.Pow(base, -exp, evaluate=False), PRECEDENCE['Mul'] + 1)}"
        return f"{self.parenthesize(base, PRECEDENCE['Pow'] + 1)}**{self.parenthesize(exp, PRECEDENCE['Pow'])}"

    def _print_Relational(self, expr):
        op = {"==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}[expr.rel_op]
        return f"({self._print(expr.lhs)} {op} {self._print(expr.rhs)})"

    def _print_Piecewise(self, expr):
        *branches, (last, last_cond) = expr.args
        if last_cond != sp.true:
            raise ValueError(f"a Piecewise needs a final branch with condition True: {expr}")
        text = self._print_branch(last)
        for value, condition in reversed(branches):
            text = f"{self._module_format(self.where)}({self._print_condition(condition)}, {self._print_branch(value)}, {text})"
        return text

    def _print_SafePiecewise(self, expr):  # a Piecewise already guarded (SymPy would not
        return ArrayCodeMixin._print_Piecewise(self, expr)  # take _print_Piecewise for it)

    def _print_branch(self, value):
        """A value `where` selects; a backend may need its numbers typed."""
        return self._print(value)

    def _print_condition(self, condition):
        text = self._print(condition)
        return text[1:-1] if text.startswith("(") and text.endswith(")") else text

    def _print_And(self, expr):
        return "(" + " & ".join(self._print(a) for a in expr.args) + ")"

    def _print_Or(self, expr):
        return "(" + " | ".join(self._print(a) for a in expr.args) + ")"

    def _print_Symbol(self, expr):  # None: a gradient that is none, in a tuple of them
        return "None" if expr.name == "None" else super()._print_Symbol(expr)

    def _print_Not(self, expr):
        return f"~{self._print(expr.args[0])}"

    def _print_safe_where(self, expr):
        """x, for a target whose code is not differentiated (TensorFlow's prints the select)."""
        return self._print(expr.args[0])

    def _print_indicator_equal(self, expr):
        return self._print(expr.as_piecewise())

    def _print_indicator(self, expr):
        return self._print(expr.as_piecewise())

    def _print_mask(self, expr):
        return self._print(expr.as_piecewise())

    def _print_selected(self, expr):
        return self._print(expr.as_piecewise())

    def _print_like_dtype(self, expr):
        return f"_like_dtype({self._print(expr.args[0])}, {self._print(expr.args[1])})"

    def _print_promoted(self, expr):
        return f"_promoted({self._print(expr.args[0])}, {self._print(expr.args[1])})"

    def _print_as_dtype(self, expr):
        return f"_as_dtype({self._print(expr.args[0])}, {self._print(expr.args[1])})"

    def _print_holds(self, expr):
        return self._print(expr.entry)

    def _print_position_select(self, expr):
        return self._print(expr.as_piecewise())

    def _print_computed_position(self, expr):
        return self._print(expr.args[0])

    def _print_IntegerFunctionBase(self, expr):
        """A call of the function the module defines (`integer_function_sources`)."""
        self.integer_functions[type(expr).__name__] = type(expr)
        return f"_{type(expr).__name__}({', '.join(self._print(a) for a in expr.args)})"

    def integer_definition(self, template) -> str:
        """The value an `integer_function` returns, of its parameters."""
        return self._print(ir.IndexArith(template))

    def array_definition(self, template) -> str:
        """The value an `integer_function` returns, of parameters that are arrays of positions
        (where `integer_definition` computes in numpy, a framework's printer prints this in the
        framework): every printer here but those of `namesake` prints one definition for both."""
        return self.integer_definition(template)

    # --- integer index arithmetic (IndexArith) ---

    _integer_context = False  # printing positions and sizes (an IndexArith): integers throughout
    dtype_source: str | None = None  # a variable of the dtype computed in (`render` sets it)
    guards_branches = False  # print `Branch.guarded_body`: the code is differentiated again
    computes_requested = False  # gradients take `needs_grad`: only those asked for are computed

    def _print_IndexArith(self, value):
        self._integer_context = True
        try:
            return self._print(integer_form(value.expr))
        finally:
            self._integer_context = False

    def _print_int_max(self, expr):
        return self._print_extreme("maximum", expr.args)

    def _print_int_min(self, expr):
        return self._print_extreme("minimum", expr.args)

    def _print_maximum_from(self, expr):  # its arguments lowered: elementwise
        return self._print_extreme("maximum", expr.args)

    def _print_minimum_from(self, expr):
        return self._print_extreme("minimum", expr.args)

    def _print_Max(self, expr):  # pairwise: SymPy flattens a nested Max back
        return self._print_extreme("maximum", expr.args)

    def _print_Min(self, expr):
        return self._print_extreme("minimum", expr.args)

    def _print_extreme(self, which, args):
        text = self._print(args[-1])
        for arg in reversed(args[:-1]):
            text = f"{self._module_format(self.int_extreme.format(which))}({self._print(arg)}, {text})"
        return text

    def _print_floordiv(self, expr):
        return " // ".join(self._division_operands(*expr.args))

    def _division_operands(self, num, den) -> tuple[str, str]:
        """`num` and `den` of `num // den` or `num % den`, parenthesised as Python reads them
        (both bind as tightly as `*`)."""
        level = PRECEDENCE["Mul"]
        return self.parenthesize(num, level, strict=True), self.parenthesize(den, level)

    def _print_split_exp(self, expr):
        """s * exp(u) by the runtime's `_split_exp`, the exp in two halves."""
        s, u = expr.args
        return f"_split_exp({self._print(s)}, {self._print(u)})"

    def _print_bessel_of_order_two(self, expr):
        """A Bessel function (or exponentially scaled I) of order 2, the derivative of order 1's,
        by the recurrence from orders 0 and 1, for a target that has only those; I2 and J2 are
        0 at x = 0, where the recurrence divides by zero. Any other order is not supported."""
        order, x = expr.args
        if order != 2:
            return self._print_not_supported(expr)
        f = type(expr)
        if f in (sp.besseli, scaled_besseli):
            recurrence = f(0, x) - 2 * f(1, x) / x
        elif f in (sp.besselj, sp.bessely):
            recurrence = 2 * f(1, x) / x - f(0, x)
        else:
            recurrence = f(0, x) + 2 * f(1, x) / x  # besselk
        if f in (sp.besseli, scaled_besseli, sp.besselj):
            # x = 0 guarded (the double where) where the code is differentiated again
            taken = recurrence.xreplace({x: safe_where(x, sp.Eq(x, 0))}) if self.guards_branches else recurrence
            return self._print(sp.Piecewise((0, sp.Eq(x, 0)), (taken, True)))
        return f"({self._print(recurrence)})"  # a sum, inside whatever product it is in

    def _print_Heaviside(self, expr):
        x = expr.args[0]
        half = expr.args[1] if len(expr.args) > 1 else sp.S.Half
        return self._print(sp.Piecewise((1, x > 0), (half, sp.Eq(x, 0)), (0, True)))


def merged_shape(sizes: tuple, groups: tuple) -> list[str]:
    """The sizes after merging each group of adjacent axes: products of the sizes in it."""
    starts = dict(groups)
    shape, n = [], 0
    while n < len(sizes):
        count = starts.get(n, 1)
        shape.append(" * ".join(sizes[n : n + count]))
        n += count
    return shape


class floordiv(sp.Function):
    """Integer division, rounding down (Python's `//`): how `floor(a / b)` is printed.

    Its precedence is just below a product's, so that a product or power of it is printed
    with it in parentheses (`a * (b // c)` is not `a * b // c`), a sum of it without."""

    precedence = PRECEDENCE["Mul"] - 1


def integer_form(expr: sp.Expr) -> sp.Expr:
    """`floor(a/b)` and `ceiling(a/b)` as integer divisions, for integer operands."""

    def divide(arg, up):
        num, den = sp.fraction(sp.together(arg))
        return -floordiv(-num, den) if up else floordiv(num, den)

    expr = expr.replace(lambda e: isinstance(e, sp.floor), lambda e: divide(e.args[0], False))
    expr = expr.replace(lambda e: isinstance(e, sp.ceiling), lambda e: divide(e.args[0], True))
    for extreme, integer in ((sp.Max, int_max), (sp.Min, int_min)):
        # numbers last: TensorFlow types a Python number after the tensor before it
        expr = expr.replace(
            lambda e: isinstance(e, extreme),
            lambda e, integer=integer: integer(*sorted(e.args, key=lambda a: a.is_number)),
        )
    return expr


class int_max(sp.Function):
    """The larger of integers (a padding's `max(..., 0)`), arguments in the order printed."""


class int_min(sp.Function):
    """The smaller of integers, arguments in the order printed."""


def _is_real_constant(expr) -> bool:
    """A real number that is not a plain rational: `pi`, `sqrt(2)`, `2/sqrt(pi)`, `log(2)`."""
    return (
        isinstance(expr, sp.Basic)
        and expr.is_number
        and not expr.is_Rational
        and not isinstance(expr, sp.Float)
        and bool(expr.is_extended_real)
        and bool(expr.is_finite)
    )


def nested(values) -> str:
    """Nested tuples of numbers as nested list literals."""
    if isinstance(values, tuple):
        return "[" + ", ".join(nested(v) for v in values) + "]"
    return str(int(values)) if values.is_Integer else repr(float(values))

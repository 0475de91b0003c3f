"""The elementwise kinds: unary maths, broadcasting binaries, ``where``, and the
optimiser's ``fma``, ``fused_adagrad`` and ``fused``. One definition each.

A plain unary kind is one line: its NumPy function (its meaning and dtypes), its C
expression for the generated kernels, its derivative ``d(ns, op, x, y, g)`` given
``y = op(x)`` and ``g = dL/dy``, its ONNX operator and its public names; the
family gives the rest (shape rule, kernel, exporter). A binary kind has one
derivative per operand, summed back over broadcasting by the family.

Conventions where a derivative is not defined (the usual subgradients): ``relu``
and ``abs`` have derivative 0 at 0; ``maximum``/``minimum`` split the gradient
evenly between equal operands; ``clip`` passes it where ``lo <= x <= hi``;
``power`` gives the exponent none where the base is <= 0 and the base none where
the exponent is 0; ``hypot`` gives none at the origin.

>>> from graphc.ops import DEFINITIONS
>>> DEFINITIONS["log2"].names, DEFINITIONS["log2"].expr
(('log2',), {'f': 'log2{m}({0})'})
"""
from __future__ import annotations

import numpy as np

import math

from ..algodiff.elementwise import binary_rule, fused_rule, unary_rule
from ..algodiff.common import fit, wants
from ..algodiff.rules import DIRECT, HOLOMORPHIC
from ..engine import cpu_kernels as kernels
from ..engine.cuda_codegen import IDENTITY_EXACT, SAME, every_class, math_call, wrapping
from ..engine.numba_codegen import numpy_call, wrapped
from ..onnx import export_ops as onnx
from ..shape import rules as shapes
from ..type.kinds import ANY, DERIVED
from .definition import NO_GRADIENT, OpDef, define

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_LN2, _LN10 = math.log(2.0), math.log(10.0)


def _onnx(onnx_op, identity_on=""):
    return onnx.unary_exporter(onnx_op, identity_on) if isinstance(onnx_op, str) else onnx_op


def _one_minus_square_root(ns, x):
    """sqrt(1 - x**2) as sqrt((1 - x)(1 + x)): exact near |x| = 1."""
    return ns.sqrt(ns.multiply(ns.subtract(1.0, x), ns.add(1.0, x)))


def _log_base(name, ln_base) -> "OpDef":
    """``log2`` or ``log10``: log(x) / ln(base) in ONNX, which has only the natural log."""
    return unary(name, **math_function(name), smooth_on=(0.2, 3.0), complex_grad=HOLOMORPHIC,
                 grad=lambda ns, op, x, y, g: ns.divide(g, ns.multiply(x, ln_base)),
                 onnx=lambda ctx, op, ins, out: ctx.op("Div", [
                     ctx.op("Log", [ctx.cast(ins[0], out.dtype)]),
                     ctx.scalar(ln_base, out.dtype)], out=out.name))


#: ``reference=`` default: the NumPy function of the kind's own name
NUMPY_NAMESAKE = "numpy.<name>"


def math_function(c_name, numpy_name=None) -> dict:
    """``expr=`` and ``numba=`` of a float function: the C library's ``c_name`` on the
    GPU, NumPy's ``numpy_name`` (default the same) in the CPU's generated kernels.

    >>> math_function("asin", "arcsin")["numba"]
    {'f': 'np.arcsin({0})'}
    """
    arity = 2 if c_name in ("atan2", "hypot", "pow") else 1
    return {"expr": math_call(c_name), "numba": numpy_call(numpy_name or c_name, arity)}


#: ``expr``/``numba`` of floor, ceil and rint: integers and booleans pass unchanged
def _exact_on_integers(c_name, numpy_name=None) -> dict:
    both = math_function(c_name, numpy_name)
    return {"expr": {**both["expr"], **IDENTITY_EXACT},
            "numba": {**both["numba"], "i": "{0}", "b": "{0}"}}


def unary(name, *, expr, grad, onnx, numba=None, names=None, reference=NUMPY_NAMESAKE,
          shape=shapes.unary, kernel=kernels.ufunc, identity_on="", **flags) -> OpDef:
    """A one-input elementwise kind computed by ``reference`` (``numpy.<name>`` by
    default) in place over its input; ``grad`` is ``d(ns, op, x, y, g)`` or
    :data:`NO_GRADIENT`; ``onnx`` an ONNX operator name or an exporter.

    Example: ``unary("exp", expr=math_call("exp"), grad=lambda ns, op, x, y, g:
    ns.multiply(g, y), onnx="Exp")``
    """
    if reference == NUMPY_NAMESAKE:
        reference = f"numpy.{name}"
    return OpDef(name, "unary", 1, reference, ANY, shape=shape,
                 kernel=kernel, expr=expr, numba=numba, reads_strided=True,
                 grad=grad if grad == NO_GRADIENT else unary_rule(grad),
                 onnx=_onnx(onnx, identity_on), onnx_name=onnx if isinstance(onnx, str) else None,
                 names=(name,) if names is None else names, **flags)


def binary(name, *, expr, grad, onnx, numba=None, names=None, **flags) -> OpDef:
    """A broadcasting two-input elementwise kind computed by ``numpy.<name>``;
    ``grad`` is a pair ``(d/da, d/db)`` of ``d(ns, op, a, b, y, g)`` or
    :data:`NO_GRADIENT`.

    Example: ``binary("add", expr=..., grad=(_pass, _pass), onnx=arithmetic_exporter("Add"))``
    """
    return OpDef(name, "binary", 2, f"numpy.{name}", ANY, shape=shapes.elementwise,
                 kernel=kernels.ufunc, expr=expr, numba=numba, reads_strided=True,
                 grad=grad if grad == NO_GRADIENT else binary_rule(*grad), onnx=onnx,
                 names=(name,) if names is None else names, **flags)


def _g(ns, op, x, y, g):  # the gradient passes unchanged
    return g


def _passed(ns, op, a, b, y, g):  # an operand's share of a sum: the gradient itself
    return g


def _negated(ns, op, a, b, y, g):
    return ns.negative(g)


# -- unary --------------------------------------------------------------------------------
def _absolute_grad(ns, op, x, y, g):
    """``g sign(x)``; for a complex ``z``, the convention's cotangent ``g z / |z|``
    (0 at 0: NumPy before 2.0 gives a complex number the sign of its real part)."""
    if x.dtype.kind != "c":
        return ns.multiply(g, ns.sign(x))
    return ns.multiply(g, ns.divide(x, ns.where(ns.equal(y, 0), 1.0, y)))


define(
    unary("negative", complex_grad=DIRECT, names=("negative", "neg"),
          expr={"f": "-{0}", "i": "({T})(({U})0 - ({U}){0})"},
          numba={"f": "-{0}", "i": wrapped("-{0}")},
          grad=lambda ns, op, x, y, g: ns.negative(g), onnx="Neg"),
    unary("absolute", complex_grad=DIRECT, names=("abs", "absolute"), smooth_on=(0.1, 2.0),
          expr={"f": "fabs{m}({0})", "i": "{0} < 0 ? ({T})(({U})0 - ({U}){0}) : {0}",
                "b": "{0}"},
          numba={"f": "np.abs({0})", "i": wrapped("abs({0})"), "b": "{0}"},
          grad=_absolute_grad, onnx="Abs", identity_on="b"),
    unary("sign", expr={"f": "{0} > 0 ? ({T})1 : ({0} < 0 ? ({T})-1 : ({0} == 0 ? ({T})0 : {0}))",
                        "i": "({T})(({0} > 0) - ({0} < 0))"},
          numba={"f": "{T}(1) if {0} > 0 else ({T}(-1) if {0} < 0 else ({T}(0) if {0} == 0 "
                      "else {0}))",
                 "i": wrapped("int({0} > 0) - int({0} < 0)")},
          grad=NO_GRADIENT, onnx="Sign"),
    # the generated exp is arithmetic on float32 (it vectorises), the C library's on float64
    unary("exp", complex_grad=HOLOMORPHIC,
          expr=math_call("exp"), numba={"f": "graphc_exp_{S}({0})"},
          grad=lambda ns, op, x, y, g: ns.multiply(g, y), onnx="Exp"),
    unary("log", complex_grad=HOLOMORPHIC, **math_function("log"), smooth_on=(0.2, 3.0),
          grad=lambda ns, op, x, y, g: ns.divide(g, x), onnx="Log"),
    _log_base("log2", _LN2),
    unary("log1p", complex_grad=HOLOMORPHIC, **math_function("log1p"), smooth_on=(-0.8, 3.0),
          grad=lambda ns, op, x, y, g: ns.divide(g, ns.add(x, 1.0)), onnx=onnx.log1p_export),
    unary("expm1", complex_grad=HOLOMORPHIC, **math_function("expm1"),
          grad=lambda ns, op, x, y, g: ns.multiply(g, ns.add(y, 1.0)), onnx=onnx.expm1_export),
    unary("sqrt", complex_grad=HOLOMORPHIC, **math_function("sqrt"), smooth_on=(0.2, 3.0),
          grad=lambda ns, op, x, y, g: ns.divide(ns.multiply(g, 0.5), y), onnx="Sqrt"),
    unary("square", complex_grad=HOLOMORPHIC,
          expr={"f": "graphc_mul_{s}({0}, {0})", "i": "({T})(({U}){0} * ({U}){0})"},
          numba={"f": "{0} * {0}", "i": wrapped("{0} * {0}")},
          grad=lambda ns, op, x, y, g: ns.multiply(g, ns.multiply(x, 2.0)),
          onnx=onnx.square_export),
    unary("reciprocal", complex_grad=HOLOMORPHIC,
          expr={"f": "({T})1 / {0}"}, numba={"f": "{T}(1) / {0}"}, smooth_on=(0.3, 3.0),
          grad=lambda ns, op, x, y, g: ns.negative(ns.multiply(g, ns.square(y))),
          onnx=onnx.reciprocal_export),
    unary("sin", complex_grad=HOLOMORPHIC,
          **math_function("sin"), grad=lambda ns, op, x, y, g: ns.multiply(g, ns.cos(x)),
          onnx="Sin"),
    unary("cos", complex_grad=HOLOMORPHIC, **math_function("cos"),
          grad=lambda ns, op, x, y, g: ns.negative(ns.multiply(g, ns.sin(x))), onnx="Cos"),
    unary("tan", complex_grad=HOLOMORPHIC, **math_function("tan"), smooth_on=(-1.2, 1.2),
          grad=lambda ns, op, x, y, g: ns.multiply(g, ns.add(ns.square(y), 1.0)), onnx="Tan"),
    unary("arcsin", complex_grad=HOLOMORPHIC,
          **math_function("asin", "arcsin"), smooth_on=(-0.8, 0.8),
          names=("arcsin", "asin"),
          grad=lambda ns, op, x, y, g: ns.divide(g, _one_minus_square_root(ns, x)),
          onnx="Asin"),
    unary("arccos", complex_grad=HOLOMORPHIC,
          **math_function("acos", "arccos"), smooth_on=(-0.8, 0.8),
          names=("arccos", "acos"),
          grad=lambda ns, op, x, y, g: ns.negative(ns.divide(g, _one_minus_square_root(ns, x))),
          onnx="Acos"),
    unary("arctan", complex_grad=HOLOMORPHIC,
          **math_function("atan", "arctan"), names=("arctan", "atan"),
          grad=lambda ns, op, x, y, g: ns.divide(g, ns.add(ns.square(x), 1.0)), onnx="Atan"),
    unary("sinh", complex_grad=HOLOMORPHIC, **math_function("sinh"), smooth_on=(-3.0, 3.0),
          grad=lambda ns, op, x, y, g: ns.multiply(g, ns.cosh(x)), onnx="Sinh"),
    unary("cosh", complex_grad=HOLOMORPHIC, **math_function("cosh"), smooth_on=(-3.0, 3.0),
          grad=lambda ns, op, x, y, g: ns.multiply(g, ns.sinh(x)), onnx="Cosh"),
    unary("arcsinh", complex_grad=HOLOMORPHIC,
          **math_function("asinh", "arcsinh"), names=("arcsinh", "asinh"),
          grad=lambda ns, op, x, y, g: ns.divide(g, ns.sqrt(ns.add(ns.square(x), 1.0))),
          onnx="Asinh"),
    unary("arccosh", complex_grad=HOLOMORPHIC,
          **math_function("acosh", "arccosh"), smooth_on=(1.2, 3.0),
          names=("arccosh", "acosh"),
          grad=lambda ns, op, x, y, g: ns.divide(
              g, ns.sqrt(ns.multiply(ns.subtract(x, 1.0), ns.add(x, 1.0)))),
          onnx="Acosh"),
    unary("arctanh", complex_grad=HOLOMORPHIC,
          **math_function("atanh", "arctanh"), smooth_on=(-0.8, 0.8),
          names=("arctanh", "atanh"),
          grad=lambda ns, op, x, y, g: ns.divide(
              g, ns.multiply(ns.subtract(1.0, x), ns.add(1.0, x))),
          onnx="Atanh"),
    _log_base("log10", _LN10),
    unary("exp2", complex_grad=HOLOMORPHIC, **math_function("exp2"), smooth_on=(-3.0, 3.0),
          grad=lambda ns, op, x, y, g: ns.multiply(g, ns.multiply(y, _LN2)),
          onnx=lambda ctx, op, ins, out: ctx.op("Pow", [
              ctx.scalar(2.0, out.dtype), ctx.cast(ins[0], out.dtype)], out=out.name)),
    unary("tanh", complex_grad=HOLOMORPHIC, **math_function("tanh"),
          grad=lambda ns, op, x, y, g: ns.multiply(g, ns.subtract(1.0, ns.square(y))),
          onnx="Tanh"),
    unary("floor", **_exact_on_integers("floor"), grad=NO_GRADIENT,
          onnx="Floor", identity_on="biu"),
    unary("ceil", **_exact_on_integers("ceil"), grad=NO_GRADIENT,
          onnx="Ceil", identity_on="biu"),
    unary("trunc", **_exact_on_integers("trunc"), grad=NO_GRADIENT, identity_on="biu",
          onnx=onnx.trunc_export),
    unary("logical_not", expr={"b": "!{0}"}, numba={"b": "not {0}"}, grad=NO_GRADIENT, onnx=onnx.logical_not_export,
          logical=True),
    # rint's semantics; N.round and N.rint are written by hand (decimals, integer inputs)
    unary("round", reference="numpy.round", kernel=kernels.round_,
          **_exact_on_integers("rint"), grad=NO_GRADIENT, onnx="Round",
          identity_on="biu"),
    # scipy's float32 erf rounds the double result; the generated one is within an ulp
    unary("erf", reference="scipy.special.erf", expr=math_call("erf"),
          numba={"f": "graphc_erf_{S}({0})"},
          grad=lambda ns, op, x, y, g: ns.multiply(
              g, ns.multiply(ns.exp(ns.negative(ns.square(x))), _TWO_OVER_SQRT_PI)),
          onnx="Erf"),
    # scipy.special.expit's formula: 1 / (1 + exp(-x)) in the input's precision (float16
    # too, where scipy has no loop of its own and would promote)
    unary("sigmoid", reference="scipy.special.expit", kernel=kernels.sigmoid,
          shape=lambda op, parents: (shapes.unary(op, parents)[0], parents[0].dtype)
          if parents[0].dtype == np.float16 else shapes.unary(op, parents),
          expr={"f": "({T})1 / (({T})1 + exp{m}(-{0}))"},
          numba={"f": "{T}(1) / ({T}(1) + graphc_exp_{S}(-{0}))"},
          grad=lambda ns, op, x, y, g: ns.multiply(g, ns.multiply(y, ns.subtract(1.0, y))),
          onnx="Sigmoid"),
    # the gradient from the output, so the pre-activation need not live until then
    unary("relu", reference=None, shape=shapes.same, kernel=kernels.relu, smooth_on=(0.1, 2.0),
          expr=every_class("graphc_max_{s}({0}, ({T})0)"),
          numba=every_class("graphc_max({0}, {T}(0))"),
          grad=lambda ns, op, x, y, g: ns.where(ns.greater(y, 0), g, 0.0),
          onnx=onnx.relu_export),
    # float -> float only (other casts carry no gradient); the driver casts g back
    unary("astype", complex_grad=DIRECT,
          reference="numpy.ndarray.astype", shape=shapes.astype, kernel=kernels.copy,
          expr=SAME, numba=SAME, grad=_g, onnx=onnx.astype_export),
    unary("copy", complex_grad=DIRECT,
          shape=shapes.same, kernel=kernels.copy, expr=SAME, numba=SAME, grad=_g, onnx="Identity",
          identity_on="biu"),
)


def _clip_grad(ns, op, x, y, g):
    inside = None
    for bound, compare in ((op["lo"], ns.greater_equal), (op["hi"], ns.less_equal)):
        if bound is not None:
            test = compare(x, bound)
            inside = test if inside is None else ns.logical_and(inside, test)
    return g if inside is None else ns.where(inside, g, 0.0)


define(unary("clip", shape=shapes.clip, kernel=kernels.clip,
             expr=every_class("graphc_clip_{s}({0}, {lo}, {hi})"),
             numba=every_class("graphc_clip({0}, {lo}, {hi})"), grad=_clip_grad,
             onnx=onnx.clip_export))


# -- binary -------------------------------------------------------------------------------
def _maximum_share(ns, a, b, g, greater):
    """``a``'s share of ``g`` in ``maximum(a, b)`` (``minimum`` with ``less``):
    all of it where ``a`` wins, half of it on a tie."""
    return ns.where(greater(a, b), g, ns.where(ns.equal(a, b), ns.multiply(g, 0.5), 0.0))


def _power_base(ns, op, a, b, y, g):
    slope = ns.multiply(b, ns.power(a, ns.subtract(b, 1)))
    return ns.multiply(g, ns.where(ns.equal(b, 0), 0.0, slope))


def _power_exponent(ns, op, a, b, y, g):
    # a complex base has a logarithm wherever it is not 0
    positive = ns.not_equal(a, 0) if a.dtype.kind == "c" else ns.greater(a, 0)
    log_a = ns.log(ns.where(positive, a, 1.0))
    return ns.multiply(g, ns.where(positive, ns.multiply(y, log_a), 0.0))


def _hypot(which):
    def d(ns, op, a, b, y, g):
        part = (a, b)[which]
        zero = ns.equal(y, 0)
        return ns.multiply(g, ns.where(zero, 0.0, ns.divide(part, ns.where(zero, 1.0, y))))
    return d


def _arctan2(which):
    def d(ns, op, a, b, y, g):
        norm = ns.add(ns.square(a), ns.square(b))
        part = b if which == 0 else ns.negative(a)
        return ns.multiply(g, ns.divide(part, norm))
    return d


def _extreme(name, compare):
    helper = f"graphc_{name}_{{s}}({{0}}, {{1}})"
    return dict(expr=every_class(helper), numba=every_class(f"graphc_{name}({{0}}, {{1}})"),
                grad=(lambda ns, op, a, b, y, g: _maximum_share(ns, a, b, g, getattr(ns, compare)),
                      lambda ns, op, a, b, y, g: _maximum_share(ns, b, a, g, getattr(ns, compare))))


def _comparison(name, c_operator, onnx_op, negated=False):
    template = every_class(f"{{0}} {c_operator} {{1}}")
    return binary(name, expr=template, numba=template, grad=NO_GRADIENT,
                  onnx=onnx.comparison_exporter(onnx_op, negated), comparison=True)


def _logical(name, c_operator, onnx_op, py_operator=None):
    return binary(name, expr={"b": f"{{0}} {c_operator} {{1}}"},
                  numba={"b": f"{{0}} {py_operator or c_operator} {{1}}"}, grad=NO_GRADIENT,
                  onnx=onnx.logical_exporter(onnx_op), logical=True, commutative=True)


define(
    binary("add", complex_grad=DIRECT,
           expr={"f": "{0} + {1}", "i": wrapping("+"), "b": "{0} || {1}"},
           numba={"f": "{0} + {1}", "i": wrapped("{0} + {1}"), "b": "{0} or {1}"},
           grad=(_passed, _passed), onnx=onnx.arithmetic_exporter("Add", on_bool="Or"),
           commutative=True),
    binary("subtract", complex_grad=DIRECT, expr={"f": "{0} - {1}", "i": wrapping("-")},
           numba={"f": "{0} - {1}", "i": wrapped("{0} - {1}")}, grad=(_passed, _negated),
           onnx=onnx.arithmetic_exporter("Sub")),
    binary("multiply", complex_grad=HOLOMORPHIC,
           expr={"f": "graphc_mul_{s}({0}, {1})", "i": wrapping("*"),
                             "b": "{0} && {1}"},
           numba={"f": "{0} * {1}", "i": wrapped("{0} * {1}"), "b": "{0} and {1}"},
           grad=(lambda ns, op, a, b, y, g: ns.multiply(g, b),
                 lambda ns, op, a, b, y, g: ns.multiply(g, a)),
           onnx=onnx.arithmetic_exporter("Mul", on_bool="And"), commutative=True),
    binary("divide", complex_grad=HOLOMORPHIC,
           names=("divide", "true_divide"), expr={"f": "{0} / {1}"},
           numba={"f": "{0} / {1}"},
           grad=(lambda ns, op, a, b, y, g: ns.divide(g, b),
                 lambda ns, op, a, b, y, g: ns.negative(ns.divide(ns.multiply(g, y), b))),
           onnx=onnx.arithmetic_exporter("Div")),
    binary("floor_divide", expr={"f": "graphc_floor_divide_{s}({0}, {1})"},
           numba={"f": "graphc_floor_divide({0}, {1})"}, grad=NO_GRADIENT,
           onnx=onnx.floor_divide_export),
    binary("power", complex_grad=HOLOMORPHIC,
           **math_function("pow", "power"), grad=(_power_base, _power_exponent),
           onnx=onnx.arithmetic_exporter("Pow")),
    # a - floor(a / b) * b, differentiable wherever floor(a / b) is locally constant
    binary("remainder", names=("remainder", "mod"), expr={"f": "graphc_remainder_{s}({0}, {1})"},
           numba={"f": "graphc_remainder({0}, {1})"},
           grad=(_passed,
                 lambda ns, op, a, b, y, g: ns.negative(ns.multiply(g, ns.floor_divide(a, b)))),
           onnx=onnx.remainder_export),
    binary("maximum", **_extreme("max", "greater"),
           onnx=onnx.arithmetic_exporter("Max", on_bool="Or"), commutative=True),
    binary("minimum", **_extreme("min", "less"),
           onnx=onnx.arithmetic_exporter("Min", on_bool="And"), commutative=True),
    binary("arctan2", **math_function("atan2", "arctan2"), grad=(_arctan2(0), _arctan2(1)),
           onnx=onnx.arctan2_export),
    binary("hypot", **math_function("hypot"), grad=(_hypot(0), _hypot(1)),
           onnx=onnx.hypot_export, commutative=True),
    _comparison("equal", "==", "Equal"),
    _comparison("not_equal", "!=", "Equal", negated=True),
    _comparison("less", "<", "Less"),
    _comparison("less_equal", "<=", "LessOrEqual"),
    _comparison("greater", ">", "Greater"),
    _comparison("greater_equal", ">=", "GreaterOrEqual"),
    _logical("logical_and", "&&", "And", "and"),
    _logical("logical_or", "||", "Or", "or"),
    _logical("logical_xor", "!=", "Xor"),
)


# -- ternary and the optimiser's kinds ----------------------------------------------------
def _where_grad(ns, op, inputs, output, g, needs=None):
    cond, a, b = inputs
    return [None,
            fit(ns, ns.where(cond, g, 0.0), a) if wants(needs, 1) else None,
            fit(ns, ns.where(cond, 0.0, g), b) if wants(needs, 2) else None]


def _fma_grad(ns, op, inputs, output, g, needs=None):
    a, b, c = inputs
    return [fit(ns, ns.multiply(g, b), a) if wants(needs, 0) else None,
            fit(ns, ns.multiply(g, a), b) if wants(needs, 1) else None,
            fit(ns, g, c) if wants(needs, 2) else None]


define(
    # where(cond, a, b) copies b then a under the mask: only b may be overwritten
    OpDef("where", "ternary", 3, "numpy.where", (2,), shape=shapes.where, complex_grad=DIRECT,
          kernel=kernels.where, expr=every_class("{0} ? {1} : {2}"),
          numba=every_class("{1} if {0} else {2}"), grad=_where_grad, reads_strided=True,
          onnx=onnx.where_export, names=("where",)),
    # made by the optimiser only: a*b + c in one node (c is read after a*b is written,
    # so only a and b may share the result's memory); two roundings, as multiply-then-add
    OpDef("fma", "ternary", 3, None, (0, 1), shape=shapes.fma, kernel=kernels.fma,
          complex_grad=HOLOMORPHIC,
          expr={"f": "graphc_mul_{s}({0}, {1}) + {2}",
                "i": "({T})(({U}){0} * ({U}){1} + ({U}){2})"},
          numba={"f": "{0} * {1} + {2}", "i": wrapped("{0} * {1} + {2}")},
          grad=_fma_grad, onnx=onnx.fma_export, reads_strided=True),
    # Owl's AdaGrad step lr / sqrt(v + eps), d/dv = -y / (2 (v + eps))
    OpDef("fused_adagrad", "unary", 1, None, ANY, shape=shapes.same,
          kernel=kernels.fused_adagrad, expr={"f": "{lr} / sqrt{m}({0} + {eps})"},
          numba={"f": "{lr} / np.sqrt({0} + {eps})"},
          grad=unary_rule(lambda ns, op, x, y, g: ns.divide(
              ns.multiply(ns.multiply(g, y), -0.5), ns.add(x, op["eps"]))),
          onnx=onnx.fused_adagrad_export, reads_strided=True),
    # a program of the kinds above (the optimiser's fusion); the engine decides what its
    # kernel may write over (graphc.engine.strategy)
    OpDef("fused", "fused", None, None, DERIVED, shape=shapes.declared, kernel=kernels.fused,
          expr={}, numba={}, grad=fused_rule, onnx=onnx.fused_export, reads_strided=True),
)

__all__ = ["unary", "binary", "math_function"]

# the integer-bit and float-representation kinds, made by the makers above
from . import elementwise_bits  # noqa: E402,F401

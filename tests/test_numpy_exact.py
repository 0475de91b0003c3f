"""NumPy's results, bit for bit (issue 13, item 7): with the default options every
rewrite of the optimiser leaves every result bit as NumPy computes it, and ``**``
follows ``ndarray.__pow__``; rewrites that change results run only with
``fast_math=True``.

"Bit for bit" here: every element that is a number has NumPy's bits (``-0.0`` is
not ``+0.0``, subnormals stay subnormal) and NaN is where NumPy has NaN. A NaN's
sign and payload are not compared: IEEE 754 leaves them open, and NumPy's own
loops differ (float16 ``add`` passes on the second operand's NaN, float32 the
first's; arithmetic quiets a signalling NaN that a copy keeps).

Each rule of the default pipeline has a case below, run on arrays holding every
pair of special values (signed zeros, infs, NaNs, subnormals, extremes) and on
hypothesis-drawn arrays, in float16, float32 and float64, against the
unoptimised graph and NumPy. A new rule without a case fails
``test_every_rule_of_the_default_pipeline_has_a_case``. Where a pass needs BLAS
(the transposes folded into matmul, the convolution lowered to a GEMM), the
data are small integers, whose sums are exact in any order, so no test depends
on BLAS's summation order.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc.operator.elementwise import POWER_SHORTCUTS
from graphc.operator.lazy import NS
from graphc.optimiser.passes import DEFAULT, STATIC_PASSES
from graphc.optimiser.rewriter import Pass, rewrite
from graphc.optimiser.simplify import IDENTITIES
from neural_reference import ref_conv, ref_conv_backward_input, ref_conv_backward_kernel
from test_plan_random import build_graph, programs

pytestmark = pytest.mark.cpu_engine   # NumPy's bits, kept by the CPU program (the device has its own)

FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


# -- special values and the comparison ------------------------------------------------------
def _nan_bits(dtype, negative=False, quiet=True):
    """A NaN of ``dtype`` from its bits: quiet or signalling, either sign."""
    fi = np.finfo(dtype)
    width = dtype.itemsize * 8
    exponent = ((1 << (width - 1 - fi.nmant)) - 1) << fi.nmant
    mantissa = (1 << (fi.nmant - 1)) | 3 if quiet else 1
    bits = exponent | mantissa | ((1 << (width - 1)) if negative else 0)
    return np.array([bits], UINT[dtype.itemsize]).view(dtype)[0]


@functools.lru_cache(maxsize=None)
def specials(dtype) -> tuple:
    """Every special value of a float dtype, and a few ordinary ones."""
    dtype = np.dtype(dtype)
    fi = np.finfo(dtype)
    largest_subnormal = fi.tiny - fi.smallest_subnormal
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, 0.5, -2.5, 3.0,
              fi.max, -fi.max, fi.tiny, -fi.tiny, fi.smallest_subnormal,
              -fi.smallest_subnormal, largest_subnormal, fi.eps]
    array = np.array(values, dtype)
    nans = [_nan_bits(dtype, True), _nan_bits(dtype, False, quiet=False)]
    return tuple(np.concatenate([array, np.array(nans, dtype)]))


def every_pair(dtype, shape, position, integers=False):
    """An array of ``shape`` that, with the arrays of the other positions, holds every
    pair of special values (values cycle with period k, k*k, k*k*k by position)."""
    values = np.arange(-3, 4) if integers else np.array(specials(dtype), dtype)
    k = len(values)
    index = np.arange(int(np.prod(shape))) // k ** position % k
    return values[index].astype(dtype).reshape(shape)


def special_arrays(dtype, shape, integers=False):
    """Hypothesis arrays of ``dtype``: special values and any float of the width."""
    if integers:
        elements = st.integers(-3, 3).map(float)
    else:
        elements = (st.sampled_from(specials(dtype))
                    | st.floats(width=8 * dtype.itemsize, allow_subnormal=True))
    return hnp.arrays(dtype, shape, elements=elements)


def assert_same_bits(got, want, what=""):
    """Equal dtype and shape; numbers equal in every bit, NaN where ``want`` has NaN."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, NumPy {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, NumPy {want.shape}"
    if got.dtype.kind == "c":   # the real and imaginary parts, each as a float array
        got, want = (np.ascontiguousarray(a).view(a.real.dtype) for a in (got, want))
    if got.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), f"{what}: NaN at other places"
    same = np.ascontiguousarray(got).view(UINT[got.dtype.itemsize]) == \
        np.ascontiguousarray(want).view(UINT[want.dtype.itemsize])
    wrong = ~same & ~nan
    if wrong.any():
        bits = UINT[got.dtype.itemsize]
        g3, w3 = got[wrong][:3], want[wrong][:3]
        first = [f"{g!r} (0x{int(gb):x}) for {w!r} (0x{int(wb):x})"
                 for g, gb, w, wb in zip(g3, g3.view(bits), w3, w3.view(bits))]
        raise AssertionError(f"{what}: {wrong.sum()} of {wrong.size} differ in their bits: "
                             + ", ".join(first))


def numpy_value(function, *arrays):
    with np.errstate(all="ignore"):
        return np.asarray(function(*arrays))


def runs(graph, names, arrays):
    with np.errstate(all="ignore"):
        return graph.run(**dict(zip(names, arrays)))


# -- one case per rewrite rule of the default pipeline ------------------------------------
def const(M, array):
    return N.const(array) if M is N else array


def made(M, kind, x, **attrs):
    """A node only a rewrite or an importer makes (an identity transpose, reshape,
    cast or broadcast; the build functions drop those); in NumPy: ``x`` itself."""
    return NS._op(kind, [x], **attrs) if M is N else x


def c(x, value):
    """``value`` as a 0-d constant of ``x``'s dtype (NumPy's weak Python scalar)."""
    return np.asarray(value, x.dtype)


WINDOW = ((1, 1), ((1, 1), (1, 1)), (1, 1), 1)     # stride, padding, dilation, groups


def conv(M, x, w):
    if M is N:
        return N.conv2d(x, w, padding=1)
    return ref_conv(x, w, *WINDOW).astype(x.dtype)


PADS = ((0, 0), (0, 0), (1, 0), (0, 2))


def padded_conv(M, x, w):
    """A convolution of an image padded with zeros first (TF's "same" as an explicit
    pad): the pad becomes the convolution's padding."""
    if M is N:
        return N.conv2d(N.pad(x, PADS), w, padding=1)
    return ref_conv(np.pad(x, PADS), w, *WINDOW).astype(x.dtype)


def conv_input_gradient(M, g, w, x_shape=(2, 3, 6, 6)):
    if M is N:
        return N.conv2d_backward_input(g, w, x_shape, padding=1)
    return ref_conv_backward_input(g, w, x_shape, *WINDOW).astype(g.dtype)


def conv_kernel_gradient(M, x, g, w_shape=(4, 3, 3, 3)):
    if M is N:
        return N.conv2d_backward_kernel(x, g, w_shape, padding=1)
    return ref_conv_backward_kernel(x, g, w_shape, *WINDOW).astype(x.dtype)


POINTWISE = ((1, 1), ((0, 0), (0, 0)), (1, 1), 1)


def pointwise_conv(M, x, w):
    """A 1x1 convolution of a computed value used once (its reshape is free, so the
    lowering's pointwise rule fires)."""
    x = x * c(x, 2)
    if M is N:
        return N.conv2d(x, w)
    return ref_conv(x, w, *POINTWISE).astype(x.dtype)


def pointwise_input_gradient(M, g, w, x_shape=(2, 3, 6, 6)):
    g = g * c(g, 2)
    if M is N:
        return N.conv2d_backward_input(g, w, x_shape)
    return ref_conv_backward_input(g, w, x_shape, *POINTWISE).astype(g.dtype)


def pointwise_kernel_gradient(M, x, g, w_shape=(4, 3, 1, 1)):
    x = x * c(x, 2)
    if M is N:
        return N.conv2d_backward_kernel(x, g, w_shape)
    return ref_conv_backward_kernel(x, g, w_shape, *POINTWISE).astype(x.dtype)


@dataclass(frozen=True)
class Case:
    """``build(M, *arrays)`` with ``M`` either ``graphc.ndarray`` or ``numpy`` makes
    a graph on which ``rule`` (of pass ``pass_name``) fires."""

    rule: str
    pass_name: str
    build: Callable
    shapes: tuple = ((20, 20),)
    integers: bool = False        # BLAS inside: data whose sums are exact in any order


CASES = [
    Case("add_zero", "simplify", lambda M, x: x + c(x, -0.0)),
    Case("add_zero", "simplify", lambda M, x: c(x, -0.0) + x),
    Case("subtract_zero", "simplify", lambda M, x: x - c(x, 0.0)),
    Case("multiply_one", "simplify", lambda M, x: c(x, 1.0) * x),
    Case("divide_one", "simplify", lambda M, x: x / c(x, 1.0)),
    Case("power_one", "simplify", lambda M, x: x ** c(x, 1.0)),
    Case("double_negation", "simplify", lambda M, x: -(-x)),
    Case("transpose_transpose", "simplify",
         lambda M, x: M.transpose(M.transpose(x, (1, 2, 0)), (1, 0, 2)), ((4, 5, 20),)),
    Case("identity_transpose", "simplify", lambda M, x: made(M, "transpose", x, axes=(0, 1))),
    Case("reshape_reshape", "simplify", lambda M, x: x.reshape(-1).reshape(10, 40)),
    Case("identity_reshape", "simplify", lambda M, x: made(M, "reshape", x, shape=x.shape)),
    Case("copy", "simplify", lambda M, x: M.copy(x) * c(x, 3.0)),
    Case("identity_cast", "simplify", lambda M, x: made(M, "astype", x, dtype=x.dtype)),
    Case("identity_broadcast", "simplify",
         lambda M, x: made(M, "broadcast_to", x, shape=x.shape)),
    Case("pad_into_conv", "simplify", padded_conv, ((2, 3, 6, 6), (4, 3, 3, 3)),
         integers=True),
    Case("cse", "cse", lambda M, x, y: M.exp(x) * y + M.exp(x), ((20, 20), (20, 20))),
    Case("fold", "fold",         # every special value through sqrt, folded
         lambda M, x: x * M.sqrt(const(M, every_pair(x.dtype, x.shape, 1)))),
    Case("drop_expansions", "drop_expansions",
         lambda M, x, b: x + M.broadcast_to(b, x.shape) * M.tile(b, (20, 1)), ((20, 20), (20,))),
    Case("lower_conv2d", "lowering", conv, ((2, 3, 6, 6), (4, 3, 3, 3)), integers=True),
    Case("lower_conv2d_backward_input", "lowering", conv_input_gradient,
         ((2, 4, 6, 6), (4, 3, 3, 3)), integers=True),
    Case("lower_conv2d_backward_kernel", "lowering", conv_kernel_gradient,
         ((2, 3, 6, 6), (2, 4, 6, 6)), integers=True),
    Case("lower_pointwise_conv2d", "lowering", pointwise_conv, ((2, 3, 6, 6), (4, 3, 1, 1)),
         integers=True),
    Case("lower_pointwise_conv2d_backward_input", "lowering", pointwise_input_gradient,
         ((2, 4, 6, 6), (4, 3, 1, 1)), integers=True),
    Case("lower_pointwise_conv2d_backward_kernel", "lowering", pointwise_kernel_gradient,
         ((1, 3, 6, 6), (1, 4, 6, 6)), integers=True),
    Case("transpose_a_into_matmul", "matmul_transpose", lambda M, a, b: a.T @ b,
         ((7, 5), (7, 6)), integers=True),
    Case("transpose_b_into_matmul", "matmul_transpose", lambda M, a, b: a @ b.T,
         ((5, 7), (6, 7)), integers=True),
    Case("adagrad", "adagrad", lambda M, v: c(v, 0.01) / M.sqrt(v + c(v, 1e-4))),
    Case("fma", "fma", lambda M, a, b, d: a * b + d, ((20, 20),) * 3),
    Case("fma", "fma", lambda M, a, b, d: d + a * b, ((20, 20),) * 3),
    Case("fuse_elementwise", "fuse_elementwise",
         lambda M, x, y: M.tanh(M.exp(x) * y - c(x, 1.0)) / y, ((20, 20), (20, 20))),
    Case("fuse_elementwise", "fuse_elementwise",            # streamed chunk by chunk
         lambda M, x, y: M.sqrt(M.exp(x) * y + c(x, 0.5)) / y, ((256, 257), (256, 257))),
]


def case_id(case):
    return f"{case.rule}-{'x'.join(map(str, case.shapes[0]))}-{CASES.index(case)}"


def _pass_table():
    from graphc.eager import evaluate
    from graphc.optimiser.fold import folding_pass
    return dict(STATIC_PASSES, fold=folding_pass(evaluate))


def rules_of_default_pipeline() -> set:
    """Rule names of the default passes; a pass that is a function counts as one rule."""
    names = set()
    for name, pass_ in _pass_table().items():
        if name in DEFAULT:
            names |= {r.name for r in pass_.rules} or {name}
    return names


def test_every_rule_of_the_default_pipeline_has_a_case():
    assert rules_of_default_pipeline() == {case.rule for case in CASES}


def _graph_for(case, dtype):
    variables = [N.var(f"a{i}", shape, dtype) for i, shape in enumerate(case.shapes)]
    return variables, case.build(N, *variables)


@functools.lru_cache(maxsize=None)
def compiled(case, dtype):
    """(names, graph with the case's pass only, the default pipeline, no optimiser)."""
    variables, y = _graph_for(case, dtype)
    names = [v.name for v in variables]
    with np.errstate(all="ignore"):       # folding sqrt(-1) says so, as NumPy would
        return (names,
                graphc.compile(variables, [y], optimise=[case.pass_name], check=True),
                graphc.compile(variables, [y], check=True),
                graphc.compile(variables, [y], optimise=False))


def _check_case(case, dtype, arrays):
    names, one, default, plain = compiled(case, dtype)
    want = numpy_value(lambda *a: case.build(np, *a), *arrays)
    for label, graph in (("pass alone", one), ("default pipeline", default),
                         ("unoptimised", plain)):
        assert_same_bits(runs(graph, names, arrays)[0], want, f"{case.rule}, {label}, {dtype}")


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_each_rule_fires_and_keeps_numpys_bits_on_every_pair_of_special_values(case, dtype):
    variables, y = _graph_for(case, dtype)
    pass_ = _pass_table()[case.pass_name]
    rules = [r for r in pass_.rules if r.name == case.rule]
    # the rule itself (not a sibling) rewrites this graph
    one_rule = Pass(case.rule, rules) if rules else pass_
    with np.errstate(all="ignore"):
        assert rewrite([y], one_rule.rewrite_node if (one_rule.rules or one_rule.function)
                       else None, merge=one_rule.merge)[1] >= 1
    names, one, _, _ = compiled(case, dtype)
    assert one.stats()["optimiser_changes"].get(case.pass_name, 0) >= 1
    arrays = [every_pair(dtype, shape, k, case.integers) for k, shape in enumerate(case.shapes)]
    _check_case(case, dtype, arrays)


@pytest.mark.parametrize("case", [c_ for c_ in CASES if np.prod(c_.shapes[0]) <= 400],
                         ids=case_id)
@given(data=st.data(), dtype=st.sampled_from(FLOATS))
def test_each_rule_keeps_numpys_bits_on_drawn_arrays(case, data, dtype):
    arrays = [data.draw(special_arrays(dtype, shape, case.integers), label=f"a{k}")
              for k, shape in enumerate(case.shapes)]
    _check_case(case, dtype, arrays)


# -- arithmetic identities: the table against NumPy, every dtype ---------------------------
ALL_DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.uint8, np.int64, np.float16,
                                    np.float32, np.float64, np.complex64, np.complex128)]


def values_of(dtype):
    if dtype.kind == "b":
        return np.array([True, False])
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.array([0, 1, 2, info.max, info.min, info.max - 1], dtype)
    if dtype.kind == "f":
        return np.array(specials(dtype), dtype)
    parts = specials(np.finfo(dtype).dtype)[:12]
    return np.array([complex(a, b) for a in parts for b in parts], dtype)


def _identity_result(identity, X, element, constant_first=False):
    ufunc = getattr(np, identity.kind)
    with np.errstate(all="ignore"):
        return ufunc(element, X) if constant_first else ufunc(X, element)


def _bits_kept(got, X) -> bool:
    try:
        assert_same_bits(got, X)
        return True
    except AssertionError:
        return False


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("identity", IDENTITIES, ids=lambda i: i.name)
def test_the_identity_table_says_exactly_where_numpy_keeps_x(identity, dtype):
    """``exact_kinds`` is NumPy's behaviour: ``x op element`` is x's bits for every
    value exactly for those dtype kinds (where the op exists and keeps x's dtype)."""
    X = values_of(dtype)
    element = identity.element_in(dtype)
    try:
        got = _identity_result(identity, X, element)
    except TypeError:            # bool - bool, say: NumPy refuses, graphc too
        assert dtype.kind not in identity.exact_kinds
        return
    keeps = got.dtype == X.dtype and _bits_kept(got, X)
    if identity.commutative:
        keeps = keeps and _bits_kept(_identity_result(identity, X, element, True), X)
    assert keeps == (dtype.kind in identity.exact_kinds), (identity, dtype)
    if dtype.kind in "fc" and identity.element == 0:    # the other zero is not exact
        assert not _bits_kept(_identity_result(identity, X, -element), X)


def _same_constant(a, b) -> bool:
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("identity", IDENTITIES, ids=lambda i: i.name)
@pytest.mark.parametrize("negated", [False, True], ids=["element", "negated"])
def test_default_compilation_gives_numpys_identities(identity, dtype, negated):
    """The op goes exactly where the table allows; NumPy's bits either way; with
    fast_math it goes wherever the constant equals the element in value."""
    X = values_of(dtype)
    e = identity.element_in(dtype)
    if negated:
        if dtype.kind in "bu":
            return
        e = np.negative(e)
    try:
        with np.errstate(all="ignore"):
            want = getattr(np, identity.kind)(X, e)
    except (TypeError, ValueError):     # bool - bool, int ** -1: NumPy refuses
        return
    x = N.var("x", X.shape, dtype)
    y = getattr(N, identity.kind)(x, N.const(e))
    g = graphc.compile([x], [y], check=True)
    assert_same_bits(runs(g, ["x"], [X])[0], want, f"{identity.name} {e!r} {dtype}")
    removed = set(g.stats()["ops"]) == {"var"}
    assert removed == (dtype.kind in identity.exact_kinds and want.dtype == dtype
                       and _same_constant(e, identity.element_in(dtype)))
    fast = graphc.compile([x], [y], fast_math=True, check=True)
    removed = set(fast.stats()["ops"]) == {"var"}
    assert removed == (want.dtype == dtype and bool(e == identity.element))


def test_the_issues_identities():
    x = N.var("x", (4,), np.float16)
    X = np.array([-0.0, 0.0, -np.inf, np.nan], np.float16)
    g = graphc.compile([x], [x + 0.0, x - (-0.0), 0.0 + x, x + 0])
    for got in runs(g, ["x"], [X]):
        assert_same_bits(got, X + 0.0)
        assert not np.signbit(got[0])


# -- ** follows ndarray.__pow__ ------------------------------------------------------------
EXPONENTS = [2, -1, 0.5, -0.5, 3, 1, 0, 2.0, -1.0, 1.0, 0.0, 0.5 + 0j, np.float64(0.5),
             np.float32(0.5), np.int64(2), True, -2]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_power_operator_gives_numpys_result_for_every_exponent(dtype):
    X = values_of(dtype)
    x = N.var("x", X.shape, dtype)
    for e in EXPONENTS:
        try:
            want = numpy_value(lambda a: a ** e, X)
        except (ValueError, TypeError, OverflowError):   # int ** -1, bool ** -1
            with pytest.raises(Exception):                   # noqa: B017, PT011
                runs(graphc.compile([x], [x ** e]), ["x"], [X])
            continue
        y = x ** e
        for optimise in (True, False):
            g = graphc.compile([x], [y], optimise=optimise)
            assert_same_bits(runs(g, ["x"], [X])[0], want, f"{dtype} ** {e!r}")


def test_float16_square_root_by_power_is_numpys_sqrt():
    """The issue's case: ``x ** 0.5`` is sqrt (NaN at -inf, -0.0 at -0.0), while
    ``np.power(x, 0.5)`` and ``N.power`` stay power (inf, +0.0)."""
    X = np.array([-np.inf, -0.0, 0.0, 4.0], np.float16)
    x = N.var("x", (4,), np.float16)
    g = graphc.compile([x], [x ** 0.5, N.power(x, 0.5), np.power(x, 0.5)])
    root, power, power2 = runs(g, ["x"], [X])
    assert_same_bits(root, np.array([np.nan, -0.0, 0.0, 2.0], np.float16))
    assert_same_bits(power, numpy_value(np.power, X, 0.5))
    assert_same_bits(power2, numpy_value(np.power, X, 0.5))
    assert np.isinf(power[0]) and np.isnan(root[0])


def test_power_shortcuts_are_the_ufuncs_numpy_uses():
    """The table itself: for each entry NumPy's ``**`` equals the named ufunc, and for
    a float ``2.0``/``-1.0`` it is power (they are not shortcuts)."""
    X = values_of(np.dtype(np.complex64))        # where square/reciprocal differ from power
    for (kind, exponent), (ufunc, kinds) in POWER_SHORTCUTS.items():
        assert "c" in kinds
        assert_same_bits(numpy_value(lambda a: a ** kind(exponent), X),
                         numpy_value(getattr(np, ufunc), X))
    for e in (2.0, -1.0):
        assert_same_bits(numpy_value(lambda a: a ** e, X), numpy_value(np.power, X, e))


# -- AdaGrad and the reciprocal ------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_division_by_a_root_is_not_a_reciprocal_by_default(dtype):
    """``g / sqrt(v + eps)`` and ``(lr * g) / sqrt(v + eps)`` keep their division (the
    issue's batch norm); with fast_math they become ``g * fused_adagrad(v)``."""
    shape = (20, 20)
    g_, v_ = N.var("g", shape, dtype), N.var("v", shape, dtype)
    ys = [g_ / N.sqrt(v_ + 1e-3), 0.1 * g_ / N.sqrt(v_ + 1e-2)]
    G, V = every_pair(dtype, shape, 0), every_pair(dtype, shape, 1)
    want = [numpy_value(lambda g, v: g / np.sqrt(v + c(v, 1e-3)), G, V),
            numpy_value(lambda g, v: c(v, 0.1) * g / np.sqrt(v + c(v, 1e-2)), G, V)]
    default = graphc.compile([g_, v_], ys, check=True)
    assert "fused_adagrad" not in str([n.op for n in default.graph.order])
    for got, w in zip(runs(default, ["g", "v"], [G, V]), want):
        assert_same_bits(got, w)
    fast = graphc.compile([g_, v_], ys, fast_math=True, check=True)
    assert fast.stats()["optimiser_changes"].get("fast_math") == 2
    assert "fused_adagrad" in str([n.op for n in fast.graph.order])


def test_a_reciprocal_changes_bits_which_is_why_it_waits_for_fast_math():
    """Evidence for the rule's placement: on ordinary float32 data a multiply by
    ``1 / sqrt(v + eps)`` differs from the division in some last bits."""
    rng = np.random.default_rng(0)
    G = rng.standard_normal(50_000).astype(np.float32)
    V = rng.random(50_000).astype(np.float32)
    g_, v_ = N.var("g", G.shape), N.var("v", V.shape)
    y = g_ / N.sqrt(v_ + 1e-5)
    want = G / np.sqrt(V + np.float32(1e-5))
    fast = runs(graphc.compile([g_, v_], [y], fast_math=True), ["g", "v"], [G, V])[0]
    exact = runs(graphc.compile([g_, v_], [y]), ["g", "v"], [G, V])[0]
    assert_same_bits(exact, want)
    assert np.any(fast != want)
    np.testing.assert_allclose(fast, want, rtol=2e-7)


# -- the issue's small CNN: a convolution, a batch norm, a ReLU ------------------------------
def hand_written_batch_norm(M, h, gamma, beta):
    """``(h - mean) / sqrt(var + eps) * gamma + beta`` over every axis but 1, in NumPy
    code (the issue's formulation), then ReLU."""
    axes = (0, 2, 3)
    mean = M.mean(h, axis=axes, keepdims=True)
    centred = h - mean
    var = M.mean(M.square(centred), axis=axes, keepdims=True)
    y = centred / M.sqrt(var + c(h, 1e-5)) * gamma + beta
    return M.maximum(y, c(h, 0.0))


def cnn_data(seed=0):
    """Integer-valued images and weights (the convolution is exact whatever BLAS
    does), real-valued batch-norm parameters."""
    rng = np.random.default_rng(seed)
    X = rng.integers(-3, 4, (4, 3, 28, 28)).astype(np.float32)
    W = rng.integers(-2, 3, (16, 3, 3, 3)).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, (1, 16, 1, 1)).astype(np.float32)
    beta = rng.uniform(-0.5, 0.5, (1, 16, 1, 1)).astype(np.float32)
    return X, W, gamma, beta


def test_small_cnn_batch_norm_is_numpys_bit_for_bit():
    X, W, gamma, beta = cnn_data()
    x, w = N.var("x", X.shape), N.var("w", W.shape)
    g_, b_ = N.var("gamma", gamma.shape), N.var("beta", beta.shape)
    y = hand_written_batch_norm(N, conv(N, x, w), g_, b_)
    assert y.size == 50_176
    names, feeds = ["x", "w", "gamma", "beta"], [X, W, gamma, beta]
    want = numpy_value(hand_written_batch_norm, np, conv(np, X, W), gamma, beta)
    default = graphc.compile([x, w, g_, b_], [y], check=True)
    plain = graphc.compile([x, w, g_, b_], [y], optimise=False)
    for label, graph in (("default", default), ("unoptimised", plain)):
        assert_same_bits(runs(graph, names, feeds)[0], want, label)
    assert "fused" in default.stats()["ops"] and "im2col" in default.stats()["ops"]
    # what the reciprocal did (the issue saw 26 of 50,176 differ, up to 1.9e-6): now
    # only with fast_math
    fast = runs(graphc.compile([x, w, g_, b_], [y], fast_math=True), names, feeds)[0]
    np.testing.assert_allclose(fast, want, rtol=1e-5, atol=1e-5)


def test_small_cnn_with_the_library_batch_norm_matches_eager_bit_for_bit():
    X, W, gamma, beta = cnn_data(1)
    x, w = N.var("x", X.shape), N.var("w", W.shape)
    g_, b_ = N.var("gamma", (16,)), N.var("beta", (16,))
    y, mean, var = N.batch_norm_train(N.conv2d(x, w, padding=1), g_, b_)
    outputs = [N.relu(y), mean, var]
    feeds = [X, W, gamma.reshape(16), beta.reshape(16)]
    names = ["x", "w", "gamma", "beta"]
    want = E.batch_norm_train(E.conv2d(X, W, padding=1), feeds[2], feeds[3])
    want = [E.relu(want[0]), want[1], want[2]]
    for optimise in (True, False):
        got = runs(graphc.compile([x, w, g_, b_], outputs, optimise=optimise, check=True),
                   names, feeds)
        for a, b in zip(got, want):
            assert_same_bits(a, b, f"optimise={optimise}")


def test_a_stride_one_input_gradient_is_a_forward_convolution_only_with_fast_math():
    """As a forward convolution of ``g`` (flipped kernel) the input gradient sums the
    taps in another order than the direct kernel: by default it is im2col's inverse,
    col2im, after the same GEMM as the direct kernel, which gives its bits."""
    rng = np.random.default_rng(3)
    G = rng.standard_normal((2, 4, 6, 6)).astype(np.float32)
    W = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    g_, w_ = N.var("g", G.shape), N.var("w", W.shape)
    y = conv_input_gradient(N, g_, w_)
    default = graphc.compile([g_, w_], [y], check=True)
    fast = graphc.compile([g_, w_], [y], fast_math=True, check=True)
    assert "col2im" in default.stats()["ops"] and "col2im" not in fast.stats()["ops"]
    want = E.conv2d_backward_input(G, W, (2, 3, 6, 6), padding=1)   # the direct kernel
    assert_same_bits(runs(default, ["g", "w"], [G, W])[0], want)
    np.testing.assert_allclose(runs(fast, ["g", "w"], [G, W])[0], want, rtol=1e-5, atol=1e-5)


def test_a_resnet_training_step_repeats_the_unoptimised_step_bit_for_bit():
    """Convolutions (lowered, their gradients too), batch norms, ReLUs, pooling, a dense
    layer and SGD with momentum: one step optimised and one unoptimised leave every
    parameter with the same bits. Both make the same GEMM calls on the same values
    (the transposes folded into matmul would not: left out), so BLAS's summation
    order, whatever it is, is the same in both."""
    from graphc.neural import SGD
    from graphc.neural.resnet import ResNet
    from graphc.neural.training import compile_training

    model = ResNet((1, 1), classes=10, image_size=16, width=8)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3, 16, 16)).astype(np.float32)
    labels = rng.integers(0, 10, 4)
    steps = []
    for optimise in (NO_BLAS_ORDER, False):
        trainer = compile_training(model, SGD(0.01, momentum=0.9), x.shape, optimise=optimise)
        losses = [trainer.step(x, labels) for _ in range(2)]
        steps.append((losses, trainer.params()))
    (fast_losses, fast), (slow_losses, slow) = steps
    assert fast_losses == slow_losses
    for name in slow:
        assert_same_bits(fast[name], slow[name], name)


# -- random elementwise programs with special values ---------------------------------------
UNARY = ["negative", "absolute", "square", "sqrt", "exp", "tanh", "sin", "reciprocal",
         "floor", "log1p"]
BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "power"]
CONSTANTS = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e-4, 3.0, np.inf, np.nan]
PATTERNS = ["unary", "binary", "constant", "python", "power", "adagrad", "fma", "divide_root"]


@st.composite
def elementwise_programs(draw):
    """Instructions over numbered values (the inputs first): ops, constants of the
    identities, Python scalars and exponents, and the AdaGrad and FMA patterns."""
    dtype = draw(st.sampled_from(FLOATS))
    size = draw(st.integers(1, 40))
    shapes = [(size,)] + [draw(st.sampled_from([(size,), (1,), ()]))
                          for _ in range(draw(st.integers(0, 2)))]
    instrs = []
    count = len(shapes)
    for _ in range(draw(st.integers(1, 10))):
        pick = st.integers(0, count - 1)
        pattern = draw(st.sampled_from(PATTERNS))
        if pattern == "unary":
            instrs.append(("unary", draw(st.sampled_from(UNARY)), draw(pick)))
        elif pattern in ("binary", "fma"):
            instrs.append((pattern, draw(st.sampled_from(BINARY)), draw(pick), draw(pick),
                           draw(pick)))
        elif pattern in ("constant", "python"):
            instrs.append((pattern, draw(st.sampled_from(BINARY[:5])), draw(pick),
                           draw(st.sampled_from(CONSTANTS)), draw(st.booleans())))
        elif pattern == "power":
            instrs.append(("power", draw(pick), draw(st.sampled_from(EXPONENTS[:11]))))
        else:
            instrs.append((pattern, draw(pick), draw(pick), draw(st.sampled_from(CONSTANTS))))
        count += 1
    outputs = draw(st.lists(st.integers(len(shapes), count - 1), min_size=1, max_size=3,
                            unique=True))
    return {"dtype": dtype, "shapes": shapes, "instrs": instrs, "outputs": outputs}


def interpret(M, program, inputs):
    vals = list(inputs)
    for ins in program["instrs"]:
        tag = ins[0]
        if tag == "unary":
            vals.append(getattr(M, ins[1])(vals[ins[2]]))
        elif tag == "binary":
            vals.append(getattr(M, ins[1])(vals[ins[2]], vals[ins[3]]))
        elif tag == "fma":
            vals.append(vals[ins[2]] * vals[ins[3]] + vals[ins[4]])
        elif tag in ("constant", "python"):
            x = vals[ins[2]]
            k = c(x, ins[3]) if tag == "constant" else float(ins[3])
            f = getattr(M, ins[1])
            vals.append(f(k, x) if ins[4] else f(x, k))
        elif tag == "power":
            vals.append(vals[ins[1]] ** ins[2])
        elif tag == "adagrad":
            v = vals[ins[1]]
            vals.append(vals[ins[2]] * (c(v, 0.01) / M.sqrt(v + c(v, ins[3]))))
        elif tag == "divide_root":
            v = vals[ins[1]]
            vals.append(vals[ins[2]] / M.sqrt(v + c(v, ins[3])))
        if M is np:
            vals[-1] = np.asarray(vals[-1])
    return [vals[o] for o in program["outputs"]]


@given(elementwise_programs(), st.data())
def test_random_elementwise_programs_are_numpys_bit_for_bit(program, data):
    note(repr(program))
    dtype = program["dtype"]
    variables = [N.var(f"a{i}", s, dtype) for i, s in enumerate(program["shapes"])]
    outputs = interpret(N, program, variables)
    arrays = [data.draw(special_arrays(dtype, s), label=f"a{i}")
              for i, s in enumerate(program["shapes"])]
    with np.errstate(all="ignore"):
        want = interpret(np, program, arrays)
    names = [v.name for v in variables]
    for options in (dict(), dict(optimise=False)):
        graph = graphc.compile(variables, outputs, check=True, **options)
        for k, (got, w) in enumerate(zip(runs(graph, names, arrays), want)):
            assert_same_bits(got, w, f"output {k} with {options or 'the default passes'}")


#: every default pass but the transposes folded into matmul: a GEMM told to read an
#: operand transposed may sum in another order than one given the transposed copy
#: (their own case above uses integer data)
NO_BLAS_ORDER = [p for p in DEFAULT if p != "matmul_transpose"]


@given(programs(max_ops=16), st.data())
def test_random_programs_with_special_values_keep_every_bit(program, data):
    """The random programs of test_plan_random (reductions, reshapes, slices, matmuls,
    where, updates...) on special values: optimised runs repeat unoptimised ones."""
    note(repr(program["instrs"]))
    inputs, outputs, updates = build_graph(program)
    names = [v.name for v in inputs]
    arrays = [data.draw(special_arrays(v.dtype, v.shape), label=v.name) for v in inputs]
    with np.errstate(all="ignore"):
        fast = graphc.compile(inputs, outputs, updates, optimise=NO_BLAS_ORDER, check=True)
        slow = graphc.compile(inputs, outputs, updates, optimise=False)
    for k, (got, want) in enumerate(zip(runs(fast, names, arrays), runs(slow, names, arrays))):
        assert_same_bits(got, want, f"output {k}")
    for name in names:
        assert_same_bits(fast.value(name), slow.value(name), f"variable {name}")

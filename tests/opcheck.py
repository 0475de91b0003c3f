"""Shared helpers of the operator property tests.

``check_op(fn, ref, *arrays)`` runs ``fn`` three ways and compares each with
``ref(*arrays)`` (NumPy or SciPy):

- graph mode: one ``N.var`` per array, ``fn(N, *vars)``, compiled with each memory
  plan (``check=True``), run twice with the same feeds;
- eager mode: ``fn(E, *arrays)`` on the NumPy arrays themselves.

``fn`` receives the namespace first (``graphc.ndarray`` or ``graphc.eager``), so one
function written against NumPy names covers both modes. It may return one value or
a list (``split``). Dtype and shape must match exactly; values must be equal
(NaN equal to NaN) unless ``rtol``/``atol`` are given, for ops whose arithmetic
differs from the reference (``var``, ``logsumexp``, ``einsum``...). Graph and eager
results are always compared exactly: they run the same kernels.

Where the reference raises, graphc must raise while building, in both modes:
``DTypeError`` for NumPy's ``TypeError`` (an unsupported dtype), ``ShapeError`` for
its ``ValueError`` (shapes, axes; ``AxisError`` included), ``IndexOutOfRange`` for
its ``IndexError``.
"""
from __future__ import annotations

import contextlib
import os
import warnings

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
from hypothesis import settings
from numpy.testing import assert_allclose, assert_array_equal

import graphc
import graphc.eager as E
import graphc.ndarray as N

PLANS = ("blocks", "offsets")
FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
INT_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
BOOL_DTYPE = np.dtype(np.bool_)
NUMERIC_DTYPES = FLOAT_DTYPES + INT_DTYPES
ALL_DTYPES = NUMERIC_DTYPES + (BOOL_DTYPE,)


def examples(n_ci):
    """``settings(max_examples=...)`` for a test that runs ``n_ci`` examples under the 'ci'
    profile (60 by default), scaled with the loaded profile ('thorough': 500)."""
    return settings(max_examples=max(1, round(n_ci * settings.default.max_examples / 60)))


# -- strategies ------------------------------------------------------------------
def shapes(min_dims=0, max_dims=4, min_side=0, max_side=4):
    """Small shapes (zero-size axes included by default)."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                            max_side=max_side)


def elements(dtype, *, specials=True, low=None, high=None):
    """Element values for ``dtype``: small floats (with 0, -0, inf, -inf, NaN when
    ``specials``), small integers, booleans."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return st.booleans()
    if dtype.kind in "iu":
        return st.integers(-20 if low is None else int(low), 20 if high is None else int(high))
    base = st.floats(-8.0 if low is None else low, 8.0 if high is None else high,
                     width=8 * dtype.itemsize)
    if not specials:
        return base
    return st.one_of(base, st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan]))


def arrays(dtype, shape, **kwargs):
    """An array of ``dtype`` and ``shape`` (a tuple or a strategy of tuples)."""
    return hnp.arrays(np.dtype(dtype), shape, elements=elements(dtype, **kwargs))


def dtypes(*choices):
    return st.sampled_from(choices or ALL_DTYPES)


@st.composite
def axis_args(draw, ndim, allow_none=True, allow_tuple=True):
    """``axis`` in every form NumPy accepts: None, an int (negative too) or a tuple
    of distinct axes (negative too, any order)."""
    forms = ["int"] if ndim else []
    if allow_none:
        forms.append("none")
    if allow_tuple:
        forms.append("tuple")
    form = draw(st.sampled_from(forms))
    if form == "none":
        return None
    if form == "int":
        return draw(st.integers(-ndim, ndim - 1))
    axes = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim)) if ndim else []
    return tuple(a - ndim if draw(st.booleans()) else a for a in axes)


# -- running -----------------------------------------------------------------------
@contextlib.contextmanager
def quiet():
    """NumPy's floating-point warnings off (both sides compute the same specials)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def as_list(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


def make_vars(arrays):
    return [N.var(f"x{i}", a.shape, a.dtype) for i, a in enumerate(arrays)]


def feeds(arrays):
    return {f"x{i}": a for i, a in enumerate(arrays)}


def run_graph(fn, arrays, plan, seed=None, runs=2):
    """Build ``fn(N, *vars)``, compile it with ``plan`` (plan checked) and run it
    ``runs`` times; returns the list of results of each run."""
    xs = make_vars(arrays)
    nodes = as_list(fn(N, *xs))
    for node in nodes:
        assert isinstance(node, N.Tensor), f"graph mode returned {type(node).__name__}"
    g = graphc.compile(inputs=xs, outputs=nodes, plan=plan, check=True, seed=seed)
    results = []
    with quiet():
        for _ in range(runs):
            results.append(g.run(**feeds(arrays)))
    for node, value in zip(nodes, results[0]):
        assert (node.shape, node.dtype) == (value.shape, value.dtype), \
            f"node declares {node.shape} {node.dtype}, run gave {value.shape} {value.dtype}"
    return results


def run_eager(fn, arrays):
    with quiet():
        return [np.asarray(v) for v in as_list(fn(E, *arrays))]


#: every graph runs on the GPU engine (``GRAPHC_DEVICE=cuda``): its libm (or, on the
#: CPU stand-in, glibc's) differs from NumPy's SIMD maths by an ulp or few, and CuPy
#: flushes float32 subnormals, so float results are compared within these
#: tolerances (per dtype: rtol, atol) where a test asks for exact equality
ON_DEVICE = os.environ.get("GRAPHC_DEVICE") == "cuda"
DEVICE_TOLERANCE = {"f4": (4e-6, float(np.finfo(np.float32).tiny)), "f8": (1e-14, 0.0),
                    "c8": (4e-6, float(np.finfo(np.float32).tiny)), "c16": (1e-14, 0.0)}


def assert_same(actual, expected, rtol=None, atol=None, what=""):
    """Exact dtype and shape; values equal (NaN == NaN) or close within rtol/atol
    (with ``GRAPHC_DEVICE=cuda``, at least :data:`DEVICE_TOLERANCE`)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    device = DEVICE_TOLERANCE.get(expected.dtype.str[1:]) if ON_DEVICE else None
    if device is not None:
        # relative to the result's scale too: a gradient summing terms of either sign
        # may cancel to far below them, where an ulp of a term is many of the result's
        finite = np.abs(expected[np.isfinite(expected)]) if expected.size else expected
        scale = float(finite.max()) if finite.size else 0.0
        rtol = max(rtol or 0, device[0])
        atol = max(atol or 0, device[1], 8 * device[0] * scale)
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if (rtol is None and atol is None) or expected.dtype.kind not in "fc":
        assert_array_equal(actual, expected, strict=True, err_msg=what)
    else:
        assert_allclose(actual, expected, rtol=rtol or 0, atol=atol or 0, equal_nan=True,
                        err_msg=what)


def assert_all_same(actuals, expecteds, rtol=None, atol=None, what=""):
    assert len(actuals) == len(expecteds), f"{what}: {len(actuals)} results, expected " \
                                           f"{len(expecteds)}"
    for i, (a, e) in enumerate(zip(actuals, expecteds)):
        assert_same(a, e, rtol, atol, f"{what} result {i}")


#: what graphc raises, while building, where the reference raises (checked in order)
ERROR_MAP = ((TypeError, graphc.DTypeError), (ValueError, graphc.ShapeError),
             (IndexError, graphc.IndexOutOfRange))


def expected_error(exc):
    """The graphc error class matching the reference's exception ``exc``."""
    for numpy_error, graphc_error in ERROR_MAP:
        if isinstance(exc, numpy_error):
            return graphc_error
    raise exc


def expect_error(fn, arrays, error, reference_error=None, eager=True):
    """graphc must refuse ``fn`` with ``error`` while building, in both modes."""
    xs = make_vars(arrays)
    modes = [("graph", lambda: fn(N, *xs))] + ([("eager", lambda: fn(E, *arrays))] if eager
                                               else [])
    for mode, call in modes:
        try:
            with quiet():
                call()
        except error:
            continue
        except Exception as exc:
            raise AssertionError(f"{mode} mode raised {type(exc).__name__}: {exc}; expected "
                                 f"{error.__name__} (the reference raised "
                                 f"{reference_error!r})") from exc
        raise AssertionError(f"{mode} mode accepted arguments of dtypes "
                             f"{[str(a.dtype) for a in arrays]} and shapes "
                             f"{[a.shape for a in arrays]} that the reference refuses "
                             f"({reference_error!r}); expected {error.__name__}")


def check_op(fn, ref, *arrays, rtol=None, atol=None, eager=True):
    """Compare ``fn`` in graph mode (both plans) and eager mode with ``ref``.

    ``eager=False`` for functions that only make sense on lazy values (operators and
    NumPy ufuncs applied to tensors: on NumPy arrays they would just be NumPy).

    Returns the reference results (a list), or ``None`` when the reference raised
    and graphc raised the matching error as it should.
    """
    arrays = [np.asarray(a) for a in arrays]
    try:
        with quiet():
            expected = [np.asarray(v) for v in as_list(ref(*arrays))]
    except (TypeError, ValueError, IndexError) as exc:
        expect_error(fn, arrays, expected_error(exc), exc, eager)
        return None
    graph_results = None
    for plan in PLANS:
        first, second = run_graph(fn, arrays, plan)
        assert_all_same(second, first, what=f"graph ({plan}) second run vs first run")
        assert_all_same(first, expected, rtol, atol, what=f"graph ({plan}) vs reference")
        if graph_results is not None:
            assert_all_same(first, graph_results, what=f"graph ({plan}) vs graph (blocks)")
        graph_results = first
    if eager:
        eager_results = run_eager(fn, arrays)
        assert_all_same(eager_results, expected, rtol, atol, what="eager vs reference")
        # exact where the op is exact; where its test allows a tolerance (BLAS
        # contractions), the optimiser may pick another BLAS path than eager does
        # (a transpose folded into matmul), so the same tolerance applies
        assert_all_same(eager_results, graph_results, rtol, atol, what="eager vs graph")
    return expected


def check_values(fn, expected, *arrays, rtol=None, atol=None):
    """Like :func:`check_op` for a reference already computed (``expected``)."""
    return check_op(fn, lambda *_: expected, *arrays, rtol=rtol, atol=atol)

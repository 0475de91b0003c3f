"""Elementwise test cases shared by the tests of both kernel generators (CUDA C in
test_cuda_codegen.py, Numba in test_generated_kernels.py): every kind on special
values (signed zeros, infinities, NaN, integer extremes) in every dtype NumPy
defines it for, the reference values (graphc's NumPy kernels) and the comparison
(exact, signed zeros included, except for the C library's maths).
"""
from __future__ import annotations

import itertools
import warnings
from types import SimpleNamespace

import numpy as np

from c_kernels import GPU

from graphc.eager import evaluate
from graphc.shape.dtypes import probe_dtype
from graphc.shape.rules import infer
from graphc.type import Op
from graphc.type.kinds import KINDS

ELEMENTWISE = frozenset({"unary", "binary", "ternary", "fused"})
DTYPES = ["float32", "float64", "int32", "int64", "bool"]
#: kinds whose generated (C library) and NumPy (SIMD) results may differ by a few ulps
INEXACT = frozenset({"exp", "log", "log2", "log1p", "expm1", "sin", "cos", "tan", "arcsin",
                     "arccos", "arctan", "sinh", "cosh", "arcsinh", "arccosh", "arctanh",
                     "log10", "exp2",
                     "tanh", "erf",
                     "sigmoid", "power", "arctan2", "hypot"})


def reference(op, inputs):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return evaluate(op, [np.asarray(a) for a in inputs])


def kinds_of(op):
    return {inner.kind for inner, _ in op["program"]} if op.kind == "fused" else {op.kind}


def flushed(got, want):
    """``want`` as a GPU gives it (``GRAPHC_TEST_GPU=1``): CuPy compiles every kernel
    with ``-ftz=true``, so a float32 subnormal result is a signed zero there, or the
    smallest normal of its sign where the result steps away from zero (nextafter,
    spacing). Elsewhere ``want`` itself."""
    if not GPU or want.dtype != np.float32:
        return want
    tiny = np.float32(np.finfo(np.float32).tiny)
    subnormal = (np.abs(want) < tiny) & (want != 0)
    stepped = subnormal & (np.abs(got) == tiny) & (np.signbit(got) == np.signbit(want))
    return np.where(stepped, got, np.where(subnormal, np.copysign(np.float32(0), want), want)
                    ).astype(np.float32)


def assert_same(got, want, exact, what=""):
    assert got.dtype == want.dtype and got.shape == want.shape, what
    want = flushed(got, want)
    if exact:
        np.testing.assert_array_equal(got, want, err_msg=what)
        if got.dtype.kind == "f":  # signed zeros too; a NaN's sign is unspecified (IEEE
            # 754: which NaN of x + y survives depends on the operand order, which NumPy's
            # loops for different CPU features do not share)
            real = ~np.isnan(want)
            np.testing.assert_array_equal(np.signbit(got[real]), np.signbit(want[real]),
                                          err_msg=what)
    else:
        rtol = 2e-6 if got.dtype == np.float32 else 1e-6
        np.testing.assert_allclose(got, want, rtol=rtol, atol=0, equal_nan=True, err_msg=what)


# -- every kind on special values --------------------------------------------------------
def _ints(dtype):
    info = np.iinfo(dtype)
    root = int(np.sqrt(info.max)) + 1  # squares overflow
    return [info.min, -root, -7, -3, -2, -1, 0, 1, 2, 3, 5, 7, root, info.max]


VALUES = {"float32": [-np.inf, -1e30, -7.0, -3.5, -2.5, -1.0, -0.5, -1e-30, -0.0, 0.0, 1e-40,
                      0.1, 0.5, 1.0, 1.5, 2.5, 3.0, 7.0, 1e30, np.inf, np.nan],
          "int32": _ints(np.int32), "int64": _ints(np.int64), "bool": [False, True]}
VALUES["float64"] = VALUES["float32"][:10] + [1e-310] + VALUES["float32"][11:]
if GPU:   # CuPy's kernels flush float32 subnormals (-ftz=true): no subnormal inputs there
    VALUES["float32"] = [v for v in VALUES["float32"] if v != 1e-40]
PAIRS = [(d, d) for d in DTYPES] + [("float32", "float64"), ("int32", "float32"),
                                    ("float32", "bool"), ("int64", "float64"),
                                    ("int32", "int64"), ("bool", "int32")]


def values(dtype, n=None, seed=0):
    v = np.array(VALUES[dtype], dtype=dtype)
    return v if n is None else np.random.default_rng(seed).choice(v, n)


def _clip(lo, hi, dtype):
    return Op.make("clip", lo=lo, hi=hi, dtype=probe_dtype("clip", (np.dtype(dtype),), (lo, hi)))


def kind_cases(kind):
    """(op, input arrays) for ``kind``: every dtype NumPy defines it for."""
    family = KINDS[kind].family
    if kind == "astype":
        cases = []
        for s, t in itertools.product(DTYPES, DTYPES):
            x = values(s)
            if s.startswith("float") and t.startswith("int"):  # NaN/out of range: undefined
                x = x[np.isfinite(x) & (np.abs(x) < 2.0**31)]
            cases.append((Op.make("astype", dtype=np.dtype(t)), [x]))
        return cases
    if kind == "clip":
        bounds = {"float32": [(0.0, 1.0), (None, 0.5), (-1.5, None), (0.1, 0.2), (2.0, 1.0),
                              (np.nan, 1.0), (-0.0, 0.0)],
                  "float64": [(-np.inf, 0.3), (0.1, None)], "bool": [(False, True)],
                  "int32": [(-3, 5), (None, 2), (0.5, 2.5)], "int64": [(-(2**40), 7)]}
        return [(_clip(lo, hi, d), [values(d)]) for d, bs in bounds.items() for lo, hi in bs]
    if kind == "fused_adagrad":
        return [(Op.make("fused_adagrad", lr=lr, eps=eps), [values(d)])
                for lr, eps, d in [(0.01, 1e-8, "float32"), (0.1, 0.1, "float64"),
                                   (1.0, 0.0, "float32"), (1 / 3, 1e-7, "float64")]]
    if kind == "where":
        triples = [("bool", d, d) for d in DTYPES] + [("bool", "float32", "int32"),
                                                      ("bool", "int64", "bool")]
        return [(Op.make("where"), [values(d, 256, seed) for seed, d in enumerate(t)])
                for t in triples]
    if kind == "fma":
        triples = [(d, d, d) for d in DTYPES[:4]] + [("float32", "float32", "bool"),
                                                     ("float64", "float64", "float32")]
        return [(Op.make("fma"), [values(d, 512, seed) for seed, d in enumerate(t)])
                for t in triples]
    if family == "unary":
        return [(Op.make(kind), [values(d)]) for d in DTYPES]
    assert family == "binary", kind
    cases = []
    for a, b in PAIRS:
        x, y = np.meshgrid(values(a), values(b), indexing="ij")
        cases.append((Op.make(kind), [x.ravel(), y.ravel()]))
    return cases


def infer_out(op, dtypes):
    """The result dtype graphc infers for ``op`` on inputs of ``dtypes``."""
    return infer(op, [SimpleNamespace(shape=(), dtype=np.dtype(d)) for d in dtypes])[1]

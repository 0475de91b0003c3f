"""Which library computes the thread team's GEMM blocks (graphc.engine.gemm_libraries):
oneDNN's ``dnnl_sgemm`` for float32 where it is installed, NumPy's OpenBLAS otherwise
and for float64, ``GRAPHC_GEMM`` choosing, each compared with NumPy's matmul.

Products of small integers are exact in float32 whatever the order of the sums, so
these compare bit for bit without depending on either library's summation order."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from graphc.engine import gemm_libraries, numba_gemm

pytestmark = pytest.mark.skipif(
    numba_gemm.unavailable() is not None,
    reason=f"no team GEMM here: {numba_gemm.unavailable()}")
ONEDNN = not gemm_libraries.onednn_library().startswith("no ")


def _integers(shape, seed, dtype=np.float32):
    return np.random.default_rng(seed).integers(-3, 4, shape).astype(dtype)


def test_bad_choice_names_the_variable_and_the_choices(monkeypatch):
    monkeypatch.setenv("GRAPHC_GEMM", "mkl")
    with pytest.raises(ValueError, match=r"GRAPHC_GEMM='mkl'.*openblas, onednn"):
        gemm_libraries.chosen()


@pytest.mark.parametrize("value, want", [("openblas", "openblas"), ("OpenBLAS ", "openblas"),
                                         ("onednn", "onednn" if ONEDNN else "openblas"),
                                         ("", "onednn" if ONEDNN else "openblas"),
                                         ("shallow", "onednn" if ONEDNN else "openblas")])
def test_choice(monkeypatch, value, want):
    monkeypatch.setenv("GRAPHC_GEMM", value)
    assert gemm_libraries.chosen() == want


@pytest.mark.parametrize("library", ["openblas", "onednn"])
def test_block_source_calls_the_chosen_library_on_one_thread(monkeypatch, library):
    if library == "onednn" and not ONEDNN:
        pytest.skip(gemm_libraries.onednn_library())
    monkeypatch.setenv("GRAPHC_GEMM", library)
    single = "\n".join(gemm_libraries.block_call("float32"))
    double = "\n".join(gemm_libraries.block_call("float64"))
    # float64 always on OpenBLAS; every block holds OpenBLAS's pool to one thread
    assert "gemm_float64(" in double and "local(1)" in double and "local(before)" in double
    assert "local(1)" in single and "local(before)" in single
    if library == "onednn":
        assert "onednn_sgemm(" in single and "omp_set(1)" in single
        assert "omp_set(threads)" in single
    else:
        assert "gemm_float32(" in single and "onednn" not in single
    assert "shallow_block" not in single + double      # the library for every block


@pytest.mark.parametrize("value", ["", "shallow"])
def test_shallow_float32_blocks_skip_the_library(monkeypatch, value):
    from graphc.engine.numba_shallow_gemm import SHALLOW_DEPTH, SYMBOL
    monkeypatch.setenv("GRAPHC_GEMM", value)
    single = "\n".join(gemm_libraries.block_call("float32"))
    double = "\n".join(gemm_libraries.block_call("float64"))
    assert f"k <= {SHALLOW_DEPTH}:" in single and "shallow_block(tasks[t, 0]," in single
    assert "shallow_block" not in double
    source = numba_gemm._module_source("libx.so", {"float32": "s", "float64": "d"}, "int64")
    assert f"ExternalFunction({SYMBOL!r}" in source and "register()" in source


@pytest.mark.skipif(not ONEDNN, reason=gemm_libraries.onednn_library())
def test_onednn_is_the_default_where_installed(monkeypatch):
    monkeypatch.delenv("GRAPHC_GEMM", raising=False)
    assert gemm_libraries.chosen() == "onednn"
    assert "dnnl_sgemm" in numba_gemm._module_source("libx.so", {"float32": "s"}, "int64")


_PRODUCTS = """
import numpy as np
from graphc.engine import gemm_libraries, numba_gemm
rng = np.random.default_rng(0)
cases = [((197, 64), (64, 96), False, False), ((50, 40), (30, 40), False, True),
         ((3, 40, 50), (3, 40, 70), True, False), ((600, 24), (24, 144), False, False)]
for a_shape, b_shape, ta, tb in cases:
    for dtype in (np.float32, np.float64):
        a = rng.integers(-3, 4, a_shape).astype(dtype)
        b = rng.integers(-3, 4, b_shape).astype(dtype)
        a = a.swapaxes(-1, -2) if ta else a
        b = b.swapaxes(-1, -2) if tb else b
        out = np.full(np.matmul(a, b).shape, np.nan, dtype)
        kernel = numba_gemm.gemm_kernel(a, b, out, threaded=True)
        assert kernel is not None, (a_shape, b_shape)
        kernel()
        assert np.array_equal(out, np.matmul(a, b)), (a_shape, b_shape, dtype)
print(gemm_libraries.chosen(), gemm_libraries.shallow_wanted())
"""


@pytest.mark.parametrize("library", ["openblas", "onednn", "shallow"])
def test_products_equal_numpy_with_each_library(library):
    """In a fresh process, since the generated module is made once per process."""
    if library == "onednn" and not ONEDNN:
        pytest.skip(gemm_libraries.onednn_library())
    env = dict(os.environ, GRAPHC_GEMM=library)
    done = subprocess.run([sys.executable, "-c", _PRODUCTS], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    chosen, shallow = done.stdout.split()[-2:]
    assert shallow == str(library == "shallow")
    assert chosen == ("onednn" if ONEDNN else "openblas") if library == "shallow" else library


def test_epilogue_product_equals_numpy():
    """The GEMM-with-epilogue module calls the same block source."""
    from graphc.type import Op
    relu = Op.make("fused", program=((Op.make("add"), (("in", 0), ("in", 1))),
                                     (Op.make("relu"), (("acc",),))),
                   shape=(300, 48), dtype=np.dtype("float32"))
    a, b, bias = _integers((300, 20), 1), _integers((20, 48), 2), _integers((48,), 3)
    out = np.full((300, 48), np.nan, np.float32)
    kernel = numba_gemm.epilogue_kernel(a, b, out, relu, 0, ("col",), [bias], True)
    assert kernel is not None
    kernel()
    np.testing.assert_array_equal(out, np.maximum(a @ b + bias, 0))

"""The generated copy of strided views (``engine/numba_strided_copy.py``): NumPy's bits
for every permutation and slicing it takes, NumPy's ``copyto`` for what it declines, and
a graph's reshape of a permuted image (MobileViT's patches) on it."""
from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from opcheck import examples

import graphc
import graphc.ndarray as N
from graphc.engine.numba_kernels import available
from graphc.engine.numba_strided_copy import NUMPY_RUN, merged_dims, strided_copy

needs_numba = pytest.mark.skipif(available() is not None, reason="Numba is not installed")


@st.composite
def views(draw):
    """A permuted, possibly sliced view of 2 to 5 dimensions."""
    rank = draw(st.integers(2, 5))
    shape = tuple(draw(st.integers(1, 9)) for _ in range(rank))
    steps = tuple(draw(st.sampled_from([1, 1, 2])) for _ in range(rank))
    axes = tuple(draw(st.permutations(range(rank))))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    base = np.random.default_rng(sum(shape)).standard_normal(
        tuple(n * k for n, k in zip(shape, steps))).astype(dtype)
    base[tuple(slice(0, 1) for _ in shape)] = np.nan      # bits, NaN included
    return base[tuple(slice(None, None, k) for k in steps)].transpose(axes)


@needs_numba
@examples(60)
@given(views())
def test_the_copy_gives_numpys_bits_or_declines(view):
    out = np.full(view.shape, -1, view.dtype)
    run = strided_copy(view, out, parallel=True)
    dims = merged_dims(view.shape, [s // view.itemsize for s in view.strides])
    runs = [size for size, stride in dims if stride == 1]
    assert (run is None) == (len(dims) > 4 or bool(runs and runs[0] >= NUMPY_RUN))
    if run is None:
        return
    kept = view.copy()
    run()
    assert out.tobytes() == np.ascontiguousarray(view).tobytes()
    assert view.tobytes() == kept.tobytes()       # the source is only read


def test_dimensions_merge_where_their_strides_allow():
    assert merged_dims((1, 64, 32, 32), (65536, 1, 2048, 64)) == [(64, 1), (1024, 64)]
    assert merged_dims((1024, 16, 2, 2), (64, 2, 32, 1)) == [
        (1024, 64), (16, 2), (2, 32), (2, 1)]


@needs_numba
def test_what_the_copy_declines():
    x = np.zeros((8, 8, 4), np.float32)
    out = np.empty((4, 8, 8), np.float32)
    view = x.transpose(2, 0, 1)
    assert strided_copy(view, out, parallel=False) is None      # one thread: NumPy's
    assert strided_copy(view, out.astype(np.float64), parallel=True) is None
    assert strided_copy(x[::-1].transpose(2, 0, 1), out, parallel=True) is None
    assert strided_copy(np.zeros((4, 64, 2), np.float32).transpose(1, 0, 2)[:, :, :1],
                        np.empty((64, 4, 1), np.float32), parallel=True) is not None
    wide = np.zeros((4, 4, 32), np.float32).transpose(1, 0, 2)   # runs of 32: NumPy's
    assert strided_copy(wide, np.empty(wide.shape, np.float32), parallel=True) is None
    ints = np.zeros((8, 8, 4), np.int32).transpose(2, 0, 1)
    assert strided_copy(ints, np.empty(ints.shape, np.int32), parallel=True) is None


@needs_numba
def test_a_reshape_of_a_permuted_image_runs_on_it():
    """MobileViT's unfolding of a 2x2-patched image: the generated graph's copy is the
    strided one, and gives the NumPy engine's result bit for bit."""
    x = N.var("x", (1, 64, 32, 32))
    patches = N.reshape(N.transpose(N.reshape(x * 2.0, (1024, 2, 16, 2)), (0, 2, 1, 3)),
                        (1, 64, 256, 4))
    y = N.reshape(N.transpose(patches, (0, 3, 2, 1)), (4, 256, 64)) + 1.0
    fast = graphc.compile([x], [y], kernels="generated")
    plain = graphc.compile([x], [y], kernels="numpy", optimise=False)
    image = np.random.default_rng(3).standard_normal((1, 64, 32, 32)).astype(np.float32)
    assert fast.run(x=image)[0].tobytes() == plain.run(x=image)[0].tobytes()
    from graphc.engine import numba_strided_copy
    kernels = [k for k in fast.program.kernels if k is not None]
    assert any(getattr(k, "__module__", "") == numba_strided_copy.__name__ for k in kernels)

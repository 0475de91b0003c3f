"""Products match NumPy in graph mode (both memory plans) and eager mode: ``matmul``
and ``@`` (1-D operands, broadcast batch axes), ``dot`` (N-D), ``tensordot`` (int
and pair axes) and two-operand ``einsum`` (explicit and implicit output)."""
import operator
import string
import sys

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

import graphc
import graphc.ndarray as N
from opcheck import ALL_DTYPES, arrays, check_op, dtypes, examples

SIDE = st.integers(0, 4)


def _tolerance(*xs):
    """graphc's tensordot and einsum take other paths than NumPy's (matmul, an
    optimised contraction order): the sums are the same, the roundings may not be."""
    dtype = np.result_type(*xs)
    if dtype == np.float32:
        return {"rtol": 1e-5, "atol": 1e-5}
    if dtype == np.float64:
        return {"rtol": 1e-12, "atol": 1e-12}
    return {}


@st.composite
def matmul_operands(draw, batch_dims=2):
    """Operands of matmul: 1-D or N-D, with broadcastable batch axes."""
    n, k, m = draw(SIDE), draw(SIDE), draw(SIDE)
    batch = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=batch_dims,
                                                   max_side=3))
    ba, bb = batch.input_shapes
    a_shape = (k,) if draw(st.booleans()) and not ba else ba + (n, k)
    b_shape = (k,) if draw(st.booleans()) and not bb else bb + (k, m)
    a = draw(arrays(draw(dtypes()), a_shape, specials=False, low=-4, high=4))
    b = draw(arrays(draw(dtypes()), b_shape, specials=False, low=-4, high=4))
    return a, b


@examples(60)
@given(ab=matmul_operands())
def test_matmul_matches_numpy(ab):
    a, b = ab
    check_op(lambda M, x, y: M.matmul(x, y), np.matmul, a, b)
    check_op(lambda M, x, y: x @ y, operator.matmul, a, b, eager=False)


@given(ab=matmul_operands(batch_dims=1))
def test_matmul_with_ndarray_operand(ab):
    a, b = ab
    check_op(lambda M, y: a @ y, lambda y: a @ y, b, eager=False)  # ndarray @ tensor
    check_op(lambda M, x: x @ b, lambda x: x @ b, a, eager=False)
    check_op(lambda M, y: np.matmul(a, y), lambda y: np.matmul(a, y), b, eager=False)


@pytest.mark.parametrize("a_shape, b_shape", [((2, 3), (4, 5)), ((3,), (4,)), ((2, 3), (2,)),
                                              ((2, 2, 3), (3, 3, 4)), ((), (3,))])
def test_matmul_shape_errors_name_op_shapes_and_line(a_shape, b_shape):
    a, b = N.var("a", a_shape), N.var("b", b_shape)
    with pytest.raises(ValueError):
        np.matmul(np.zeros(a_shape), np.zeros(b_shape))
    with pytest.raises(graphc.ShapeError) as info:
        line = sys._getframe().f_lineno; a @ b  # noqa: E702,B018
    message = str(info.value)
    assert "matmul" in message and str(a_shape) in message and str(b_shape) in message
    assert f"test_ops_linalg.py:{line}" in message


@st.composite
def dot_operands(draw):
    k = draw(SIDE)
    a_shape = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3)) + (k,)
    if draw(st.booleans()):
        b_shape = (k,)
    else:
        b_shape = draw(hnp.array_shapes(min_dims=0, max_dims=1, min_side=0, max_side=3)) + (
            k, draw(SIDE))
    a = draw(arrays(draw(dtypes()), a_shape, specials=False, low=-4, high=4))
    b = draw(arrays(draw(dtypes()), b_shape, specials=False, low=-4, high=4))
    return a, b


@examples(60)
@given(ab=dot_operands())
def test_dot_matches_numpy(ab):
    a, b = ab
    check_op(lambda M, x, y: M.dot(x, y), np.dot, a, b)
    check_op(lambda M, x, y: x.dot(y), lambda x, y: x.dot(y), a, b, eager=False)


@given(data=st.data(), da=dtypes(), db=dtypes())
def test_dot_with_a_scalar_is_multiply(data, da, db):
    # no inf/NaN: numpy.dot(0.0, inf) is 0 (BLAS scal), numpy.multiply gives NaN
    a = data.draw(arrays(da, (), specials=False, low=-4, high=4))
    b = data.draw(arrays(db, (2, 3), specials=False, low=-4, high=4))
    check_op(lambda M, x, y: M.dot(x, y), np.dot, a, b)
    check_op(lambda M, x, y: M.dot(y, x), lambda x, y: np.dot(y, x), a, b)


def test_dot_shape_error_names_shapes_and_line():
    a, b = N.var("a", (2, 3)), N.var("b", (4, 2, 5))
    with pytest.raises(ValueError):
        np.dot(np.zeros((2, 3)), np.zeros((4, 2, 5)))
    with pytest.raises(graphc.ShapeError) as info:
        line = sys._getframe().f_lineno; N.dot(a, b)  # noqa: E702
    message = str(info.value)
    assert "dot" in message and "(2, 3)" in message and "(4, 2, 5)" in message
    assert f"test_ops_linalg.py:{line}" in message


@st.composite
def tensordot_case(draw):
    """Operands sharing ``n`` contracted axes, axes given as an int or as a pair of
    axis lists (in any order, negative too)."""
    n = draw(st.integers(0, 3))
    contracted = draw(hnp.array_shapes(min_dims=n, max_dims=n, min_side=0, max_side=3)) \
        if n else ()
    free_a = draw(hnp.array_shapes(min_dims=0, max_dims=3 - n, max_side=3)) if n < 3 else ()
    free_b = draw(hnp.array_shapes(min_dims=0, max_dims=3 - n, max_side=3)) if n < 3 else ()
    if draw(st.booleans()):  # int axes: the last n of a against the first n of b
        a_shape, b_shape, axes = free_a + contracted, contracted + free_b, n
    else:  # the contracted axes at random positions, in a random pairing order
        a_axes = draw(st.permutations(range(len(free_a) + n)))[:n]
        b_axes = draw(st.permutations(range(len(free_b) + n)))[:n]
        a_shape, b_shape = list(free_a), list(free_b)
        for pos, d in sorted(zip(a_axes, contracted)):
            a_shape.insert(pos, d)
        for pos, d in sorted(zip(b_axes, contracted)):
            b_shape.insert(pos, d)
        # the i-th contracted axis sits at a_axes[i] in a and at b_axes[i] in b
        a_pos = [p - len(a_shape) if draw(st.booleans()) else p for p in a_axes]
        b_pos = [p - len(b_shape) if draw(st.booleans()) else p for p in b_axes]
        axes = (a_pos[0], b_pos[0]) if n == 1 and draw(st.booleans()) else (a_pos, b_pos)
        a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    a = draw(arrays(draw(dtypes()), a_shape, specials=False, low=-4, high=4))
    b = draw(arrays(draw(dtypes()), b_shape, specials=False, low=-4, high=4))
    return a, b, axes


@examples(60)
@given(case=tensordot_case())
def test_tensordot_matches_numpy(case):
    a, b, axes = case
    check_op(lambda M, x, y: M.tensordot(x, y, axes=axes),
             lambda x, y: np.tensordot(x, y, axes=axes), a, b, **_tolerance(a, b))


@pytest.mark.parametrize("a_shape, b_shape, axes", [
    ((2, 3), (4, 3), 1), ((2, 3), (3, 4), ([0], [0])), ((3,), (3, 3), 2),
    ((2, 3), (3, 2), ([0, 1], [0])),
])
def test_tensordot_mismatch_is_a_shape_error(a_shape, b_shape, axes):
    with pytest.raises((ValueError, IndexError)):
        np.tensordot(np.zeros(a_shape), np.zeros(b_shape), axes=axes)
    with pytest.raises(graphc.ShapeError, match="tensordot"):
        N.tensordot(N.var("a", a_shape), N.var("b", b_shape), axes=axes)


@st.composite
def einsum_case(draw):
    """Two operands with random subscripts (shared letters contracted or kept, a letter
    repeated within an operand, a diagonal), explicit output or implicit."""
    letters = string.ascii_letters[:6] if draw(st.booleans()) else "abcdefAB"
    sizes = {c: draw(st.integers(0, 3)) for c in letters}
    a_spec = "".join(draw(st.lists(st.sampled_from(letters), max_size=3)))
    b_spec = "".join(draw(st.lists(st.sampled_from(letters), max_size=3)))
    used = sorted(set(a_spec + b_spec))
    a = draw(arrays(draw(dtypes()), tuple(sizes[c] for c in a_spec), specials=False, low=-4,
                    high=4))
    b = draw(arrays(draw(dtypes()), tuple(sizes[c] for c in b_spec), specials=False, low=-4,
                    high=4))
    if draw(st.booleans()):
        spec = f"{a_spec},{b_spec}"
    else:
        out = draw(st.permutations(used))[:draw(st.integers(0, len(used)))]
        spec = f"{a_spec},{b_spec}->{''.join(out)}"
    return spec, a, b


@examples(80)
@given(case=einsum_case())
def test_einsum_matches_numpy(case):
    spec, a, b = case
    check_op(lambda M, x, y: M.einsum(spec, x, y), lambda x, y: np.einsum(spec, x, y), a, b,
             **_tolerance(a, b))


@pytest.mark.parametrize("spec, a_shape, b_shape", [
    ("ij,jk->ik", (2, 3), (4, 5)), ("ij,jk", (2, 3), (3,)), ("ij,jk->iz", (2, 3), (3, 4)),
    ("ij,jk->ii", (2, 3), (3, 4)),
])
def test_einsum_errors_are_shape_errors(spec, a_shape, b_shape):
    with pytest.raises(ValueError):
        np.einsum(spec, np.zeros(a_shape), np.zeros(b_shape))
    with pytest.raises(graphc.ShapeError, match="einsum"):
        N.einsum(spec, N.var("a", a_shape), N.var("b", b_shape))


@given(data=st.data(), da=dtypes(*ALL_DTYPES), db=dtypes(*ALL_DTYPES))
def test_linalg_result_dtypes_follow_numpy(data, da, db):
    a = data.draw(arrays(da, (2, 3), specials=False, low=-4, high=4))
    b = data.draw(arrays(db, (3, 2), specials=False, low=-4, high=4))
    check_op(lambda M, x, y: M.matmul(x, y), np.matmul, a, b)
    check_op(lambda M, x, y: M.einsum("ij,jk->ik", x, y),
             lambda x, y: np.einsum("ij,jk->ik", x, y), a, b, **_tolerance(a, b))
    check_op(lambda M, x, y: M.tensordot(x, y, axes=1), lambda x, y: np.tensordot(x, y, 1),
             a, b, **_tolerance(a, b))


@pytest.mark.parametrize("subscripts,shapes", [
    ("ij->ji", [(3, 4)]), ("ij->", [(3, 4)]), ("ijk->ik", [(2, 3, 4)]),
    ("ij,ijk,j->ik", [(3, 4), (3, 4, 2), (4,)]),
    ("ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 2)]),
    ("i,i,i", [(4,), (4,), (4,)])])
def test_einsum_of_one_or_many_operands_matches_numpy(subscripts, shapes):
    rng = np.random.default_rng(len(subscripts))
    arrays = [rng.standard_normal(s) for s in shapes]
    check_op(lambda M, *xs: M.einsum(subscripts, *xs),
             lambda *xs: np.einsum(subscripts, *xs), *arrays, rtol=1e-12, atol=1e-12)


def test_einsum_that_does_not_fit_its_operands_names_them():
    with pytest.raises(graphc.ShapeError, match=r"einsum: 'ij,jk,kl->il' does not fit 1 "):
        N.einsum("ij,jk,kl->il", N.var("a", (2, 3)))
    with pytest.raises(graphc.ShapeError, match=r"einsum: 'ij,jk,kl->il' on shapes"):
        N.einsum("ij,jk,kl->il", N.var("a", (2, 3)), N.var("b", (3, 4)), N.var("c", (5, 2)))

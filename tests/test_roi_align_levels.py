"""``roi_align_levels`` (a feature pyramid's RoIAlign, issue 18): each box pooled from its
own level exactly as ``roi_align`` pools it from that level alone (hypothesis over
pyramids, boxes across the border, levels, modes), in graph and eager mode; gradients
against finite differences; errors while building and at run time; save/load."""
import hypothesis.strategies as st
import numpy as np
import pytest
from gradcheck import check_gradient
from hypothesis import given
from opcheck import examples, quiet

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc import DTypeError, ShapeError


@st.composite
def pyramids(draw):
    levels = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 31)))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    images, channels, side = draw(st.integers(1, 2)), draw(st.integers(1, 3)), 16
    features = [rng.standard_normal((images, channels, side >> i, side >> i)).astype(dtype)
                for i in range(levels)]
    count = draw(st.integers(0, 6))
    corner = rng.uniform(-8, 60, (count, 2))
    boxes = np.concatenate([corner, corner + rng.uniform(0, 40, (count, 2))], 1).astype(dtype)
    return dict(features=features, boxes=boxes,
                batch_index=rng.integers(0, images, count),
                levels=rng.integers(0, levels, count),
                scales=tuple(0.25 / 2 ** i for i in range(levels)),
                output_size=draw(st.sampled_from([1, 2, (2, 3)])),
                sampling_ratio=draw(st.integers(0, 2)),
                mode=draw(st.sampled_from(["avg", "max"])), aligned=draw(st.booleans()))


def _pooled(M, case, *features):
    return M.roi_align_levels(list(features), case["boxes"], case["batch_index"],
                              case["levels"], case["output_size"], case["scales"],
                              sampling_ratio=case["sampling_ratio"], mode=case["mode"],
                              aligned=case["aligned"])


@examples(40)
@given(pyramids())
def test_each_box_is_pooled_from_its_own_level(case):
    features = case["features"]
    xs = [N.var(f"p{i}", f.shape, f.dtype) for i, f in enumerate(features)]
    exe = graphc.compile(xs, _pooled(N, case, *xs))
    with quiet():
        graph = exe.run(**{f"p{i}": f for i, f in enumerate(features)})
        eager = _pooled(E, case, *features)
    for r in range(len(case["boxes"])):
        level = case["levels"][r]
        with quiet():
            want = E.roi_align(features[level], case["boxes"][r:r + 1],
                               case["batch_index"][r:r + 1], case["output_size"],
                               spatial_scale=case["scales"][level],
                               sampling_ratio=case["sampling_ratio"], mode=case["mode"],
                               aligned=case["aligned"])
        np.testing.assert_array_equal(graph[r:r + 1], want)
        np.testing.assert_array_equal(eager[r:r + 1], want)


@pytest.mark.parametrize("mode", ["avg", "max"])
def test_every_level_gets_its_boxes_gradient(mode):
    rng = np.random.default_rng(4)
    features = [rng.standard_normal((1, 2, s, s)) for s in (8, 4)]
    case = dict(boxes=np.array([[1.3, 2.2, 20.1, 17.4], [0.6, 0.9, 9.7, 5.1],
                                [3.1, 4.4, 30.2, 28.3]]),
                batch_index=np.zeros(3, np.int64), levels=np.array([0, 1, 1]),
                scales=(0.25, 0.125), output_size=2, sampling_ratio=2, mode=mode,
                aligned=True)
    grads = check_gradient(lambda M, a, b: _pooled(M, case, a, b), *features)
    assert all(np.abs(g).sum() > 0 for g in grads)


def test_errors_name_the_function_and_what_was_expected():
    p2, p3 = N.var("p2", (1, 4, 8, 8)), N.var("p3", (1, 4, 4, 4))
    boxes, index, levels = N.var("b", (3, 4)), np.zeros(3, np.int64), np.zeros(3, np.int64)
    with pytest.raises(ShapeError, match="roi_align_levels: 2 level.*but 1 spatial scale"):
        N.roi_align_levels([p2, p3], boxes, index, levels, 2, (0.25,))
    with pytest.raises(ShapeError, match="roi_align_levels: give the features"):
        N.roi_align_levels([], boxes, index, levels, 2, ())
    with pytest.raises(ShapeError, match="same images and channels.*level 1"):
        N.roi_align_levels([p2, N.var("q", (1, 5, 4, 4))], boxes, index, levels, 2,
                           (0.25, 0.125))
    with pytest.raises(ShapeError, match=r"levels must be \(3,\) integers"):
        N.roi_align_levels([p2], boxes, index, np.zeros(3), 2, (0.25,))
    with pytest.raises(ShapeError, match="spatial_scale must be positive"):
        N.roi_align_levels([p2], boxes, index, levels, 2, (0.0,))
    with pytest.raises(DTypeError, match="roi_align_levels: the features must be float"):
        N.roi_align_levels([N.var("i", (1, 4, 8, 8), np.int32)], boxes, index, levels, 2,
                           (0.25,))


def test_a_fed_level_out_of_range_fails_the_run():
    p2, level = N.var("p2", (1, 1, 4, 4)), N.var("level", (1,), np.int64)
    exe = graphc.compile([p2, level], N.roi_align_levels(
        [p2], np.array([[0, 0, 2, 2.0]], np.float32), np.zeros(1, np.int64), level, 2, (1.0,)))
    ones = np.ones((1, 1, 4, 4), np.float32)
    with pytest.raises(IndexError, match="roi_align_levels: level 1 is out of range for 1"):
        exe.run(p2=ones, level=np.array([1]))
    assert exe.run(p2=ones, level=np.array([0])).shape == (1, 1, 2, 2)


def test_roi_align_levels_graphs_are_saved_and_loaded(tmp_path):
    p2, p3, boxes = N.var("p2", (1, 2, 8, 8)), N.var("p3", (1, 2, 4, 4)), N.var("b", (2, 4))
    y = N.roi_align_levels([p2, p3], boxes, np.zeros(2, np.int64), np.array([1, 0]), 2,
                           (0.25, 0.125), sampling_ratio=2, aligned=True)
    exe = graphc.compile([p2, p3, boxes], y)
    exe.save(tmp_path / "g.npz")
    rng = np.random.default_rng(6)
    feeds = dict(p2=rng.standard_normal(p2.shape).astype(np.float32),
                 p3=rng.standard_normal(p3.shape).astype(np.float32),
                 b=np.array([[1, 2, 20, 25], [0, 0, 9, 9]], np.float32))
    np.testing.assert_array_equal(graphc.load(tmp_path / "g.npz").run(**feeds),
                                  exe.run(**feeds))

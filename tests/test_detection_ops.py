"""The detection kinds (issue 18): ``roi_align``, ``roi_align_backward`` and
``non_max_suppression`` against float64 NumPy loop references (hypothesis over
geometries, boxes across the image border, ties in scores, empty results), in graph mode
(optimised or not, both memory plans) and eager mode; RoIAlign's gradients against finite
differences; save/load; ONNX import against onnx's reference implementation (RoiAlign,
NonMaxSuppression on constants and on graph inputs) and export against onnxruntime."""
import math

import hypothesis.strategies as st
import numpy as np
import pytest
from gradcheck import check_gradient, grid
from hypothesis import given
from neural_reference import DTYPES, SEEDS, check_everywhere
from opcheck import check_op, examples

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc import DTypeError, ShapeError
from graphc.type.errors import IndexOutOfRange


# -- RoIAlign's reference: one sample at a time ----------------------------------------------
def ref_geometry(box, out_hw, scale, ratio, aligned):
    """Per axis (y, x): (start, bin size, samples per bin); and the divisor of a bin."""
    offset = 0.5 if aligned else 0.0
    x1, y1, x2, y2 = (float(v) * scale - offset for v in box)
    height, width = y2 - y1, x2 - x1
    if not aligned:
        height, width = max(height, 1.0), max(width, 1.0)
    axes = []
    for start, extent, bins in ((y1, height, out_hw[0]), (x1, width, out_hw[1])):
        samples = ratio if ratio > 0 else math.ceil(extent / bins)
        axes.append((start, extent / bins, samples))
    return axes, max(axes[0][2] * axes[1][2], 1)


def ref_position(start, bin_size, samples, k, i):
    return start + k * bin_size + (i + 0.5) * bin_size / samples


def ref_corners(y, x, h, w):
    """The four (row, column, weight) a bilinear sample at (y, x) reads; [] outside."""
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return []
    y, x = max(y, 0.0), max(x, 0.0)
    rows = [int(y), int(y) + 1]
    cols = [int(x), int(x) + 1]
    if rows[0] >= h - 1:
        rows, y = [h - 1, h - 1], float(h - 1)
    if cols[0] >= w - 1:
        cols, x = [w - 1, w - 1], float(w - 1)
    fy, fx = y - rows[0], x - cols[0]
    return [(rows[0], cols[0], (1 - fy) * (1 - fx)), (rows[0], cols[1], (1 - fy) * fx),
            (rows[1], cols[0], fy * (1 - fx)), (rows[1], cols[1], fy * fx)]


def ref_bins(x_shape, box, out_hw, scale, ratio, aligned):
    """For each bin (ph, pw): its samples' corner lists, and the divisor."""
    (ys, xs), count = ref_geometry(box, out_hw, scale, ratio, aligned)
    h, w = x_shape[2:]
    bins = {}
    for ph in range(out_hw[0]):
        for pw in range(out_hw[1]):
            bins[ph, pw] = [ref_corners(ref_position(*ys, ph, iy), ref_position(*xs, pw, ix),
                                        h, w)
                            for iy in range(max(ys[2], 0)) for ix in range(max(xs[2], 0))]
    return bins, count


def ref_roi_align(x, boxes, batch_index, out_hw, scale, ratio, mode, aligned):
    x = x.astype(np.float64)
    out = np.zeros((len(boxes), x.shape[1]) + tuple(out_hw))
    for r, box in enumerate(boxes):
        image = x[batch_index[r]]
        bins, count = ref_bins(x.shape, box, out_hw, scale, ratio, aligned)
        for (ph, pw), samples in bins.items():
            for c in range(x.shape[1]):
                values = [max((wt * image[c, i, j] for i, j, wt in corners), default=0.0)
                          if mode == "max" else
                          sum(wt * image[c, i, j] for i, j, wt in corners)
                          for corners in samples]
                if mode == "max":
                    out[r, c, ph, pw] = max(values, default=0.0)
                else:
                    out[r, c, ph, pw] = sum(values) / count
    return out


def ref_roi_align_backward(g, boxes, batch_index, x, x_shape, scale, ratio, mode, aligned):
    g = g.astype(np.float64)
    dx = np.zeros(x_shape)
    for r, box in enumerate(boxes):
        b = batch_index[r]
        bins, count = ref_bins(x_shape, box, g.shape[2:], scale, ratio, aligned)
        for (ph, pw), samples in bins.items():
            for c in range(x_shape[1]):
                if mode == "avg":
                    for corners in samples:
                        for i, j, wt in corners:
                            dx[b, c, i, j] += g[r, c, ph, pw] * wt / count
                    continue
                best, where = None, None      # the first maximal (sample, corner)
                for corners in samples:
                    for value, pick in ([(wt * float(x[b, c, i, j]), (i, j, wt))
                                         for i, j, wt in corners] or [(0.0, None)] * 4):
                        if best is None or value > best:
                            best, where = value, pick
                if where is not None:
                    dx[b, c, where[0], where[1]] += g[r, c, ph, pw] * where[2]
    return dx


@st.composite
def roi_cases(draw):
    """Features, boxes (many across the border, some empty or inverted), indices, and
    the attributes."""
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    h, w = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    rois = draw(st.integers(0, 4))
    scale = draw(st.sampled_from([1.0, 0.5, 2.0, 0.25]))
    coord = st.floats(-3.0, 10.0, width=32) | st.sampled_from([0.0, float(w), float(h), -1.0])
    boxes = [[draw(coord) for _ in range(4)] for _ in range(rois)]
    batch_index = [draw(st.integers(0, n - 1)) for _ in range(rois)]
    out_hw = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    ratio = draw(st.integers(0, 3))
    return dict(shape=(n, c, h, w), boxes=boxes, batch_index=batch_index, out_hw=out_hw,
                scale=scale, ratio=ratio, mode=draw(st.sampled_from(["avg", "max"])),
                aligned=draw(st.booleans()))


def _arrays(case, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(case["shape"]).astype(dtype)
    boxes = np.array(case["boxes"], dtype).reshape(-1, 4)
    return x, boxes, np.array(case["batch_index"], np.int64)


def _attrs(case):
    return dict(output_size=case["out_hw"], spatial_scale=case["scale"],
                sampling_ratio=case["ratio"], mode=case["mode"], aligned=case["aligned"])


@examples(40)
@given(roi_cases(), DTYPES, SEEDS)
def test_roi_align_matches_the_loop_reference(case, dtype, seed):
    x, boxes, batch_index = _arrays(case, dtype, seed)
    attrs = _attrs(case)
    check_everywhere(lambda ns, x, b, i: ns.roi_align(x, b, i, **attrs),
                     lambda x, b, i: ref_roi_align(x, b, i, case["out_hw"], case["scale"],
                                                   case["ratio"], case["mode"],
                                                   case["aligned"]),
                     x, boxes, batch_index, terms=16)


@examples(40)
@given(roi_cases(), DTYPES, SEEDS)
def test_roi_align_backward_matches_the_loop_reference(case, dtype, seed):
    x, boxes, batch_index = _arrays(case, dtype, seed)
    rng = np.random.default_rng(seed + 1)
    g = rng.standard_normal((len(boxes), x.shape[1]) + case["out_hw"]).astype(dtype)
    attrs = _attrs(case)
    del attrs["output_size"]

    def ref(g, b, i, x):
        return ref_roi_align_backward(g, b, i, x, x.shape, case["scale"], case["ratio"],
                                      case["mode"], case["aligned"])
    if case["mode"] == "max":
        check_everywhere(lambda ns, g, b, i, x: ns.roi_align_backward(g, b, i, x, **attrs),
                         ref, g, boxes, batch_index, x, terms=16)
    else:
        check_everywhere(lambda ns, g, b, i: ns.roi_align_backward(
            g, b, i, input_shape=x.shape, **attrs),
            lambda g, b, i: ref(g, b, i, x), g, boxes, batch_index, terms=16)


BOXES = np.array([[0.5, 1.0, 4.2, 5.5], [-1.5, 2.2, 3.3, 9.0], [2.0, 0.3, 8.5, 3.1],
                  [5.5, 5.5, 6.0, 6.5]])


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("aligned", [False, True])
def test_roi_align_gradient_matches_finite_differences(mode, aligned):
    rng = np.random.default_rng(3)
    x = grid(rng, (2, 2, 6, 7))                  # no ties between corners: max is smooth
    index = np.array([0, 1, 1, 0])

    def fn(M, x):
        return M.roi_align(x, BOXES, index, (2, 3), spatial_scale=0.9, sampling_ratio=0,
                           mode=mode, aligned=aligned)
    check_gradient(fn, x)


def test_the_backward_kind_differentiates_to_roi_align():
    rng = np.random.default_rng(4)
    g = rng.standard_normal((4, 2, 2, 2))
    index = np.array([0, 0, 1, 1])

    def fn(M, g):
        return M.roi_align_backward(g, BOXES, index, input_shape=(2, 2, 5, 6),
                                    sampling_ratio=2, aligned=True)
    check_gradient(fn, g)
    with pytest.raises(graphc.GraphcError, match="second derivative of roi_align in max"):
        x = N.var("x", (2, 2, 5, 6), np.float64)
        (dx,) = N.grad(N.sum(N.roi_align(x, BOXES, index, 2, mode="max")), [x])
        N.grad(N.sum(dx * dx), [x])


def test_boxes_get_no_gradient():
    x, boxes = N.var("x", (1, 1, 4, 4)), N.var("boxes", (2, 4))
    y = N.roi_align(x, boxes, np.zeros(2, np.int64), 2)
    (db,) = N.grad(N.sum(y), [boxes])
    exe = graphc.compile([x, boxes], db)
    out = exe.run(x=np.ones((1, 1, 4, 4), np.float32),
                  boxes=np.array([[0, 0, 2, 2], [1, 1, 3, 3]], np.float32))
    np.testing.assert_array_equal(out, np.zeros((2, 4), np.float32))


# -- non-maximum suppression's reference -------------------------------------------------------
def ref_extent(box, center):
    """(x_min, x_max, y_min, y_max) in the boxes' dtype (NumPy scalars)."""
    if center:
        return (box[0] - box[2] / 2, box[0] + box[2] / 2, box[1] - box[3] / 2,
                box[1] + box[3] / 2)
    return min(box[1], box[3]), max(box[1], box[3]), min(box[0], box[2]), max(box[0], box[2])


def ref_suppresses(a, b, threshold):
    inter_w = min(a[1], b[1]) - max(a[0], b[0])
    inter_h = min(a[3], b[3]) - max(a[2], b[2])
    if inter_w <= 0 or inter_h <= 0:
        return False
    inter = inter_w * inter_h
    area_a, area_b = (a[1] - a[0]) * (a[3] - a[2]), (b[1] - b[0]) * (b[3] - b[2])
    union = area_a + area_b - inter
    if inter <= 0 or area_a <= 0 or area_b <= 0 or union <= 0:
        return False
    return inter / union > threshold


def ref_nms(boxes, scores, most, iou, score_threshold, center, size):
    rows = []
    for b in range(boxes.shape[0]):
        extents = [ref_extent(box, center) for box in boxes[b]]
        for c in range(scores.shape[1]):
            s = scores[b, c]
            order = sorted((i for i in range(len(s)) if not np.isnan(s[i]) and (
                score_threshold is None or s[i] > score_threshold)), key=lambda i: (-s[i], i))
            kept = []
            for i in order:
                if len(kept) >= most:
                    break
                if not any(ref_suppresses(extents[i], extents[k], iou) for k in kept):
                    kept.append(i)
            rows += [(b, c, k) for k in kept]
    selected = np.full((size, 3), -1, np.int64)
    selected[:min(size, len(rows))] = np.array(rows, np.int64).reshape(-1, 3)[:size]
    return [selected, np.int64(min(size, len(rows)))]


@st.composite
def nms_cases(draw):
    """Boxes from a few coordinates (identical, nested, flipped, empty boxes), scores
    from a few values (ties), sometimes NaN."""
    b, c, m = draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(0, 7))
    coord = st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0])
    boxes = [[[draw(coord) for _ in range(4)] for _ in range(m)] for _ in range(b)]
    score = st.sampled_from([0.1, 0.4, 0.5, 0.5, 0.9, float("nan")])
    scores = [[[draw(score) for _ in range(m)] for _ in range(c)] for _ in range(b)]
    most = draw(st.sampled_from([None, 0, 1, 2, 5]))
    limit = b * c * min(m if most is None else most, m)
    return dict(boxes=boxes, scores=scores, shape=(b, c, m), most=most,
                iou=draw(st.sampled_from([0.0, 0.2, 0.5, 0.7, 1.0])),
                score_threshold=draw(st.sampled_from([None, 0.0, 0.45])),
                center=draw(st.integers(0, 1)),
                size=draw(st.sampled_from([None, max(limit - 2, 0), limit + 1])))


@examples(60)
@given(nms_cases(), DTYPES)
def test_non_max_suppression_matches_the_loop_reference(case, dtype):
    b, c, m = case["shape"]
    boxes = np.array(case["boxes"], dtype).reshape(b, m, 4)
    scores = np.array(case["scores"], dtype).reshape(b, c, m)
    most = m if case["most"] is None else case["most"]
    size = case["size"] if case["size"] is not None else b * c * min(most, m)

    def fn(ns, boxes, scores):
        return list(ns.non_max_suppression(boxes, scores, case["most"], case["iou"],
                                           case["score_threshold"], case["center"],
                                           size=case["size"]))
    check_op(fn, lambda bx, sc: ref_nms(bx, sc, most, case["iou"], case["score_threshold"],
                                        case["center"], size), boxes, scores)


def test_non_max_suppression_keeps_ties_in_index_order_and_can_keep_nothing():
    boxes = np.array([[[0, 0, 1, 1], [0, 0, 1, 1], [0, 2, 1, 3], [0, 2, 1, 3]]], np.float32)
    scores = np.array([[[0.5, 0.5, 0.5, 0.7]]], np.float32)
    selected, count = E.non_max_suppression(boxes, scores, iou_threshold=0.5)
    assert count == 2 and count.dtype == np.int64
    np.testing.assert_array_equal(selected[:2], [[0, 0, 3], [0, 0, 0]])
    assert (selected[2:] == -1).all() and selected.shape == (4, 3)
    selected, count = E.non_max_suppression(boxes, scores, score_threshold=0.9)
    assert count == 0 and (selected == -1).all()


# -- errors --------------------------------------------------------------------------------------
def test_errors_name_the_function_and_what_was_expected():
    x = N.var("x", (2, 3, 8, 8))
    boxes, index = N.var("b", (5, 4)), N.var("i", (5,), np.int64)
    with pytest.raises(ShapeError, match=r"roi_align: boxes must have shape \(R, 4\)"):
        N.roi_align(x, N.var("b3", (5, 3)), index, 2)
    with pytest.raises(ShapeError, match=r"batch_index must have shape \(5,\)"):
        N.roi_align(x, boxes, N.var("i4", (4,), np.int64), 2)
    with pytest.raises(DTypeError, match="roi_align: batch_index must hold integers"):
        N.roi_align(x, boxes, N.var("f", (5,)), 2)
    with pytest.raises(DTypeError, match="roi_align: the features must be floating-point"):
        N.roi_align(N.var("xi", (2, 3, 8, 8), np.int32), boxes, index, 2)
    with pytest.raises(ShapeError, match="roi_align: the features must be 4-D"):
        N.roi_align(N.var("x3", (3, 8, 8)), boxes, index, 2)
    with pytest.raises(ShapeError, match="mode must be 'avg' or 'max'"):
        N.roi_align(x, boxes, index, 2, mode="sum")
    with pytest.raises(ShapeError, match="output_size must be at least 1"):
        N.roi_align(x, boxes, index, 0)
    with pytest.raises(IndexOutOfRange, match="batch index 2 is out of range for features "
                                              "of 2 image"):
        N.roi_align(x, boxes, np.array([0, 1, 2, 0, 0]), 2)
    with pytest.raises(ShapeError, match="roi_align_backward: mode 'max' needs the features"):
        N.roi_align_backward(N.var("g", (5, 3, 2, 2)), boxes, index, mode="max")
    with pytest.raises(ShapeError, match=r"the gradient must have shape \(5, 3, OH, OW\)"):
        N.roi_align_backward(N.var("g2", (5, 2, 2, 2)), boxes, index, input_shape=x.shape)
    with pytest.raises(ShapeError, match=r"non_max_suppression: scores must have shape "
                                         r"\(1, classes, 6\)"):
        N.non_max_suppression(N.var("bx", (1, 6, 4)), N.var("sc", (1, 2, 5)))
    with pytest.raises(ShapeError, match="center_point_box must be 0"):
        N.non_max_suppression(N.var("bx2", (1, 6, 4)), N.var("sc2", (1, 2, 6)),
                              center_point_box=2)
    with pytest.raises(DTypeError, match="non_max_suppression: scores must be floating"):
        N.non_max_suppression(N.var("bx3", (1, 6, 4)), N.var("sc3", (1, 2, 6), np.int64))


def test_a_fed_batch_index_out_of_range_fails_the_run():
    x, index = N.var("x", (2, 1, 4, 4)), N.var("i", (1,), np.int64)
    exe = graphc.compile([x, index], N.roi_align(x, np.array([[0, 0, 2, 2.0]], np.float32),
                                                 index, 2))
    with pytest.raises(IndexError, match="roi_align: batch index 2 is out of range"):
        exe.run(x=np.ones((2, 1, 4, 4), np.float32), i=np.array([2]))


# -- save/load, ONNX ---------------------------------------------------------------------------
def test_roi_align_graphs_are_saved_and_loaded(tmp_path):
    x, boxes = N.var("x", (2, 2, 6, 6)), N.var("boxes", (3, 4))
    index = np.array([0, 1, 1])
    y = N.roi_align(x, boxes, index, (2, 3), spatial_scale=0.5, sampling_ratio=2,
                    aligned=True)
    (dx,) = N.grad(N.sum(N.roi_align(x, boxes, index, 2, mode="max") * y[:, :, :, :2]), [x])
    exe = graphc.compile([x, boxes], [y, dx])
    exe.save(tmp_path / "g.npz")
    rng = np.random.default_rng(5)
    feeds = dict(x=rng.standard_normal(x.shape).astype(np.float32),
                 boxes=rng.uniform(0, 11, boxes.shape).astype(np.float32))
    for got, want in zip(graphc.load(tmp_path / "g.npz").run(**feeds), exe.run(**feeds)):
        np.testing.assert_array_equal(got, want)


def test_nms_graphs_are_saved_and_loaded(tmp_path):
    boxes, scores = N.var("boxes", (2, 6, 4)), N.var("scores", (2, 3, 6))
    selected, count = N.non_max_suppression(boxes, scores, 2, 0.4, score_threshold=0.2,
                                            size=9)
    exe = graphc.compile([boxes, scores], [selected, count])
    exe.save(tmp_path / "g.npz")
    rng = np.random.default_rng(7)
    feeds = dict(boxes=rng.uniform(0, 3, boxes.shape).astype(np.float32),
                 scores=rng.random(scores.shape).astype(np.float32))
    for got, want in zip(graphc.load(tmp_path / "g.npz").run(**feeds), exe.run(**feeds)):
        np.testing.assert_array_equal(got, want)


onnx = pytest.importorskip("onnx")
from onnx import helper as h  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import graphc.onnx  # noqa: E402


def _reference(model, feeds, runner):
    if runner == "onnxruntime":
        pytest.importorskip("onnxruntime")
        from onnx_reference import onnxruntime_run
        return onnxruntime_run(model, feeds)
    return ReferenceEvaluator(model).run(None, feeds)


def _one_node_model(op_type, inputs, out_type, opset, runner="reference", **attrs):
    """A model of one node whose inputs ``(name, array)`` are all graph inputs, with the
    output type ``out_type``, and the outputs the reference (onnx's, or onnxruntime)
    computes."""
    node = h.make_node(op_type, [n for n, _ in inputs], ["y"], **attrs)
    graph = h.make_graph([node], "g", [
        h.make_tensor_value_info(n, h.np_dtype_to_tensor_dtype(a.dtype), a.shape)
        for n, a in inputs], [h.make_tensor_value_info("y", out_type, None)])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 8)      # onnxruntime's newest
    expected = _reference(model, dict(inputs), runner)
    del model.graph.output[:]
    model.graph.output.append(h.make_tensor_value_info("y", out_type, expected[0].shape))
    return model, expected


@pytest.mark.parametrize("seed", range(8))
def test_roi_align_imports_as_the_reference_computes(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, 9, 7)).astype(np.float32)
    boxes = np.sort(rng.uniform(-2, 10, (5, 2, 2)), axis=1).reshape(5, 4)[:, [0, 2, 1, 3]]
    index = rng.integers(0, 2, 5).astype(np.int64)
    attrs = dict(mode=["avg", "max"][seed % 2], output_height=int(rng.integers(1, 4)),
                 output_width=int(rng.integers(1, 4)), sampling_ratio=seed % 3,
                 spatial_scale=float(rng.choice([0.5, 1.0])))
    # opset 10 had no coordinate_transformation_mode and sampled as output_half_pixel;
    # onnx's reference ignores the opset there, onnxruntime does not
    opset, runner = (16, "reference") if seed < 6 else (10, "onnxruntime")
    if seed < 6:
        attrs["coordinate_transformation_mode"] = ["half_pixel", "output_half_pixel"][seed % 2]
    inputs = [("x", x), ("rois", boxes.astype(np.float32)), ("i", index)]
    model, expected = _one_node_model("RoiAlign", inputs, onnx.TensorProto.FLOAT, opset,
                                      runner, **attrs)
    (got,) = graphc.onnx.load(model).run(dict(inputs))
    np.testing.assert_allclose(got, expected[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("seed", range(6))
def test_nms_of_graph_inputs_specialises_on_their_values(seed):
    rng = np.random.default_rng(seed)
    corner = rng.uniform(0, 4, (2, 8, 2)).astype(np.float32)
    boxes = np.concatenate([corner, corner + rng.uniform(0.5, 3, (2, 8, 2))], -1)
    boxes = boxes.astype(np.float32)
    scores = rng.choice(np.float32([0.2, 0.5, 0.6, 0.9]), (2, 3, 8))
    inputs = [("boxes", boxes), ("scores", scores), ("most", np.array([seed % 4], np.int64)),
              ("iou", np.array([0.3], np.float32)), ("score", np.array([0.4], np.float32))]
    # onnx's reference fails on omitted inputs: onnxruntime is the reference there
    given, runner = (inputs[:2 + seed % 4], "onnxruntime") if seed < 4 else (inputs,
                                                                            "reference")
    model, expected = _one_node_model("NonMaxSuppression", given, onnx.TensorProto.INT64, 11,
                                      runner, center_point_box=seed % 2)
    loaded = graphc.onnx.load(model)
    (got,) = loaded.run(dict(given))
    np.testing.assert_array_equal(got, expected[0])
    # other values: the model is compiled again for them
    other = dict(given, scores=scores[:, :, ::-1].copy())
    (again,) = loaded.run(other)
    np.testing.assert_array_equal(again, _reference(model, other, runner)[0])


@pytest.mark.parametrize("aligned", [False, True])
def test_roi_align_exports_to_onnx_roialign(aligned):
    pytest.importorskip("onnxruntime")
    from onnx_reference import onnxruntime_run
    from test_onnx_export import op_types, to_onnx

    x, boxes = N.var("x", (2, 3, 8, 9)), N.var("boxes", (4, 4))
    exe = graphc.compile([x, boxes], N.roi_align(x, boxes, np.array([0, 1, 1, 0]), (3, 2),
                                                 spatial_scale=0.5, sampling_ratio=2,
                                                 aligned=aligned))
    model = to_onnx(exe)
    assert "RoiAlign" in op_types(model)
    rng = np.random.default_rng(6)
    feeds = dict(x=rng.standard_normal(x.shape).astype(np.float32),
                 boxes=np.array([[0, 0, 9, 9], [2, 3, 14, 10], [-2, 1, 5, 20], [4, 4, 5, 5]],
                                np.float32))
    np.testing.assert_allclose(onnxruntime_run(model, feeds)[0], exe.run(**feeds),
                               rtol=1e-5, atol=1e-6)


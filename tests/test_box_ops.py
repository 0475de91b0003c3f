"""The box-coding kinds (issue 18): ``box_decode`` and ``box_encode`` against float64
loop references (one box at a time, Python's math; hypothesis over broadcasting shapes,
weights, clips, dtypes, deltas past the clip) in graph mode (optimised or not, both memory
plans) and eager mode; torchvision's and Matterport's formulas written out here; round
trips; gradients against finite differences; every error; save/load."""
import json
import math

import hypothesis.strategies as st
import numpy as np
import pytest
from gradcheck import broadcastable_pair, check_gradient
from hypothesis import given
from neural_reference import DTYPES, SEEDS, check_everywhere
from opcheck import examples, quiet

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc import DTypeError, ShapeError
from graphc.type import Op

CLIP = math.log(1000 / 16)
SWAP = [1, 0, 3, 2]          # (x1, y1, x2, y2) <-> Matterport's (y1, x1, y2, x2)


# -- the references: one box at a time -------------------------------------------------------
def ref_decode_one(d, box, weights, clip):
    wx, wy, ww, wh = weights
    x1, y1, x2, y2 = (float(v) for v in box)
    width, height = x2 - x1, y2 - y1
    cx, cy = x1 + width / 2, y1 + height / 2
    px, py = float(d[0]) / wx * width + cx, float(d[1]) / wy * height + cy
    pw = math.exp(min(float(d[2]) / ww, clip)) * width
    ph = math.exp(min(float(d[3]) / wh, clip)) * height
    return [px - pw / 2, py - ph / 2, px + pw / 2, py + ph / 2]


def ref_encode_one(box, ref, weights):
    wx, wy, ww, wh = weights
    x1, y1, x2, y2 = (float(v) for v in box)
    r1, s1, r2, s2 = (float(v) for v in ref)
    rw, rh = r2 - r1, s2 - s1
    return [wx * ((x1 + x2) / 2 - (r1 + r2) / 2) / rw, wy * ((y1 + y2) / 2 - (s1 + s2) / 2) / rh,
            ww * math.log((x2 - x1) / rw), wh * math.log((y2 - y1) / rh)]


def each_box(one, a, b, *args):
    """``one`` on every pair of boxes of ``a`` and ``b`` broadcast together, in float64."""
    lead = np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
    a, b = np.broadcast_to(a, lead + (4,)), np.broadcast_to(b, lead + (4,))
    out = np.zeros(lead + (4,))
    for index in np.ndindex(*lead):
        out[index] = one(a[index], b[index], *args)
    return out


# -- torchvision's BoxCoder (torchvision/models/detection/_utils.py), in NumPy ----------------
def torchvision_decode(rel_codes, boxes, weights, clip):
    """``decode``: codes (R, 4K) of K classes against boxes (R, 4) -> (R, K, 4)."""
    boxes = boxes.astype(rel_codes.dtype)
    widths = boxes[:, 2] - boxes[:, 0]
    heights = boxes[:, 3] - boxes[:, 1]
    ctr_x = boxes[:, 0] + 0.5 * widths
    ctr_y = boxes[:, 1] + 0.5 * heights
    wx, wy, ww, wh = weights
    dx = rel_codes[:, 0::4] / wx
    dy = rel_codes[:, 1::4] / wy
    dw = np.minimum(rel_codes[:, 2::4] / ww, clip)
    dh = np.minimum(rel_codes[:, 3::4] / wh, clip)
    pred_ctr_x = dx * widths[:, None] + ctr_x[:, None]
    pred_ctr_y = dy * heights[:, None] + ctr_y[:, None]
    pred_w = np.exp(dw) * widths[:, None]
    pred_h = np.exp(dh) * heights[:, None]
    c_to_c_h = 0.5 * pred_h
    c_to_c_w = 0.5 * pred_w
    return np.stack((pred_ctr_x - c_to_c_w, pred_ctr_y - c_to_c_h, pred_ctr_x + c_to_c_w,
                     pred_ctr_y + c_to_c_h), axis=2)


def torchvision_encode(reference_boxes, proposals, weights):
    """``encode_boxes``: the targets of ground-truth ``reference_boxes`` on ``proposals``."""
    wx, wy, ww, wh = (np.asarray(w, reference_boxes.dtype) for w in weights)
    ex_widths = proposals[:, 2:3] - proposals[:, 0:1]
    ex_heights = proposals[:, 3:4] - proposals[:, 1:2]
    ex_ctr_x = proposals[:, 0:1] + 0.5 * ex_widths
    ex_ctr_y = proposals[:, 1:2] + 0.5 * ex_heights
    gt_widths = reference_boxes[:, 2:3] - reference_boxes[:, 0:1]
    gt_heights = reference_boxes[:, 3:4] - reference_boxes[:, 1:2]
    gt_ctr_x = reference_boxes[:, 0:1] + 0.5 * gt_widths
    gt_ctr_y = reference_boxes[:, 1:2] + 0.5 * gt_heights
    return np.concatenate((wx * (gt_ctr_x - ex_ctr_x) / ex_widths,
                           wy * (gt_ctr_y - ex_ctr_y) / ex_heights,
                           ww * np.log(gt_widths / ex_widths),
                           wh * np.log(gt_heights / ex_heights)), axis=1)


# -- cases -----------------------------------------------------------------------------------
def make_boxes(rng, lead, dtype, low=1.0):
    corner = rng.uniform(-20, 20, lead + (2,))
    return np.concatenate([corner, corner + rng.uniform(low, 40, lead + (2,))], -1).astype(dtype)


def make_deltas(rng, lead, dtype):
    """Mostly small, some far past any clip (either sign) in the size columns."""
    d = rng.normal(0, 1, lead + (4,))
    big = rng.random(lead + (2,)) < 0.3
    d[..., 2:] = np.where(big, rng.choice([-12.0, 9.0, 12.0], lead + (2,)), d[..., 2:])
    return d.astype(dtype)


WEIGHTS = st.sampled_from([(1.0, 1.0, 1.0, 1.0), (10.0, 10.0, 5.0, 5.0), (0.5, 2, 3, 1)]) | \
    st.tuples(*[st.floats(0.5, 20.0)] * 4)


@st.composite
def box_cases(draw):
    """Two leading shapes that broadcast (empty ones too), weights, a clip."""
    if draw(st.integers(0, 9)) == 0:
        lead = (draw(st.sampled_from([(0,), (2, 0), (0, 3)])),) * 2
    else:
        lead = broadcastable_pair(draw, max_dims=3)
    return dict(lead=lead, weights=draw(WEIGHTS), seed=draw(SEEDS),
                clip=draw(st.sampled_from([CLIP, 1.0, 0.0, -0.5, math.inf])))


@examples(40)
@given(box_cases(), DTYPES)
def test_box_decode_matches_the_loop_reference(case, dtype):
    rng = np.random.default_rng(case["seed"])
    deltas = make_deltas(rng, case["lead"][0], dtype)
    boxes = make_boxes(rng, case["lead"][1], dtype, low=-5.0)     # inverted boxes too
    weights, clip = case["weights"], case["clip"]
    check_everywhere(lambda ns, d, b: ns.box_decode(d, b, weights, clip),
                     lambda d, b: each_box(ref_decode_one, d, b, weights, clip),
                     deltas, boxes, terms=8)


@examples(40)
@given(box_cases(), DTYPES)
def test_box_encode_matches_the_loop_reference(case, dtype):
    rng = np.random.default_rng(case["seed"])
    boxes = make_boxes(rng, case["lead"][0], dtype, low=0.5)
    reference = make_boxes(rng, case["lead"][1], dtype)
    weights = case["weights"]
    check_everywhere(lambda ns, b, r: ns.box_encode(b, r, weights),
                     lambda b, r: each_box(ref_encode_one, b, r, weights),
                     boxes, reference, terms=8)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weights", [(1.0, 1.0, 1.0, 1.0), (10.0, 10.0, 5.0, 5.0)])
def test_torchvisions_formulas_give_the_same_numbers(dtype, weights):
    rng = np.random.default_rng(1)
    rois, classes = 7, 3
    proposals = make_boxes(rng, (rois,), dtype)
    codes = make_deltas(rng, (rois, classes), dtype).reshape(rois, 4 * classes)
    expected = torchvision_decode(codes, proposals, weights, CLIP)
    np.testing.assert_array_equal(
        E.box_decode(codes.reshape(rois, classes, 4), proposals[:, None, :], weights), expected)
    c, p = N.var("c", codes.shape, dtype), N.var("p", proposals.shape, dtype)
    y = N.box_decode(N.reshape(c, (rois, classes, 4)), p[:, None, :], weights)
    np.testing.assert_array_equal(graphc.compile([c, p], y).run(c=codes, p=proposals), expected)
    gt = make_boxes(rng, (rois,), dtype, low=0.5)
    np.testing.assert_array_equal(E.box_encode(gt, proposals, weights),
                                  torchvision_encode(gt, proposals, weights))


def test_matterports_layout_is_a_column_swap_and_weights_of_one_over_the_std():
    """``apply_box_deltas_graph`` and ``box_refinement_graph`` with ``BBOX_STD_DEV``."""
    rng = np.random.default_rng(2)
    std = np.array([0.1, 0.1, 0.2, 0.2])
    boxes = make_boxes(rng, (6,), np.float64)[:, SWAP]          # (y1, x1, y2, x2)
    raw = rng.normal(0, 1, (6, 4))                             # (dy, dx, dh, dw) / std
    deltas = raw * std
    height, width = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    center_y = boxes[:, 0] + 0.5 * height + deltas[:, 0] * height
    center_x = boxes[:, 1] + 0.5 * width + deltas[:, 1] * width
    height, width = height * np.exp(deltas[:, 2]), width * np.exp(deltas[:, 3])
    applied = np.stack([center_y - 0.5 * height, center_x - 0.5 * width,
                        center_y + 0.5 * height, center_x + 0.5 * width], axis=1)
    got = E.box_decode(raw[:, SWAP], boxes[:, SWAP], weights=(10, 10, 5, 5),
                       clip=math.inf)[:, SWAP]
    np.testing.assert_allclose(got, applied, rtol=1e-12, atol=1e-12)
    # box_refinement_graph(box, gt_box) / BBOX_STD_DEV
    gt = applied
    h, w = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    gh, gw = gt[:, 2] - gt[:, 0], gt[:, 3] - gt[:, 1]
    refinement = np.stack([(gt[:, 0] + 0.5 * gh - boxes[:, 0] - 0.5 * h) / h,
                           (gt[:, 1] + 0.5 * gw - boxes[:, 1] - 0.5 * w) / w,
                           np.log(gh / h), np.log(gw / w)], axis=1) / std
    encoded = E.box_encode(gt[:, SWAP], boxes[:, SWAP], weights=(10, 10, 5, 5))[:, SWAP]
    np.testing.assert_allclose(encoded, refinement, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(encoded, raw, rtol=1e-9, atol=1e-12)


# -- round trips, clip, dtypes ----------------------------------------------------------------
@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-4), (np.float64, 1e-11)])
@pytest.mark.parametrize("weights", [(1.0, 1.0, 1.0, 1.0), (10.0, 10.0, 5.0, 5.0),
                                     (0.5, 4.0, 2.0, 0.75)])
def test_decode_undoes_encode_in_both_modes(dtype, tol, weights):
    rng = np.random.default_rng(3)
    boxes = make_boxes(rng, (5, 3), dtype, low=0.5)
    reference = make_boxes(rng, (5, 1), dtype)
    b, r = N.var("b", boxes.shape, dtype), N.var("r", reference.shape, dtype)
    d = N.box_encode(b, r, weights)
    exe = graphc.compile([b, r], [N.box_decode(d, r, weights, clip=math.inf), d])
    again, deltas = exe.run(b=boxes, r=reference)
    np.testing.assert_allclose(again, boxes, rtol=tol, atol=tol * 40)
    np.testing.assert_array_equal(deltas, E.box_encode(boxes, reference, weights))
    np.testing.assert_allclose(E.box_decode(deltas, reference, weights, math.inf), boxes,
                               rtol=tol, atol=tol * 40)
    # and the other way, below the clip
    small = np.clip(deltas, -2, 2)
    np.testing.assert_allclose(E.box_encode(E.box_decode(small, reference, weights),
                                            reference, weights), small, rtol=tol * 10,
                               atol=tol * 10)


def test_deltas_past_the_clip_grow_a_box_by_exp_clip_at_most():
    boxes = np.array([[0, 0, 2, 4]], np.float32)
    grown = E.box_decode(np.array([[0, 0, 50, -50]], np.float32), boxes)
    np.testing.assert_allclose(grown, [[1 - 62.5, 2 - 2 * math.exp(-50), 1 + 62.5,
                                        2 + 2 * math.exp(-50)]], rtol=1e-6)
    unclipped = E.box_decode(np.array([[0, 0, 3.0, 0]]), boxes, clip=math.inf)
    np.testing.assert_allclose(unclipped[0, 2] - unclipped[0, 0], 2 * math.exp(3))
    assert np.isnan(E.box_decode(np.array([0, 0, np.nan, 0]), boxes[0])[[0, 2]]).all()


def test_mixed_dtypes_compute_in_the_common_one():
    rng = np.random.default_rng(4)
    d32, b64 = make_deltas(rng, (3, 2), np.float32), make_boxes(rng, (3, 1), np.float64)
    got = E.box_decode(d32, b64)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, E.box_decode(d32.astype(np.float64), b64))
    d, b = N.var("d", d32.shape, np.float32), N.var("b", b64.shape, np.float64)
    y = N.box_encode(N.box_decode(d, b), b.astype(np.float32))
    assert y.dtype == np.float64
    np.testing.assert_array_equal(graphc.compile([d, b], y).run(d=d32, b=b64),
                                  E.box_encode(got, b64.astype(np.float32)))
    grads = N.grad(N.sum(y), [d, b])
    assert [(g.shape, g.dtype) for g in grads] == [(d.shape, d.dtype), (b.shape, b.dtype)]
    # Python lists and single boxes are lifted as NumPy would
    assert E.box_encode([1.0, 1, 3, 3], [0.0, 0, 2, 2]).tolist() == [0.5, 0.5, 0.0, 0.0]


def test_a_slice_of_a_heads_output_is_read_in_place():
    rng = np.random.default_rng(5)
    head, boxes = rng.normal(0, 1, (4, 12)).astype(np.float32), make_boxes(rng, (4,), "f4")
    x, b = N.var("x", head.shape), N.var("b", boxes.shape)
    y = N.box_decode(x[:, 4:8], b, (10, 10, 5, 5))
    for optimise in (True, False):
        got = graphc.compile([x, b], y, optimise=optimise).run(x=head, b=boxes)
        np.testing.assert_array_equal(got, E.box_decode(head[:, 4:8].copy(), boxes,
                                                        (10, 10, 5, 5)))


# -- gradients --------------------------------------------------------------------------------
def _gradient_values(rng, lead_d, lead_b):
    boxes = make_boxes(rng, lead_b, np.float64, low=2.0)
    deltas = rng.uniform(-0.8, 0.8, lead_d + (4,))
    deltas[..., 3] = np.where(rng.random(lead_d) < 0.4, 30.0, deltas[..., 3])  # past the clip
    return deltas, boxes


@pytest.mark.parametrize("weights", [(1.0, 1.0, 1.0, 1.0), (10.0, 10.0, 5.0, 5.0)])
@pytest.mark.parametrize("leads", [((5,), (5,)), ((3, 2), (3, 1)), ((4,), ())])
def test_box_decode_gradients_match_finite_differences(weights, leads):
    deltas, boxes = _gradient_values(np.random.default_rng(6), *leads)
    grads = check_gradient(lambda M, d, b: M.box_decode(d, b, weights, clip=2.5), deltas,
                           boxes)
    clipped = deltas[..., 3] / weights[3] >= 2.5
    assert clipped.any() and (grads[0][..., 3][clipped] == 0).all()
    check_gradient(lambda M, d, b: M.box_decode(d, b, weights), deltas, boxes, wrt=[1])


@pytest.mark.parametrize("weights", [(1.0, 1.0, 1.0, 1.0), (10.0, 10.0, 5.0, 5.0)])
@pytest.mark.parametrize("leads", [((5,), (5,)), ((3, 2), (3, 1)), ((4,), ())])
def test_box_encode_gradients_match_finite_differences(weights, leads):
    rng = np.random.default_rng(7)
    boxes, reference = make_boxes(rng, leads[0], np.float64), make_boxes(rng, leads[1], "f8")
    check_gradient(lambda M, b, r: M.box_encode(b, r, weights), boxes, reference)
    check_gradient(lambda M, b, r: M.box_encode(b, r, weights), boxes, reference, wrt=[0])


def test_second_derivatives_come_from_the_same_rules():
    rng = np.random.default_rng(8)
    deltas, boxes = _gradient_values(rng, (3,), (3,))
    v = rng.normal(0, 1, deltas.shape)

    def first(d, b):
        return E.grad(lambda d: E.sum(E.box_decode(d, b) * v))(d)
    d, b = N.var("d", deltas.shape, np.float64), N.var("b", boxes.shape, np.float64)
    (g,) = N.grad(N.sum(N.box_decode(d, b) * v), [d])
    (gg,) = N.grad(N.sum(g * g), [b])
    got = graphc.compile([d, b], gg).run(d=deltas, b=boxes)
    numeric = np.zeros(boxes.shape)
    for index in np.ndindex(*boxes.shape):
        step = np.zeros(boxes.shape)
        step[index] = 1e-6
        numeric[index] = (np.sum(first(deltas, boxes + step) ** 2)
                          - np.sum(first(deltas, boxes - step) ** 2)) / 2e-6
    np.testing.assert_allclose(got, numeric, rtol=1e-5, atol=1e-6)


# -- errors ------------------------------------------------------------------------------------
def test_errors_name_the_function_the_shapes_and_what_was_expected():
    d, b = N.var("d", (5, 4)), N.var("b", (5, 4))
    with pytest.raises(ShapeError, match=r"box_decode: deltas must have shape \(\.\.\., 4\).*"
                                         r"got shape \(5, 3\)"):
        N.box_decode(N.var("d3", (5, 3)), b)
    with pytest.raises(ShapeError, match=r"box_encode: reference must have shape .*got shape "
                                         r"\(\)"):
        E.box_encode(np.zeros(4), np.float64(1))
    with pytest.raises(ShapeError, match=r"box_decode: the leading axes of deltas \(3, 2, 4\) "
                                         r"and boxes \(4, 1, 4\) must broadcast together"):
        N.box_decode(N.var("d32", (3, 2, 4)), N.var("b41", (4, 1, 4)))
    with pytest.raises(DTypeError, match="box_encode: boxes must be floating-point, got int64"):
        N.box_encode(N.var("i", (5, 4), np.int64), b)
    with pytest.raises(DTypeError, match="box_decode: boxes must be floating-point, got "
                                         "complex128"):
        E.box_decode(np.zeros(4), np.zeros(4, complex))
    for weights in [(1, 1, 1), (1, 1, 1, 0), (1, 1, 1, -2), (1, 1, 1, math.inf),
                    (1, 1, 1, math.nan), (1, 1, 1, "2"), (1, 1, 1, True), "1111", 1.0, None]:
        with pytest.raises(ShapeError, match=r"box_decode: weights must be 4 positive finite "
                                             r"numbers \(wx, wy, ww, wh\), got"):
            N.box_decode(d, b, weights)
        with pytest.raises(ShapeError, match="box_encode: weights must be 4 positive"):
            E.box_encode(np.ones(4), np.ones(4), weights)
    for clip in [math.nan, "4", None, True, [1.0]]:
        with pytest.raises(ShapeError, match=r"box_decode: clip must be a number \(not NaN\), "
                                             r"got"):
            N.box_decode(d, b, clip=clip)
    with pytest.raises(ShapeError) as caught:
        N.box_decode(d, b, clip="x")
    assert "test_box_ops.py" in str(caught.value)         # the user's line


def test_the_rules_check_stored_attributes_again():
    from graphc.shape.box_rules import box_decode_rule, box_encode_rule
    parents = [N.var("d", (2, 4)), N.var("b", (2, 4))]
    for weights in [(1.0, 1.0, 1.0, 0.0), (1, 1, 1, 1), (1.0, 1.0, 1.0)]:
        with pytest.raises(ShapeError, match="box_encode: weights must be 4 positive"):
            box_encode_rule(Op.make("box_encode", weights=weights), parents)
    with pytest.raises(ShapeError, match="box_decode: clip must be a number"):
        box_decode_rule(Op.make("box_decode", weights=(1.0,) * 4, clip=math.nan), parents)


# -- save/load -------------------------------------------------------------------------------
def _graph():
    x, anchors, gt = N.var("x", (6, 8)), N.var("anchors", (6, 1, 4)), N.var("gt", (6, 4))
    deltas = N.reshape(x, (6, 2, 4))
    decoded = N.box_decode(deltas, anchors, (10, 10, 5, 5))
    unclipped = N.box_decode(deltas, anchors, clip=math.inf)
    targets = N.box_encode(gt, anchors[:, 0], weights=[1, 2, 3, 4])
    loss = N.sum(N.square(decoded - unclipped)) + N.sum(targets * targets)
    return [x, anchors, gt], [decoded, unclipped, targets] + N.grad(loss, [x, anchors, gt])


def _feeds():
    rng = np.random.default_rng(9)
    return dict(x=rng.normal(0, 1, (6, 8)).astype(np.float32),
                anchors=make_boxes(rng, (6, 1), np.float32),
                gt=make_boxes(rng, (6,), np.float32))


def test_box_graphs_are_saved_and_loaded(tmp_path):
    inputs, outputs = _graph()
    exe = graphc.compile(inputs, outputs)
    exe.save(tmp_path / "g.npz")
    feeds = _feeds()
    with quiet():
        for got, want in zip(graphc.load(tmp_path / "g.npz").run(**feeds), exe.run(**feeds)):
            np.testing.assert_array_equal(got, want)


def test_a_file_with_bad_weights_is_refused(tmp_path):
    exe = graphc.compile(*_graph())
    exe.save(tmp_path / "g.npz")
    with np.load(tmp_path / "g.npz", allow_pickle=False) as data:
        doc = json.loads(bytes(data["graph_json"]).decode())
        arrays = {k: data[k] for k in data.files if k != "graph_json"}
    node = next(n for n in doc["nodes"] if n["kind"] == "box_encode")
    node["attrs"] = [["weights", {"t": [1.0, 2.0, 3.0, -4.0]}]]
    raw = json.dumps(doc).encode()
    np.savez(tmp_path / "bad.npz", graph_json=np.frombuffer(raw, np.uint8), **arrays)
    with pytest.raises(graphc.GraphcError, match="box_encode: weights must be 4 positive"):
        graphc.load(tmp_path / "bad.npz")


def test_onnx_export_is_refused_with_the_reason():
    pytest.importorskip("onnx")
    from graphc.onnx.export import to_onnx
    d, b = N.var("d", (3, 4)), N.var("b", (3, 4))
    with pytest.raises(graphc.GraphcError, match="ONNX has no box-coder operator"):
        to_onnx(graphc.compile([d, b], N.box_decode(d, b)))

"""Mask R-CNN (issue 18): the whole network eager against graph on random inputs, its
static stages (anchors, the pyramid's RoIAlign, the detection layer) against plain
NumPy, the configuration's and the input's errors, the weight-name mapping."""
import math

import numpy as np
import pytest
from opcheck import quiet

import graphc.eager as E
from graphc.neural import MaskRCNN, MaskRCNNConfig, compile_inference
from graphc.neural import detection

TINY = MaskRCNNConfig(image_size=64, blocks=(1, 1, 1, 1), width=8, fpn_channels=16,
                      head_channels=32, classes=5, pre_nms=300, proposals=60, detections=12,
                      min_confidence=0.0)


@pytest.fixture(scope="module")
def tiny():
    model = MaskRCNN(TINY)
    image = np.random.default_rng(1).standard_normal((1, 3, 64, 64)).astype(np.float32)
    with quiet():
        return model, model.init(seed=0), image, model.forward(E, model.init(seed=0), image)


def test_the_graph_computes_what_eager_mode_computes(tiny):
    model, params, image, eager = tiny
    with quiet():
        graph = compile_inference(model, params, image.shape, fold=False, optimise=False,
                                  kernels="numpy").run(x=image)
    for got, want in zip(graph, eager):
        np.testing.assert_array_equal(got, want)


def test_the_optimised_graph_gives_well_formed_detections(tiny):
    model, params, image, eager = tiny
    with quiet():
        boxes, ids, scores, masks, count = compile_inference(model, params,
                                                             image.shape).run(x=image)
    d = TINY.detections
    assert (boxes.shape, ids.shape, scores.shape, masks.shape) == ((d, 4), (d,), (d,),
                                                                   (d, 28, 28))
    assert (boxes.dtype, ids.dtype, masks.dtype) == (np.float32, np.int64, np.float32)
    assert count == eager[4] and 0 < count <= d
    real = np.arange(d) < count
    assert np.all(ids[real] > 0) and np.all(ids < TINY.classes)
    assert np.all(np.diff(scores[real]) <= 0), "best first"
    assert np.all((boxes >= 0) & (boxes <= TINY.image_size))
    assert np.all((masks[real] >= 0) & (masks[real] <= 1))
    assert not boxes[~real].any() and not ids[~real].any() and not scores[~real].any()
    np.testing.assert_allclose(np.sort(scores), np.sort(eager[2]), rtol=1e-3, atol=1e-4)


def test_anchors_are_torchvisions():
    got = detection.level_anchors(2, 3, 8, 64, (0.5, 1.0, 2.0))
    assert got.shape == (18, 4)
    for cell in range(6):
        y, x = divmod(cell, 3)
        for a, ratio in enumerate((0.5, 1.0, 2.0)):
            h, w = math.sqrt(ratio) * 64, 64 / math.sqrt(ratio)
            want = [round(-w / 2) + x * 8, round(-h / 2) + y * 8, round(w / 2) + x * 8,
                    round(h / 2) + y * 8]
            assert got[cell * 3 + a].tolist() == want
    every = detection.anchors([(4, 4), (2, 2)], (4, 8), (32, 64), (1.0,))
    assert every.shape == (20, 4) and every[16].tolist() == [-32.0, -32.0, 32.0, 32.0]


def test_each_box_pools_from_its_own_pyramid_level():
    rng = np.random.default_rng(2)
    strides = (4, 8, 16, 32)
    levels = [rng.standard_normal((1, 2, 128 // s, 128 // s)).astype(np.float32)
              for s in strides]
    # sides 50, 112, 224 and 500: levels 2, 3, 4 and 5 (floor(4 + log2(side / 224)))
    boxes = np.array([[0, 0, 50, 50], [10, 10, 122, 122], [0, 0, 224, 224],
                      [0, 0, 500, 500]], np.float32)
    got = detection.pyramid_roi_align(E, levels, boxes, 3, strides)
    for box, level in zip(range(4), range(4)):
        want = E.roi_align(levels[level], boxes[box:box + 1], np.zeros(1, np.int64), 3,
                           spatial_scale=1 / strides[level], sampling_ratio=2)
        np.testing.assert_array_equal(got[box:box + 1], want)


def test_the_detection_layer_suppresses_per_class_and_pads():
    cfg = MaskRCNNConfig(classes=3, detections=3, min_confidence=0.5)
    boxes = np.array([[0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30], [0, 0, 10, 10],
                      [40, 40, 50, 50]], np.float32)
    high = 5.0
    logits = np.zeros((5, 3), np.float32)
    logits[[0, 1], 1] = [high + 1, high]      # class 1: the second overlaps the first
    logits[2, 2] = high                       # class 2: kept
    logits[3, 2] = high + 2                   # class 2, overlapping box 0 of class 1: kept
    logits[4, 0] = high                       # background: dropped
    valid = np.array([True, True, True, True, True])
    got_boxes, ids, scores, count = detection.detections(
        E, logits, np.zeros((5, 12), np.float32), boxes, valid, cfg, 512)
    assert count == 3
    assert ids.tolist() == [2, 1, 2]
    np.testing.assert_array_equal(got_boxes, boxes[[3, 0, 2]])
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    np.testing.assert_allclose(scores, probs[[3, 0, 2]].max(1), rtol=1e-6)
    valid[3] = False                          # a padded proposal never becomes a detection
    _, ids, _, count = detection.detections(E, logits, np.zeros((5, 12), np.float32), boxes,
                                            valid, cfg, 512)
    assert count == 2 and ids.tolist() == [1, 2, 0]


def test_bad_configurations_and_inputs_are_refused(tiny):
    with pytest.raises(ValueError, match="multiple of 64.*got 100"):
        MaskRCNNConfig(image_size=100)
    with pytest.raises(ValueError, match="four stage lengths"):
        MaskRCNNConfig(blocks=(3, 4, 6))
    with pytest.raises(ValueError, match="classes counts the background"):
        MaskRCNNConfig(classes=1)
    model, params, image, _ = tiny
    with pytest.raises(ValueError, match=r"expected one image of shape \(1, 3, 64, 64\)"):
        model.forward(E, params, np.zeros((2, 3, 64, 64), np.float32))


def test_every_parameter_maps_to_a_torchvision_name(tiny):
    model = tiny[0]
    names = model.torchvision_names()
    assert set(names) == {p.name for p in model.specs()}
    flipped = {n for n, (_, t) in names.items() if t}
    assert flipped == {"roi_heads.box_head.fc6.weight", "roi_heads.box_head.fc7.weight",
                       "roi_heads.box_predictor.cls_score.weight",
                       "roi_heads.box_predictor.bbox_pred.weight"}
    assert "backbone.body.layer4.0.downsample.0.weight" in names
    default = MaskRCNN()
    assert default.name == "maskrcnn_resnet101_fpn"
    assert default.specs()[-2].shape == (81, 256, 1, 1)   # mask_fcn_logits: 81 classes


def test_a_side_of_any_multiple_of_64_builds_its_pyramid():
    """192 = 3 x 64: levels of 48, 24, 12, 6 and 3 cells, anchors for each."""
    cfg = MaskRCNNConfig(image_size=192, blocks=(1, 1, 1, 1), width=8, fpn_channels=16,
                         head_channels=32, classes=3, pre_nms=400, proposals=40,
                         detections=8, min_confidence=0.0)
    model = MaskRCNN(cfg)
    params = model.init(seed=1)
    image = np.random.default_rng(2).standard_normal((1, 3, 192, 192)).astype(np.float32)
    with quiet():
        eager = model.forward(E, params, image)
        graph = compile_inference(model, params, image.shape, fold=False, optimise=False,
                                  kernels="numpy").run(x=image)
    for got, want in zip(graph, eager):
        np.testing.assert_array_equal(got, want)
    assert eager[0].shape == (8, 4) and eager[3].shape == (8, 28, 28)


def test_the_proposal_layer_keeps_the_best_anchors_apart_and_pads():
    cfg = MaskRCNNConfig(pre_nms=3, proposals=3, rpn_box_weights=(1.0, 1.0, 1.0, 1.0))
    anchor_boxes = np.array([[0, 0, 10, 10], [20, 20, 40, 40], [50, 50, 70, 70],
                             [21, 21, 40, 40]], np.float32)
    objectness = np.array([0.1, 0.9, 0.5, 0.8], np.float32)
    deltas = np.zeros((4, 4), np.float32)
    deltas[2] = [0.5, 0.0, 0.0, 0.0]                  # moves anchor 2 by half its width
    boxes, valid = detection.proposals(E, objectness, deltas, anchor_boxes, cfg, 64)
    # the best three are anchors 1, 3 and 2; 3 overlaps 1 (IoU 0.9) and goes; anchor 2,
    # moved to x 60-80, is clipped to the 64-pixel image; the third row is padding
    np.testing.assert_array_equal(boxes, [[20, 20, 40, 40], [60, 50, 64, 64], [0, 0, 0, 0]])
    assert valid.tolist() == [True, True, False]

"""Mask R-CNN inference (He et al. 2017) as one static graph: Owl's fourth benchmark.

The configuration is the one Owl ported from Matterport's Keras implementation
(:class:`MaskRCNNConfig`: ResNet101-FPN, 81 classes, anchors 32-512 on strides 4-64,
RPN NMS 0.7 keeping 1000 proposals, RoIAlign 7x7 and 14x14, up to 100 detections after
NMS 0.3, a 512x512 input); the layers and parameter names are torchvision's
``maskrcnn_resnet50_fpn`` (v1 names), so its trained weights load by the mapping in
:meth:`MaskRCNN.torchvision_names`. The data-dependent stages have static shapes
(:mod:`.detection`): a run returns ``detections`` rows, padded, and their count.

Batch 1 (Owl's and Matterport's inference); the side must be a multiple of 64 (the
pyramid's nearest upsampling doubles each level exactly).

>>> m = MaskRCNN(MaskRCNNConfig(image_size=64, blocks=(1, 1, 1, 1), width=8,
...                             fpn_channels=16, head_channels=32, classes=5))
>>> m.name, m.input_shape
('maskrcnn_resnet14_fpn', (3, 64, 64))
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import detection
from .layers import Context, Conv, ConvBN, Dense
from .model import Model
from .resnet import Bottleneck


@dataclass(frozen=True)
class MaskRCNNConfig:
    """Mask R-CNN's settings (Matterport's names in brackets). ``blocks`` per ResNet
    stage: (3, 4, 23, 3) is ResNet101 (BACKBONE), (3, 4, 6, 3) ResNet50; ``width`` the
    stem's channels; ``box_weights`` and ``rpn_box_weights`` the box decodings' of the
    heads and of the RPN (Matterport's 1 / BBOX_STD_DEV for both; torchvision's RPN
    decodes with ``(1, 1, 1, 1)``)."""

    image_size: int = 512                        # IMAGE_MAX_DIM (square)
    blocks: tuple = (3, 4, 23, 3)
    width: int = 64
    classes: int = 81                            # NUM_CLASSES, background included
    anchor_scales: tuple = (32, 64, 128, 256, 512)   # RPN_ANCHOR_SCALES
    anchor_ratios: tuple = (0.5, 1.0, 2.0)           # RPN_ANCHOR_RATIOS
    strides: tuple = (4, 8, 16, 32, 64)              # BACKBONE_STRIDES
    fpn_channels: int = 256                      # TOP_DOWN_PYRAMID_SIZE
    head_channels: int = 1024                    # FPN_CLASSIF_FC_LAYERS_SIZE
    pre_nms: int = 6000                          # PRE_NMS_LIMIT
    rpn_nms: float = 0.7                         # RPN_NMS_THRESHOLD
    proposals: int = 1000                        # POST_NMS_ROIS_INFERENCE
    pool_size: int = 7                           # POOL_SIZE
    mask_pool_size: int = 14                     # MASK_POOL_SIZE
    detections: int = 100                        # DETECTION_MAX_INSTANCES
    detection_nms: float = 0.3                   # DETECTION_NMS_THRESHOLD
    min_confidence: float = 0.7                  # DETECTION_MIN_CONFIDENCE
    box_weights: tuple = (10.0, 10.0, 5.0, 5.0)  # 1 / BBOX_STD_DEV
    rpn_box_weights: tuple = (10.0, 10.0, 5.0, 5.0)  # 1 / RPN_BBOX_STD_DEV (torchvision: 1s)

    def __post_init__(self):
        if self.image_size <= 0 or self.image_size % 64:
            raise ValueError(f"MaskRCNNConfig: image_size must be a positive multiple of 64 "
                             f"(five pyramid levels, each half the one before), got "
                             f"{self.image_size}")
        if len(self.blocks) != 4 or min(self.blocks) < 1:
            raise ValueError(f"MaskRCNNConfig: blocks must be four stage lengths >= 1, got "
                             f"{self.blocks}")
        if self.classes < 2:
            raise ValueError(f"MaskRCNNConfig: classes counts the background too: at least "
                             f"2, got {self.classes}")
        if len(self.anchor_scales) != 5 or len(self.strides) != 5:
            raise ValueError("MaskRCNNConfig: one anchor scale per stride, five levels")


class MaskRCNN(Model):
    """Mask R-CNN on a ResNet-FPN backbone (see the module docstring). ``forward``
    takes a (1, 3, S, S) image and returns ``(boxes (D, 4), class_ids (D,), scores (D,),
    masks (D, 28, 28), count)``: the first ``count`` rows are detections, the rest zeros.
    A mask is the sigmoid of the detected class's 28x28 mask logits over its box.

    Example: ``model = MaskRCNN(); params = model.init(seed=0)``
    """

    def __init__(self, config: MaskRCNNConfig = MaskRCNNConfig()):
        c = self.config = config
        super().__init__((3, c.image_size, c.image_size), c.classes)
        self.name = f"maskrcnn_resnet{sum(c.blocks) * 3 + 2}_fpn"
        self.stem = self.add(ConvBN("backbone.body.conv1", "backbone.body.bn1", 3, c.width,
                                    7, 2, 3))
        self.stages, channels, stage_channels = [], c.width, []
        for stage, count in enumerate(c.blocks):
            planes, blocks = c.width * 2 ** stage, []
            for i in range(count):
                stride = 2 if stage > 0 and i == 0 else 1
                blocks.append(Bottleneck(self, f"backbone.body.layer{stage + 1}.{i}",
                                         channels, planes, stride))
                channels = planes * Bottleneck.expansion
            self.stages.append(blocks)
            stage_channels.append(channels)
        f = c.fpn_channels
        self.inner = [self.add(Conv(f"backbone.fpn.inner_blocks.{i}", ch, f, 1, bias=True))
                      for i, ch in enumerate(stage_channels)]
        self.outer = [self.add(Conv(f"backbone.fpn.layer_blocks.{i}", f, f, 3, padding=1,
                                    bias=True)) for i in range(4)]
        a = len(c.anchor_ratios)
        self.rpn_conv = self.add(Conv("rpn.head.conv", f, f, 3, padding=1, bias=True))
        self.rpn_logits = self.add(Conv("rpn.head.cls_logits", f, a, 1, bias=True))
        self.rpn_deltas = self.add(Conv("rpn.head.bbox_pred", f, 4 * a, 1, bias=True))
        h = c.head_channels
        self.fc6 = self.add(Dense("roi_heads.box_head.fc6", f * c.pool_size ** 2, h, "he"))
        self.fc7 = self.add(Dense("roi_heads.box_head.fc7", h, h, "he"))
        self.cls_score = self.add(Dense("roi_heads.box_predictor.cls_score", h, c.classes))
        self.bbox_pred = self.add(Dense("roi_heads.box_predictor.bbox_pred", h, 4 * c.classes))
        self.mask_convs = [self.add(Conv(f"roi_heads.mask_head.mask_fcn{i}", f, f, 3,
                                         padding=1, bias=True)) for i in range(1, 5)]
        # ConvTranspose2d's weight (in, out, 2, 2): conv2d_backward_input's layout
        self.deconv = self.add(Conv("roi_heads.mask_predictor.conv5_mask", f, f, 2, bias=True))
        self.mask_logits = self.add(Conv("roi_heads.mask_predictor.mask_fcn_logits", f,
                                         c.classes, 1, bias=True))

    # -- the network ---------------------------------------------------------------------
    def _pyramid(self, ctx: Context, x) -> list:
        """P2-P6 of torchvision's ``FeaturePyramidNetwork`` with ``LastLevelMaxPool``."""
        ns = ctx.ns
        x = ns.max_pool2d(ns.relu(self.stem(ctx, x)), 3, stride=2, padding=1)
        features = []
        for blocks in self.stages:
            for block in blocks:
                x = block(ctx, x)
            features.append(x)
        inner = self.inner[3](ctx, features[3])
        levels = [self.outer[3](ctx, inner)]
        for i in (2, 1, 0):
            inner = self.inner[i](ctx, features[i]) + ns.upsample_nearest2d(inner, 2)
            levels.insert(0, self.outer[i](ctx, inner))
        levels.append(ns.max_pool2d(levels[-1], 1, stride=2))
        return levels

    def _rpn(self, ctx: Context, levels):
        """Objectness logits (T,) and deltas (T, 4) of every anchor, level by level."""
        ns = ctx.ns
        logits, deltas = [], []
        for p in levels:
            t = ns.relu(self.rpn_conv(ctx, p))
            logits.append(detection.flatten_level(ns, self.rpn_logits(ctx, t), 1))
            deltas.append(detection.flatten_level(ns, self.rpn_deltas(ctx, t), 4))
        return ns.reshape(ns.concatenate(logits, axis=0), (-1,)), ns.concatenate(deltas, 0)

    def _forward(self, ctx: Context, x):
        ns, c = ctx.ns, self.config
        if tuple(x.shape) != (1,) + self.input_shape:
            raise ValueError(f"{self.name}: expected one image of shape "
                             f"{(1,) + self.input_shape}, got {tuple(x.shape)}")
        levels = self._pyramid(ctx, x)
        logits, deltas = self._rpn(ctx, levels)
        anchor_boxes = detection.anchors([tuple(p.shape[2:]) for p in levels], c.strides,
                                         c.anchor_scales, c.anchor_ratios)
        rois, valid = detection.proposals(ns, logits, deltas, anchor_boxes, c, c.image_size)
        pooled = detection.pyramid_roi_align(ns, levels[:4], rois, c.pool_size, c.strides)
        h = ns.relu(self.fc6(ctx, ns.reshape(pooled, (rois.shape[0], -1))))
        h = ns.relu(self.fc7(ctx, h))
        boxes, class_ids, scores, count = detection.detections(
            ns, self.cls_score(ctx, h), self.bbox_pred(ctx, h), rois, valid, c, c.image_size)
        return boxes, class_ids, scores, self._masks(ctx, levels[:4], boxes, class_ids), count

    def _masks(self, ctx: Context, levels, boxes, class_ids):
        """The mask head on the detections: each box's 28x28 mask of its class."""
        ns, c = ctx.ns, self.config
        y = detection.pyramid_roi_align(ns, levels, boxes, c.mask_pool_size, c.strides)
        for conv in self.mask_convs:
            y = ns.relu(conv(ctx, y))
        n, f, s, _ = y.shape
        y = ns.conv2d_backward_input(y, ctx[f"{self.deconv.name}.weight"], (n, f, 2 * s, 2 * s),
                                     stride=2)
        y = ns.relu(y + ns.reshape(ctx[f"{self.deconv.name}.bias"], (1, f, 1, 1)))
        logits = self.mask_logits(ctx, y)
        mine = ns.take_along_axis(logits, ns.reshape(class_ids, (n, 1, 1, 1)), axis=1)
        return ns.sigmoid(ns.reshape(mine, (n, 2 * s, 2 * s)))

    # -- weights -------------------------------------------------------------------------
    def torchvision_names(self) -> dict:
        """graphc's parameter name -> (torchvision ``maskrcnn_resnet50_fpn`` v1 state-dict
        name, whether the array is transposed): every name is torchvision's but the
        dense layers' weights, which graphc holds as (in, out). Since torchvision 0.13
        the FPN, RPN and mask-head convolutions sit one level deeper (``inner_blocks.0.0``,
        ``rpn.head.conv.0.0``, ``mask_head.0.0`` for ``mask_fcn1``): rename those first.
        Matterport's Keras weights map layer by layer the same way (``fpn_c2p2`` ->
        ``inner_blocks.0``, ``rpn_conv_shared`` -> ``rpn.head.conv``, its two-class RPN
        softmax -> the difference of its logits), with HWIO kernels transposed to OIHW.
        With torchvision's weights, give ``MaskRCNNConfig(rpn_box_weights=(1, 1, 1, 1))``
        (its RPN's box coder); the detection layer stays Matterport's (one class per
        proposal, ``min_confidence``), where torchvision scores every class.

        Example: ``params = {g: sd[t].T if flip else sd[t] for g, (t, flip) in names.items()}``
        """
        dense = {f"{d.name}.weight" for d in (self.fc6, self.fc7, self.cls_score,
                                              self.bbox_pred)}
        return {p.name: (p.name, p.name in dense) for p in self.specs()}


def maskrcnn(config: MaskRCNNConfig = MaskRCNNConfig()) -> MaskRCNN:
    """Mask R-CNN with Owl's configuration (ResNet101-FPN, 512x512, 81 classes).

    Example: ``model = maskrcnn(); params = model.init(seed=0)``
    """
    return MaskRCNN(config)

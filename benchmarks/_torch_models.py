"""graphc's benchmark models written in plain PyTorch (``torch.nn``, no
torchvision), layer for layer as ``graphc/neural`` builds them, with the same
parameter names, so graphc's arrays load into them (:func:`load_graphc_params`)
and both compute the same function.

- :class:`ResNet50`: ResNet v1.5 (stride on the 3x3 convolution), bias-free
  convolutions each followed by batch norm (eps 1e-5), 25,557,032 parameters;
- :class:`InceptionV3`: torchvision's layout without the auxiliary head, every
  convolution bias-free with batch norm (eps 0.001) and ReLU, dropout 0.5 before
  the classifier, 23,834,568 parameters;
- :class:`MnistCNN`: Owl's MNIST network: input / 256, conv 5x5 x 32 (same
  padding, bias), ReLU, max pool 2, dropout 0.1, dense 1024 + ReLU, dense 10.

Batch norm momentum is 0.1 (graphc's ``BN_MOMENTUM``). graphc's dense weights
are ``(in, out)`` where ``torch.nn.Linear`` holds ``(out, in)``: the loader
transposes them.

>>> m = MnistCNN()
>>> sum(p.numel() for p in m.parameters())
6434634
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


def conv_bn(in_c, out_c, kernel, stride=1, padding=0, eps=1e-5):
    """A bias-free convolution and its batch norm (graphc's ``ConvBN``), as a pair
    the caller names."""
    return (nn.Conv2d(in_c, out_c, kernel, stride, padding, bias=False),
            nn.BatchNorm2d(out_c, eps=eps, momentum=0.1))


# -- ResNet50 -----------------------------------------------------------------------------------
class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_c, planes, stride):
        super().__init__()
        out = planes * self.expansion
        self.conv1, self.bn1 = conv_bn(in_c, planes, 1)
        self.conv2, self.bn2 = conv_bn(planes, planes, 3, stride, 1)
        self.conv3, self.bn3 = conv_bn(planes, out, 1)
        self.downsample = (nn.Sequential(*conv_bn(in_c, out, 1, stride))
                           if stride != 1 or in_c != out else None)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        shortcut = x if self.downsample is None else self.downsample(x)
        return F.relu(y + shortcut)


class ResNet50(nn.Module):
    """ResNet50 v1.5, graphc's ``nn.resnet50()``. Example: ``ResNet50()(x)``"""

    def __init__(self, blocks=(3, 4, 6, 3), classes=1000, width=64):
        super().__init__()
        self.conv1, self.bn1 = conv_bn(3, width, 7, 2, 3)
        channels = width
        for stage, count in enumerate(blocks):
            planes = width * 2 ** stage
            layer = []
            for i in range(count):
                layer.append(Bottleneck(channels, planes, 2 if stage > 0 and i == 0 else 1))
                channels = planes * Bottleneck.expansion
            setattr(self, f"layer{stage + 1}", nn.Sequential(*layer))
        self.fc = nn.Linear(channels, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(x, 3, 2, 1)
        for stage in (self.layer1, self.layer2, self.layer3, self.layer4):
            x = stage(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# -- InceptionV3 --------------------------------------------------------------------------------
class BasicConv2d(nn.Module):
    """Convolution (no bias), batch norm (eps 0.001), ReLU."""

    def __init__(self, in_c, out_c, kernel, stride=1, padding=0):
        super().__init__()
        self.conv, self.bn = conv_bn(in_c, out_c, kernel, stride, padding, eps=0.001)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class _Branches(nn.Module):
    """Parallel branches concatenated on channels. ``plan`` lists, per branch, the
    steps: a module name (a ``BasicConv2d``), ``"avg"`` (3x3 average pool, stride
    1, same size), ``"max"`` (3x3 max pool, stride 2) or a tuple of module names
    (a split: every one reads the branch's value)."""

    plan: list = []

    def forward(self, x):
        outputs = []
        for steps in self.plan:
            y = x
            for step in steps:
                if step == "avg":
                    y = F.avg_pool2d(y, 3, 1, 1)
                elif step == "max":
                    y = F.max_pool2d(y, 3, 2)
                elif isinstance(step, tuple):
                    outputs.extend(getattr(self, s)(y) for s in step)
                    y = None
                else:
                    y = getattr(self, step)(y)
            if y is not None:
                outputs.append(y)
        return torch.cat(outputs, 1)


class InceptionA(_Branches):
    plan = [("branch1x1",), ("branch5x5_1", "branch5x5_2"),
            ("branch3x3dbl_1", "branch3x3dbl_2", "branch3x3dbl_3"), ("avg", "branch_pool")]

    def __init__(self, in_c, pool_features):
        super().__init__()
        self.branch1x1 = BasicConv2d(in_c, 64, 1)
        self.branch5x5_1 = BasicConv2d(in_c, 48, 1)
        self.branch5x5_2 = BasicConv2d(48, 64, 5, padding=2)
        self.branch3x3dbl_1 = BasicConv2d(in_c, 64, 1)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, 3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, 3, padding=1)
        self.branch_pool = BasicConv2d(in_c, pool_features, 1)


class InceptionB(_Branches):
    plan = [("branch3x3",), ("branch3x3dbl_1", "branch3x3dbl_2", "branch3x3dbl_3"), ("max",)]

    def __init__(self, in_c):
        super().__init__()
        self.branch3x3 = BasicConv2d(in_c, 384, 3, stride=2)
        self.branch3x3dbl_1 = BasicConv2d(in_c, 64, 1)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, 3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, 3, stride=2)


class InceptionC(_Branches):
    plan = [("branch1x1",), ("branch7x7_1", "branch7x7_2", "branch7x7_3"),
            ("branch7x7dbl_1", "branch7x7dbl_2", "branch7x7dbl_3", "branch7x7dbl_4",
             "branch7x7dbl_5"), ("avg", "branch_pool")]

    def __init__(self, in_c, c7):
        super().__init__()
        row, col = (0, 3), (3, 0)
        self.branch1x1 = BasicConv2d(in_c, 192, 1)
        self.branch7x7_1 = BasicConv2d(in_c, c7, 1)
        self.branch7x7_2 = BasicConv2d(c7, c7, (1, 7), padding=row)
        self.branch7x7_3 = BasicConv2d(c7, 192, (7, 1), padding=col)
        self.branch7x7dbl_1 = BasicConv2d(in_c, c7, 1)
        self.branch7x7dbl_2 = BasicConv2d(c7, c7, (7, 1), padding=col)
        self.branch7x7dbl_3 = BasicConv2d(c7, c7, (1, 7), padding=row)
        self.branch7x7dbl_4 = BasicConv2d(c7, c7, (7, 1), padding=col)
        self.branch7x7dbl_5 = BasicConv2d(c7, 192, (1, 7), padding=row)
        self.branch_pool = BasicConv2d(in_c, 192, 1)


class InceptionD(_Branches):
    plan = [("branch3x3_1", "branch3x3_2"),
            ("branch7x7x3_1", "branch7x7x3_2", "branch7x7x3_3", "branch7x7x3_4"), ("max",)]

    def __init__(self, in_c):
        super().__init__()
        self.branch3x3_1 = BasicConv2d(in_c, 192, 1)
        self.branch3x3_2 = BasicConv2d(192, 320, 3, stride=2)
        self.branch7x7x3_1 = BasicConv2d(in_c, 192, 1)
        self.branch7x7x3_2 = BasicConv2d(192, 192, (1, 7), padding=(0, 3))
        self.branch7x7x3_3 = BasicConv2d(192, 192, (7, 1), padding=(3, 0))
        self.branch7x7x3_4 = BasicConv2d(192, 192, 3, stride=2)


class InceptionE(_Branches):
    plan = [("branch1x1",), ("branch3x3_1", ("branch3x3_2a", "branch3x3_2b")),
            ("branch3x3dbl_1", "branch3x3dbl_2", ("branch3x3dbl_3a", "branch3x3dbl_3b")),
            ("avg", "branch_pool")]

    def __init__(self, in_c):
        super().__init__()
        self.branch1x1 = BasicConv2d(in_c, 320, 1)
        self.branch3x3_1 = BasicConv2d(in_c, 384, 1)
        self.branch3x3_2a = BasicConv2d(384, 384, (1, 3), padding=(0, 1))
        self.branch3x3_2b = BasicConv2d(384, 384, (3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = BasicConv2d(in_c, 448, 1)
        self.branch3x3dbl_2 = BasicConv2d(448, 384, 3, padding=1)
        self.branch3x3dbl_3a = BasicConv2d(384, 384, (1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = BasicConv2d(384, 384, (3, 1), padding=(1, 0))
        self.branch_pool = BasicConv2d(in_c, 192, 1)


class InceptionV3(nn.Module):
    """InceptionV3 without the auxiliary head, graphc's ``nn.inception_v3()``.
    Example: ``InceptionV3()(torch.zeros(1, 3, 299, 299))``"""

    def __init__(self, classes=1000, dropout=0.5):
        super().__init__()
        self.Conv2d_1a_3x3 = BasicConv2d(3, 32, 3, stride=2)
        self.Conv2d_2a_3x3 = BasicConv2d(32, 32, 3)
        self.Conv2d_2b_3x3 = BasicConv2d(32, 64, 3, padding=1)
        self.Conv2d_3b_1x1 = BasicConv2d(64, 80, 1)
        self.Conv2d_4a_3x3 = BasicConv2d(80, 192, 3)
        self.Mixed_5b = InceptionA(192, 32)
        self.Mixed_5c = InceptionA(256, 64)
        self.Mixed_5d = InceptionA(288, 64)
        self.Mixed_6a = InceptionB(288)
        self.Mixed_6b = InceptionC(768, 128)
        self.Mixed_6c = InceptionC(768, 160)
        self.Mixed_6d = InceptionC(768, 160)
        self.Mixed_6e = InceptionC(768, 192)
        self.Mixed_7a = InceptionD(768)
        self.Mixed_7b = InceptionE(1280)
        self.Mixed_7c = InceptionE(2048)
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(2048, classes)

    def forward(self, x):
        x = self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x)))
        x = F.max_pool2d(x, 3, 2)
        x = self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(x))
        x = F.max_pool2d(x, 3, 2)
        for name in ("Mixed_5b", "Mixed_5c", "Mixed_5d", "Mixed_6a", "Mixed_6b", "Mixed_6c",
                     "Mixed_6d", "Mixed_6e", "Mixed_7a", "Mixed_7b", "Mixed_7c"):
            x = getattr(self, name)(x)
        x = self.dropout(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
        return self.fc(x)


# -- Owl's MNIST CNN ----------------------------------------------------------------------------
class MnistCNN(nn.Module):
    """graphc's ``nn.MnistCNN()``. Example: ``MnistCNN()(torch.zeros(100, 1, 28, 28))``"""

    def __init__(self, image_size=28, classes=10, filters=32, hidden=1024, dropout=0.1):
        super().__init__()
        self.conv = nn.Conv2d(1, filters, 5, padding=2)
        self.dropout = nn.Dropout(dropout)
        self.fc1 = nn.Linear(filters * (image_size // 2) ** 2, hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv(x / 256.0)), 2)
        x = self.dropout(x)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


MODELS = {"resnet50": ResNet50, "inception_v3": InceptionV3, "mnist_cnn": MnistCNN}


def load_graphc_params(model: nn.Module, params: dict) -> None:
    """Copy graphc's arrays (name -> NumPy array, as ``Model.init`` makes them) into
    ``model``, transposing dense weights; every parameter and buffer of ``model``
    but batch norm's step counters must be given, and nothing else.

    Example: ``load_graphc_params(ResNet50(), graphc.neural.resnet50().init(0))``
    """
    state = model.state_dict()
    wanted = {k for k in state if not k.endswith("num_batches_tracked")}
    if wanted != set(params):
        missing, extra = sorted(wanted - set(params)), sorted(set(params) - wanted)
        raise ValueError(f"{type(model).__name__}: graphc's parameters do not match: "
                         f"missing {missing[:5]}, unexpected {extra[:5]}")
    linear = {f"{n}.weight" for n, m in model.named_modules() if isinstance(m, nn.Linear)}
    with torch.no_grad():
        for name in wanted:
            value = params[name].T if name in linear else params[name]
            if tuple(value.shape) != tuple(state[name].shape):
                raise ValueError(f"{type(model).__name__}: {name} is {tuple(value.shape)} in "
                                 f"graphc, {tuple(state[name].shape)} here")
            state[name].copy_(torch.from_numpy(np.ascontiguousarray(value)))

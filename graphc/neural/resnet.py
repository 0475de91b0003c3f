"""ResNet v1.5 (torchvision's layout): the stride of a downsampling
bottleneck sits on its 3x3 convolution, not on the first 1x1.

ResNet50 has 25,557,032 parameters at 1000 classes. Its global average pool
makes any input of at least 32 x 32 work (224 x 224 is the design size).

>>> m = resnet50()
>>> m.num_parameters()
25557032
"""
from __future__ import annotations

from .layers import Context, ConvBN, Dense
from .model import Model


class Bottleneck:
    """1x1 reduce -> 3x3 (stride here, v1.5) -> 1x1 expand (x4), plus the
    shortcut (a strided 1x1 convolution + batch norm where the shape changes)."""

    expansion = 4

    def __init__(self, model: Model, name: str, in_channels: int, planes: int, stride: int):
        out = planes * self.expansion
        self.c1 = model.add(ConvBN(f"{name}.conv1", f"{name}.bn1", in_channels, planes, 1))
        self.c2 = model.add(ConvBN(f"{name}.conv2", f"{name}.bn2", planes, planes, 3,
                                   stride, 1))
        self.c3 = model.add(ConvBN(f"{name}.conv3", f"{name}.bn3", planes, out, 1))
        self.down = None
        if stride != 1 or in_channels != out:
            self.down = model.add(ConvBN(f"{name}.downsample.0", f"{name}.downsample.1",
                                         in_channels, out, 1, stride))

    def __call__(self, ctx: Context, x):
        relu = ctx.ns.relu
        y = relu(self.c1(ctx, x))
        y = relu(self.c2(ctx, y))
        y = self.c3(ctx, y)
        shortcut = x if self.down is None else self.down(ctx, x)
        return relu(y + shortcut)


class ResNet(Model):
    """A bottleneck ResNet with ``blocks`` per stage (ResNet50: (3, 4, 6, 3)).

    Example: ``ResNet((3, 4, 6, 3), classes=1000)``
    """

    def __init__(self, blocks=(3, 4, 6, 3), classes: int = 1000, image_size: int = 224,
                 width: int = 64):
        super().__init__((3, image_size, image_size), classes)
        self.name = f"resnet{sum(blocks) * 3 + 2}"
        self.stem = self.add(ConvBN("conv1", "bn1", 3, width, 7, 2, 3))
        self.blocks = []
        channels = width
        for stage, count in enumerate(blocks):
            planes = width * 2 ** stage
            for i in range(count):
                stride = 2 if stage > 0 and i == 0 else 1
                block = Bottleneck(self, f"layer{stage + 1}.{i}", channels, planes, stride)
                self.blocks.append(block)
                channels = planes * Bottleneck.expansion
        self.fc = self.add(Dense("fc", channels, classes))

    def _forward(self, ctx: Context, x):
        ns = ctx.ns
        x = ns.relu(self.stem(ctx, x))
        x = ns.max_pool2d(x, 3, stride=2, padding=1)
        for block in self.blocks:
            x = block(ctx, x)
        return self.fc(ctx, ns.global_avg_pool2d(x))


def resnet50(classes: int = 1000, image_size: int = 224) -> ResNet:
    """ResNet50 v1.5 (torchvision's ``resnet50``): 25,557,032 parameters.

    Example: ``model = resnet50(); params = model.init(seed=0)``
    """
    return ResNet((3, 4, 6, 3), classes, image_size)

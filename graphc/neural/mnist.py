"""Owl's MNIST convolutional network (the example of Owl's neural module):

    input (N, 1, 28, 28) / 256 -> conv 5x5, 32 filters, same padding, ReLU
    -> max pool 2 -> dropout 0.1 -> dense 1024, ReLU -> dense 10 (logits)

trained with softmax cross-entropy. The convolution has a bias, as in Owl.

>>> import numpy as np, graphc.eager as E
>>> m = MnistCNN()
>>> m.forward(E, m.init(0), np.zeros((2, 1, 28, 28), np.float32)).shape
(2, 10)
"""
from __future__ import annotations

from .layers import Context, Conv, Dense
from .model import Model


class MnistCNN(Model):
    """Owl's MNIST CNN for ``image_size`` x ``image_size`` grey images (28 by
    default; any even size works).

    Example: ``model = MnistCNN(); params = model.init(seed=0)``
    """

    name = "mnist-cnn"

    def __init__(self, image_size: int = 28, classes: int = 10, filters: int = 32,
                 hidden: int = 1024, dropout: float = 0.1):
        super().__init__((1, image_size, image_size), classes)
        if image_size % 2:
            raise ValueError(f"MnistCNN: image_size must be even (2x2 pooling), got {image_size}")
        self.dropout = dropout
        pooled = filters * (image_size // 2) ** 2
        self.conv = self.add(Conv("conv", 1, filters, 5, padding="same", bias=True))
        self.fc1 = self.add(Dense("fc1", pooled, hidden, init="he"))
        self.fc2 = self.add(Dense("fc2", hidden, classes))

    def _forward(self, ctx: Context, x):
        ns = ctx.ns
        x = self.conv(ctx, x / 256.0)
        x = ns.max_pool2d(ns.relu(x), 2)
        if ctx.training and self.dropout:
            x = ns.dropout(x, self.dropout, training=True)
        x = ns.relu(self.fc1(ctx, ns.flatten(x)))
        return self.fc2(ctx, x)

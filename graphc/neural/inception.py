"""InceptionV3 in torchvision's layout, without the auxiliary classifier:
every convolution is bias-free and followed by batch norm (eps 0.001) and ReLU.

It has 23,834,568 parameters at 1000 classes. The smallest input it accepts
is 75 x 75 (299 x 299 is the design size).

>>> inception_v3().num_parameters()
23834568
"""
from __future__ import annotations

from .layers import Context, ConvBN, Dense
from .model import Model

EPS = 0.001


class _Branches:
    """A block of parallel branches whose outputs are concatenated on channels.

    Each branch is a list of steps: a ``ConvBN`` (then ReLU), ``("avg", k)``
    (average pool, stride 1, same size) or ``("max", k, s)`` (max pool, no padding);
    a branch whose last step is a tuple of ``ConvBN``s splits into all of them.
    """

    def __init__(self, model: Model, name: str):
        self.model, self.name, self.branches = model, name, []

    def conv(self, branch, in_c, out_c, kernel, stride=1, padding=0):
        return self.model.add(ConvBN(f"{self.name}.{branch}.conv", f"{self.name}.{branch}.bn",
                                     in_c, out_c, kernel, stride, padding, EPS))

    def branch(self, *steps):
        self.branches.append(steps)

    def __call__(self, ctx: Context, x):
        ns, outputs = ctx.ns, []
        for steps in self.branches:
            y = x
            for step in steps:
                if isinstance(step, ConvBN):
                    y = ns.relu(step(ctx, y))
                elif step[0] == "avg":
                    y = ns.avg_pool2d(y, step[1], stride=1, padding=step[1] // 2)
                elif step[0] == "max":
                    y = ns.max_pool2d(y, step[1], stride=step[2])
                else:  # a split: every convolution reads y
                    outputs.extend(ns.relu(s(ctx, y)) for s in step)
                    y = None
            if y is not None:
                outputs.append(y)
        return ns.concatenate(outputs, axis=1)


def _block_a(model, name, in_c, pool_features):
    b = _Branches(model, name)
    b.branch(b.conv("branch1x1", in_c, 64, 1))
    b.branch(b.conv("branch5x5_1", in_c, 48, 1), b.conv("branch5x5_2", 48, 64, 5, padding=2))
    b.branch(b.conv("branch3x3dbl_1", in_c, 64, 1),
             b.conv("branch3x3dbl_2", 64, 96, 3, padding=1),
             b.conv("branch3x3dbl_3", 96, 96, 3, padding=1))
    b.branch(("avg", 3), b.conv("branch_pool", in_c, pool_features, 1))
    return b, 224 + pool_features


def _block_b(model, name, in_c):
    b = _Branches(model, name)
    b.branch(b.conv("branch3x3", in_c, 384, 3, stride=2))
    b.branch(b.conv("branch3x3dbl_1", in_c, 64, 1),
             b.conv("branch3x3dbl_2", 64, 96, 3, padding=1),
             b.conv("branch3x3dbl_3", 96, 96, 3, stride=2))
    b.branch(("max", 3, 2))
    return b, 384 + 96 + in_c


def _block_c(model, name, in_c, c7):
    b = _Branches(model, name)
    row, col = ((0, 3), (3, 0))
    b.branch(b.conv("branch1x1", in_c, 192, 1))
    b.branch(b.conv("branch7x7_1", in_c, c7, 1),
             b.conv("branch7x7_2", c7, c7, (1, 7), padding=row),
             b.conv("branch7x7_3", c7, 192, (7, 1), padding=col))
    b.branch(b.conv("branch7x7dbl_1", in_c, c7, 1),
             b.conv("branch7x7dbl_2", c7, c7, (7, 1), padding=col),
             b.conv("branch7x7dbl_3", c7, c7, (1, 7), padding=row),
             b.conv("branch7x7dbl_4", c7, c7, (7, 1), padding=col),
             b.conv("branch7x7dbl_5", c7, 192, (1, 7), padding=row))
    b.branch(("avg", 3), b.conv("branch_pool", in_c, 192, 1))
    return b, 768


def _block_d(model, name, in_c):
    b = _Branches(model, name)
    b.branch(b.conv("branch3x3_1", in_c, 192, 1), b.conv("branch3x3_2", 192, 320, 3, stride=2))
    b.branch(b.conv("branch7x7x3_1", in_c, 192, 1),
             b.conv("branch7x7x3_2", 192, 192, (1, 7), padding=(0, 3)),
             b.conv("branch7x7x3_3", 192, 192, (7, 1), padding=(3, 0)),
             b.conv("branch7x7x3_4", 192, 192, 3, stride=2))
    b.branch(("max", 3, 2))
    return b, 320 + 192 + in_c


def _block_e(model, name, in_c):
    b = _Branches(model, name)
    b.branch(b.conv("branch1x1", in_c, 320, 1))
    b.branch(b.conv("branch3x3_1", in_c, 384, 1),
             (b.conv("branch3x3_2a", 384, 384, (1, 3), padding=(0, 1)),
              b.conv("branch3x3_2b", 384, 384, (3, 1), padding=(1, 0))))
    b.branch(b.conv("branch3x3dbl_1", in_c, 448, 1),
             b.conv("branch3x3dbl_2", 448, 384, 3, padding=1),
             (b.conv("branch3x3dbl_3a", 384, 384, (1, 3), padding=(0, 1)),
              b.conv("branch3x3dbl_3b", 384, 384, (3, 1), padding=(1, 0))))
    b.branch(("avg", 3), b.conv("branch_pool", in_c, 192, 1))
    return b, 320 + 768 + 768 + 192


class InceptionV3(Model):
    """InceptionV3 (torchvision's ``inception_v3(aux_logits=False)``); dropout 0.5
    before the classifier in training mode.

    Example: ``model = InceptionV3(); model.forward(E, model.init(0), images)``
    """

    name = "inception_v3"

    def __init__(self, classes: int = 1000, image_size: int = 299, dropout: float = 0.5):
        super().__init__((3, image_size, image_size), classes)
        if image_size < 75:
            raise ValueError(f"InceptionV3: inputs must be at least 75 x 75, got {image_size}")
        self.dropout = dropout

        def stem(name, in_c, out_c, kernel, stride=1, padding=0):
            return self.add(ConvBN(f"{name}.conv", f"{name}.bn", in_c, out_c, kernel, stride,
                                   padding, EPS))

        self.stem = [stem("Conv2d_1a_3x3", 3, 32, 3, 2), stem("Conv2d_2a_3x3", 32, 32, 3),
                     stem("Conv2d_2b_3x3", 32, 64, 3, padding=1), "pool",
                     stem("Conv2d_3b_1x1", 64, 80, 1), stem("Conv2d_4a_3x3", 80, 192, 3), "pool"]
        c = 192
        self.blocks = []
        for name, make, args in [("Mixed_5b", _block_a, (32,)), ("Mixed_5c", _block_a, (64,)),
                                 ("Mixed_5d", _block_a, (64,)), ("Mixed_6a", _block_b, ()),
                                 ("Mixed_6b", _block_c, (128,)), ("Mixed_6c", _block_c, (160,)),
                                 ("Mixed_6d", _block_c, (160,)), ("Mixed_6e", _block_c, (192,)),
                                 ("Mixed_7a", _block_d, ()), ("Mixed_7b", _block_e, ()),
                                 ("Mixed_7c", _block_e, ())]:
            block, c = make(self, name, c, *args)
            self.blocks.append(block)
        self.fc = self.add(Dense("fc", c, classes))

    def _forward(self, ctx: Context, x):
        ns = ctx.ns
        for step in self.stem:
            x = ns.max_pool2d(x, 3, stride=2) if step == "pool" else ns.relu(step(ctx, x))
        for block in self.blocks:
            x = block(ctx, x)
        x = ns.global_avg_pool2d(x)
        if ctx.training and self.dropout:
            x = ns.dropout(x, self.dropout, training=True)
        return self.fc(ctx, x)


def inception_v3(classes: int = 1000, image_size: int = 299) -> InceptionV3:
    """InceptionV3 without the auxiliary head: 23,834,568 parameters.

    Example: ``model = inception_v3(); params = model.init(seed=0)``
    """
    return InceptionV3(classes, image_size)

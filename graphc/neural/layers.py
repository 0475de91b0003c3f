"""The building blocks of the models: parameter declarations and the layers
that read them, written once against a namespace (``graphc.ndarray`` builds
graph nodes, ``graphc.eager`` computes on NumPy arrays).

A layer knows the names, shapes and initialisation of its parameters
(:class:`Param`) and computes its output from a :class:`Context`, which holds
the namespace, the parameter values by name and the mode (training or
inference). Names follow torchvision (``layer1.0.conv1.weight``,
``layer1.0.bn1.running_mean``) so the layouts are easy to compare.

>>> import numpy as np, graphc.eager as E
>>> dense = Dense("fc", 4, 3)
>>> [p.name for p in dense.params()]
['fc.weight', 'fc.bias']
>>> params = {"fc.weight": np.ones((4, 3), np.float32), "fc.bias": np.zeros(3, np.float32)}
>>> dense(Context(E, params), np.ones((2, 4), np.float32)).tolist()
[[4.0, 4.0, 4.0], [4.0, 4.0, 4.0]]
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

#: PyTorch's default: the running statistics move 10% towards each batch's
BN_MOMENTUM = 0.1


@dataclass(frozen=True)
class Param:
    """One named array of a model.

    ``init`` is ``"he"`` (normal, std sqrt(2 / fan_in): layers followed by
    ReLU), ``"glorot"`` (uniform, limit sqrt(6 / (fan_in + fan_out))),
    ``"zeros"`` or ``"ones"``. ``trainable=False`` marks state (batch norm's
    running statistics): initialised and carried along, never differentiated,
    not counted as a parameter.
    """
    name: str
    shape: tuple
    init: str
    fan_in: int = 1
    fan_out: int = 1
    trainable: bool = True

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def initial(self, rng: np.random.Generator) -> np.ndarray:
        """A float32 array drawn (or filled) as ``init`` says."""
        if self.init == "he":
            value = rng.standard_normal(self.shape) * math.sqrt(2.0 / self.fan_in)
        elif self.init == "glorot":
            limit = math.sqrt(6.0 / (self.fan_in + self.fan_out))
            value = rng.uniform(-limit, limit, self.shape)
        elif self.init == "zeros":
            value = np.zeros(self.shape)
        elif self.init == "ones":
            value = np.ones(self.shape)
        else:
            raise ValueError(f"Param {self.name!r}: unknown init {self.init!r}; expected "
                             "'he', 'glorot', 'zeros' or 'ones'")
        return np.ascontiguousarray(value, dtype=np.float32)


class Context:
    """What a forward pass reads: the namespace, the values by name, the mode.

    In training mode each batch norm puts its batch statistics in
    ``batch_stats[bn_name] = (mean, biased variance, count)`` so the caller can
    update the running statistics.

    Example: ``Context(graphc.eager, params, training=True)``
    """

    def __init__(self, ns, params, training: bool = False):
        self.ns, self.params, self.training = ns, params, training
        self.batch_stats: dict[str, tuple] = {}

    def __getitem__(self, name):
        try:
            return self.params[name]
        except KeyError:
            raise KeyError(f"forward: no parameter {name!r} among the {len(self.params)} "
                           "given; build them with model.init(seed)") from None

    def has(self, name) -> bool:
        return name in self.params


def _pair(v) -> tuple:
    return (v, v) if isinstance(v, int) else tuple(v)


class Conv:
    """A 2-D convolution, weight ``(out, in, kh, kw)``, optional bias ``(out,)``.

    ``padding`` is anything ``conv2d`` accepts (an int, a pair, ``"same"``).
    Example: ``Conv("conv1", 3, 64, 7, stride=2, padding=3)``
    """

    def __init__(self, name, in_channels, out_channels, kernel, stride=1, padding=0,
                 bias=False):
        self.name, self.in_channels, self.out_channels = name, in_channels, out_channels
        self.kernel, self.stride, self.padding, self.bias = _pair(kernel), stride, padding, bias

    def params(self) -> list[Param]:
        kh, kw = self.kernel
        fan_in = self.in_channels * kh * kw
        weight = Param(f"{self.name}.weight", (self.out_channels, self.in_channels, kh, kw),
                       "he", fan_in, self.out_channels * kh * kw)
        return [weight] + ([Param(f"{self.name}.bias", (self.out_channels,), "zeros")]
                           if self.bias else [])

    def __call__(self, ctx: Context, x, bias: bool = None):
        y = ctx.ns.conv2d(x, ctx[f"{self.name}.weight"], stride=self.stride,
                          padding=self.padding)
        if self.bias if bias is None else bias:
            y = y + ctx.ns.reshape(ctx[f"{self.name}.bias"], (1, self.out_channels, 1, 1))
        return y


class BatchNorm:
    """Batch normalisation over axis 1: ``weight`` (gamma), ``bias`` (beta) and
    the state ``running_mean``, ``running_var``.

    Example: ``BatchNorm("bn1", 64, eps=1e-5)``
    """

    def __init__(self, name, channels, eps=1e-5):
        self.name, self.channels, self.eps = name, channels, eps

    def params(self) -> list[Param]:
        c, n = (self.channels,), self.name
        return [Param(f"{n}.weight", c, "ones"), Param(f"{n}.bias", c, "zeros"),
                Param(f"{n}.running_mean", c, "zeros", trainable=False),
                Param(f"{n}.running_var", c, "ones", trainable=False)]

    def __call__(self, ctx: Context, x):
        n, ns = self.name, ctx.ns
        gamma, beta = ctx[f"{n}.weight"], ctx[f"{n}.bias"]
        if ctx.training:
            y, mean, var = ns.batch_norm_train(x, gamma, beta, eps=self.eps)
            count = x.shape[0] * x.shape[2] * x.shape[3]
            ctx.batch_stats[n] = (mean, var, count)
            return y
        return ns.batch_norm(x, gamma, beta, ctx[f"{n}.running_mean"],
                             ctx[f"{n}.running_var"], eps=self.eps)


class ConvBN:
    """A convolution without bias followed by batch norm (torchvision's
    ``BasicConv2d`` without its ReLU). After :func:`fold_batchnorm` the
    parameters hold ``{conv}.bias`` and no batch norm entries, and the layer
    computes ``conv2d + bias``.

    Example: ``ConvBN("layer1.0.conv1", "layer1.0.bn1", 64, 64, 1)``
    """

    def __init__(self, conv_name, bn_name, in_channels, out_channels, kernel, stride=1,
                 padding=0, eps=1e-5):
        self.conv = Conv(conv_name, in_channels, out_channels, kernel, stride, padding)
        self.bn = BatchNorm(bn_name, out_channels, eps)

    def params(self) -> list[Param]:
        return self.conv.params() + self.bn.params()

    def __call__(self, ctx: Context, x):
        if ctx.has(f"{self.conv.name}.bias") and not ctx.has(f"{self.bn.name}.weight"):
            if ctx.training:
                raise ValueError(f"{self.conv.name}: batch norm was folded into this "
                                 "convolution; folded parameters are for inference only")
            return self.conv(ctx, x, bias=True)
        return self.bn(ctx, self.conv(ctx, x))


class Dense:
    """``x @ weight + bias`` with ``weight`` of shape ``(in, out)`` (Glorot
    uniform), ``bias`` zeros.

    Example: ``Dense("fc", 2048, 1000)``
    """

    def __init__(self, name, in_features, out_features, init: Optional[str] = None):
        self.name, self.in_features, self.out_features = name, in_features, out_features
        self.init = init or "glorot"

    def params(self) -> list[Param]:
        i, o = self.in_features, self.out_features
        return [Param(f"{self.name}.weight", (i, o), self.init, i, o),
                Param(f"{self.name}.bias", (o,), "zeros")]

    def __call__(self, ctx: Context, x):
        return ctx.ns.linear(x, ctx[f"{self.name}.weight"], ctx[f"{self.name}.bias"])

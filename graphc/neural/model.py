"""The model base class: a list of layers that declare their parameters, and
a forward pass written once against a namespace.

A subclass registers its layers with :meth:`Model.add` while it builds itself
and implements ``_forward(ctx, x)``. Everything else (initialisation, counts,
the names of parameters and state, batch-norm statistics) is shared.

>>> from graphc.neural import MnistCNN
>>> m = MnistCNN()
>>> m.num_parameters(), m.input_shape
(6434634, (1, 28, 28))
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .compiled import CompiledModel
from .layers import BN_MOMENTUM, ConvBN, Context, Param


class Model(CompiledModel):
    """A network: ``init(seed)`` makes its arrays, ``forward(ns, params, x)`` runs it;
    ``compile(inputs, is_train, use_graph, sequential)`` then ``train_one_batch``
    and ``model(x)`` train and infer with arrays it holds (see :mod:`.compiled`).

    Attributes: ``name``, ``input_shape`` (C, H, W) it was designed for,
    ``classes``; inputs of other spatial sizes work where the architecture
    allows (see each model).
    """

    name = "model"

    def __init__(self, input_shape, classes):
        self.input_shape, self.classes = tuple(input_shape), int(classes)
        self._layers: list = []

    def add(self, layer):
        """Register ``layer`` (its parameters become the model's); returns it."""
        self._layers.append(layer)
        return layer

    # -- parameters and state -------------------------------------------------------
    def specs(self) -> list[Param]:
        """Every array of the model in a fixed order: parameters and state."""
        out = [p for layer in self._layers for p in layer.params()]
        names = [p.name for p in out]
        if len(set(names)) != len(names):
            duplicate = next(n for n in names if names.count(n) > 1)
            raise ValueError(f"{self.name}: parameter name {duplicate!r} declared twice")
        return out

    def parameter_names(self) -> list[str]:
        """Names of the trainable arrays (what the optimiser updates)."""
        return [p.name for p in self.specs() if p.trainable]

    def state_names(self) -> list[str]:
        """Names of the non-trainable arrays (batch norm running statistics)."""
        return [p.name for p in self.specs() if not p.trainable]

    def num_parameters(self) -> int:
        """The number of trainable scalars (running statistics not counted).

        Example: ``resnet50().num_parameters() == 25_557_032``
        """
        return sum(p.size for p in self.specs() if p.trainable)

    def init(self, seed: int = 0) -> dict[str, np.ndarray]:
        """Fresh float32 arrays for every parameter and state, by name: convolutions
        He normal, dense layers Glorot uniform (He for those followed by ReLU), biases
        0, batch norm gamma 1, beta 0, running mean 0, running variance 1.

        Example: ``params = resnet50().init(seed=0)``
        """
        rng = np.random.default_rng(seed)
        return {p.name: p.initial(rng) for p in self.specs()}

    def conv_bn_layers(self) -> list[ConvBN]:
        """The convolution + batch norm pairs (what :func:`fold_batchnorm` folds)."""
        return [layer for layer in self._layers if isinstance(layer, ConvBN)]

    # -- computing ------------------------------------------------------------------
    def forward(self, ns, params, x, training: bool = False,
                batch_stats: Optional[dict] = None):
        """The logits of ``x`` (N, C, H, W), computed with namespace ``ns``
        (``graphc.ndarray`` or ``graphc.eager``) from ``params`` (name -> values of
        ``ns``, or NumPy arrays: in graph mode they become constants). With
        ``training=True`` batch norm uses batch statistics and dropout is active;
        pass a dict as ``batch_stats`` to receive ``bn name -> (mean, var, count)``.

        Example: ``logits = model.forward(graphc.eager, params, images)``
        """
        ctx = Context(ns, params, training)
        logits = self._forward(ctx, x)
        if batch_stats is not None:
            batch_stats.update(ctx.batch_stats)
        return logits

    def _forward(self, ctx: Context, x):
        raise NotImplementedError

    def loss(self, ns, logits, labels):
        """Mean softmax cross-entropy of ``logits`` against integer ``labels`` (N,).

        Example: ``model.loss(N, logits, N.var("labels", (64,), np.int64))``
        """
        return ns.softmax_cross_entropy(logits, ns.one_hot(labels, self.classes,
                                                           dtype=logits.dtype))

    def running_stat_updates(self, ns, params, batch_stats, momentum: float = BN_MOMENTUM):
        """New running statistics from one training batch's ``batch_stats`` (as
        filled by ``forward``), PyTorch's rule: ``r <- (1 - momentum) r + momentum b``
        with the unbiased batch variance. Returns name -> new value.

        Example: ``new = model.running_stat_updates(E, params, stats)``
        """
        new = {}
        for bn, (mean, var, count) in batch_stats.items():
            unbiased = count / max(count - 1, 1)
            rm, rv = params[f"{bn}.running_mean"], params[f"{bn}.running_var"]
            new[f"{bn}.running_mean"] = rm * (1.0 - momentum) + mean * momentum
            new[f"{bn}.running_var"] = rv * (1.0 - momentum) + var * (momentum * unbiased)
        return new

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.name}: input {self.input_shape}, "
                f"{self.classes} classes, {self.num_parameters():,} parameters>")

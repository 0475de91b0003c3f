"""SINGA's model API: ``model.compile(inputs, is_train, use_graph, sequential)``
once, then ``model.train_one_batch(x, y)`` and ``model(x)``; one flag decides
whether the same code runs eagerly (``graphc.eager``, every op at once) or
as a traced, compiled graph (``graphc.trace``), serially or in parallel.

The model's arrays (parameters, running statistics, optimiser slots) are
:class:`graphc.State` objects: the training step written once reads them and
``assign``s their new values, which eagerly copies at once and, traced,
becomes the graph's update edges. Switching modes keeps training where it was.

Example::

    model = MnistCNN()
    model.compile([x_batch, y_batch], is_train=True, use_graph=True, sequential=True,
                  optimiser=AdaGrad(0.005))
    for xb, yb in batches(x, y, 100):
        loss = model.train_one_batch(xb, yb)
    model.eval()
    logits = model(x_test_batch)
"""
from __future__ import annotations

import functools
from typing import Optional

import numpy as np

from .. import eager as E
from .. import ndarray as N
from ..algodiff.tape import Traced as _TapeValue
from ..tracing import State, trace


def _plain(value):
    """A batch statistic recorded on the eager tape, as its array (no gradient)."""
    return value.value if isinstance(value, _TapeValue) else value


class CompiledModel:
    """The ``compile`` / ``train_one_batch`` / ``__call__`` half of :class:`Model`."""

    training = False
    use_graph = False

    def compile(self, inputs, is_train: bool = True, use_graph: bool = True,
                sequential: bool = True, *, optimiser=None, params: Optional[dict] = None,
                seed: int = 0, **compile_options) -> None:
        """Get ready to train (``is_train``) or infer, eagerly (``use_graph=False``)
        or through compiled graphs (``sequential=False``: the parallel schedule).
        ``inputs`` are example batches (``[x]`` or ``[x, labels]``): with a graph the
        step for their shapes is traced and compiled now (other shapes later, on
        first use). The arrays start from ``params`` or ``init(seed)``, unless the
        model was compiled before (then training goes on from where it was).
        ``compile_options`` go to :func:`graphc.compile`.

        Example: ``model.compile([xb, yb], is_train=True, use_graph=True, optimiser=SGD(0.1))``
        """
        if is_train and optimiser is None and getattr(self, "optimiser", None) is None:
            raise ValueError(f"{self.name}.compile: training needs an optimiser= (SGD, AdaGrad, "
                             "Adam)")
        if not hasattr(self, "_states") or params is not None:
            initial = self.init(seed) if params is None else params
            self._states = {p.name: State(np.asarray(initial[p.name], np.float32), name=p.name)
                            for p in self.specs()}
        if optimiser is not None:
            self.optimiser = optimiser
            trainable = {n: self._states[n].numpy() for n in self.parameter_names()}
            self._slots = {name: State(value, name=name)
                           for name, value in optimiser.init_eager(trainable).items()}
        self.training, self.use_graph = bool(is_train), bool(use_graph)
        schedule = "serial" if sequential else "parallel"
        options = dict(compile_options, schedule=schedule, seed=seed)
        self._train_graph = trace(functools.partial(self._train_step, N), **options)
        self._predict_graph = trace(functools.partial(self._predict, N), **options)
        E.random.seed(seed)
        inputs = list(inputs)
        if use_graph and inputs:
            x = np.asarray(inputs[0], np.float32)
            if self.training and len(inputs) > 1:
                self._train_graph.executable(x, np.asarray(inputs[1], np.int64))
            else:
                self._predict_graph.executable(x)

    def _ready(self, what):
        if not hasattr(self, "_train_graph"):
            raise RuntimeError(f"{self.name}.{what}: call compile(inputs, is_train, use_graph, "
                               "sequential) first")

    def train(self) -> None:
        """Training mode: ``model(x, labels)`` takes a step. Example: ``model.train()``"""
        self.training = True

    def eval(self) -> None:
        """Inference mode: ``model(x)`` gives logits. Example: ``model.eval()``"""
        self.training = False

    # -- the computations, written once against a namespace --------------------------------
    def _train_step(self, ns, x, labels):
        names = self.parameter_names()
        values = {n: s.read() for n, s in self._states.items()}
        stats: dict = {}

        def loss_of(*arrays):
            params = dict(values, **dict(zip(names, arrays)))
            logits = self.forward(ns, params, x, training=True, batch_stats=stats)
            return self.loss(ns, logits, labels)

        loss, grads = ns.value_and_grad(loss_of, argnums=tuple(range(len(names))))(
            *[values[n] for n in names])
        self.optimiser.apply(ns, {n: self._states[n] for n in names}, dict(zip(names, grads)),
                             self._slots)
        plain = {bn: tuple(_plain(v) for v in s) for bn, s in stats.items()}
        for name, value in self.running_stat_updates(ns, values, plain).items():
            self._states[name].assign(value)
        return loss

    def _predict(self, ns, x):
        return self.forward(ns, {n: s.read() for n, s in self._states.items()}, x)

    # -- running ---------------------------------------------------------------------------
    def train_one_batch(self, x, labels) -> float:
        """One optimiser step on a batch; returns its loss (before the update).

        Example: ``loss = model.train_one_batch(images, labels)``
        """
        self._ready("train_one_batch")
        x, labels = np.asarray(x, np.float32), np.asarray(labels, np.int64)
        if self.use_graph:
            return float(self._train_graph(x, labels))
        return float(self._train_step(E, x, labels))

    def __call__(self, x, labels=None):
        """SINGA's call: in training mode with ``labels``, :meth:`train_one_batch`;
        otherwise the inference logits of ``x`` (running statistics, no dropout).

        Example: ``logits = model(images)``
        """
        self._ready("__call__")
        if self.training and labels is not None:
            return self.train_one_batch(x, labels)
        x = np.asarray(x, np.float32)
        if self.use_graph:
            return self._predict_graph(x)
        return self._predict(E, x)

    def params(self) -> dict[str, np.ndarray]:
        """Copies of the parameters and running statistics, by name."""
        self._ready("params")
        return {n: s.numpy() for n, s in self._states.items()}

    def optimiser_state(self) -> dict[str, np.ndarray]:
        """Copies of the optimiser's state, by variable name."""
        self._ready("optimiser_state")
        return {n: s.numpy() for n, s in self._slots.items()}

    def graph(self, x, labels=None):
        """The compiled graph (an :class:`~graphc.Executable`) for these shapes: the
        training step with ``labels``, else inference. Example: ``model.graph(xb, yb).stats()``"""
        self._ready("graph")
        x = np.asarray(x, np.float32)
        if labels is not None:
            return self._train_graph.executable(x, np.asarray(labels, np.int64))
        return self._predict_graph.executable(x)

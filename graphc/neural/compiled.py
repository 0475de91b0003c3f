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
    model.save_checkpoint("mnist.npz")    # a fresh model, compiled alike, goes on
    model.eval()                          # from here with model.load_checkpoint
    logits = model(x_test_batch)
"""
from __future__ import annotations

import functools
import re
from typing import Optional

import numpy as np

from .. import eager as E
from .. import ndarray as N
from ..algodiff.tape import Traced as _TapeValue
from ..checkpoint import (Checkpoint, generator_state, random_state, read_checkpoint,
                          set_generator_state, set_random_state, write_checkpoint)
from ..distributed.collectives import DEFAULT_BUCKET_BYTES
from ..tracing import State, trace
from ..type.errors import GraphError
from .training import averaged_over_ranks

#: names of the generators in a model's checkpoint: graphc.eager's, and one per
#: batch shape trained through a graph ("train:64x1x28x28:64")
_EAGER_RANDOM = "eager"
_TRAIN_RANDOM = re.compile(r"train:([0-9]+(?:x[0-9]+)*):([0-9]+)")


def _plain(value):
    """A batch statistic recorded on the eager tape, as its array (no gradient)."""
    return value.value if isinstance(value, _TapeValue) else value


def _eager_generator():
    """graphc.eager's random generator (dropout without a graph), which
    ``compile`` seeds: the model treats it as its own."""
    return E._NS.context.rng


def _train_key(x_shape, labels_shape) -> str:
    """The name of the generator of the training graph for these batch shapes."""
    return f"train:{'x'.join(map(str, x_shape))}:{'x'.join(map(str, labels_shape))}"


class CompiledModel:
    """The ``compile`` / ``train_one_batch`` / ``__call__`` half of :class:`Model`."""

    training = False
    use_graph = False
    steps = 0           # optimiser steps taken since the arrays were initialised

    def compile(self, inputs, is_train: bool = True, use_graph: bool = True,
                sequential: bool = True, *, optimiser=None, params: Optional[dict] = None,
                seed: int = 0, communicator=None, bucket_bytes: int = DEFAULT_BUCKET_BYTES,
                **compile_options) -> None:
        """Get ready to train (``is_train``) or infer, eagerly (``use_graph=False``)
        or through compiled graphs (``sequential=False``: the parallel schedule).
        ``inputs`` are example batches (``[x]`` or ``[x, labels]``): with a graph the
        step for their shapes is traced and compiled now (other shapes later, on
        first use). The arrays start from ``params`` or ``init(seed)``, unless the
        model was compiled before (then training goes on from where it was).
        ``compile_options`` go to :func:`graphc.compile`. With a ``communicator``
        (:mod:`graphc.distributed`) each step averages the gradients, running
        statistics and loss over the ranks (fused all-reduces of about
        ``bucket_bytes``), fresh arrays start from rank 0's, and each rank's graphs draw
        their random ops from ``seed + rank``.

        Example: ``model.compile([xb, yb], is_train=True, use_graph=True, optimiser=SGD(0.1))``
        """
        if is_train and optimiser is None and getattr(self, "optimiser", None) is None:
            raise ValueError(f"{self.name}.compile: training needs an optimiser= (SGD, AdaGrad, "
                             "Adam)")
        if not hasattr(self, "_states") or params is not None:
            initial = self.init(seed) if params is None else params
            initial = {p.name: np.asarray(initial[p.name], np.float32) for p in self.specs()}
            if communicator is not None:
                initial = communicator.broadcast_arrays(initial, root=0)
            self._states = {name: State(value, name=name) for name, value in initial.items()}
            self.steps = 0
        if optimiser is not None:
            self.optimiser = optimiser
            trainable = {n: self._states[n].numpy() for n in self.parameter_names()}
            self._slots = {name: State(value, name=name)
                           for name, value in optimiser.init_eager(trainable).items()}
        self._communicator, self._bucket_bytes = communicator, bucket_bytes
        self.training, self.use_graph = bool(is_train), bool(use_graph)
        schedule = "serial" if sequential else "parallel"
        # each rank's random ops (dropout) draw from a stream of their own
        rank = 0 if communicator is None else communicator.rank
        options = dict(compile_options, schedule=schedule, seed=seed + rank)
        self._train_graph = trace(functools.partial(self._train_step, N), **options)
        self._predict_graph = trace(functools.partial(self._predict, N), **options)
        # every training graph draws from its own generator, seeded with ``seed``:
        # the graph of each batch shape compiled so far, and states a checkpoint
        # gave for shapes not compiled since (applied when they are)
        self._seed, self._trained, self._pending_random = seed, {}, {}
        E.random.seed(seed)
        inputs = list(inputs)
        if use_graph and inputs:
            x = np.asarray(inputs[0], np.float32)
            if self.training and len(inputs) > 1:
                self._track_graph(x, np.asarray(inputs[1], np.int64))
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
        plain = {bn: tuple(_plain(v) for v in s) for bn, s in stats.items()}
        running = self.running_stat_updates(ns, values, plain)
        communicator = getattr(self, "_communicator", None)
        if communicator is not None:
            grads, running, loss = averaged_over_ranks(communicator, list(grads), running, loss,
                                                       self._bucket_bytes)
        self.optimiser.apply(ns, {n: self._states[n] for n in names}, dict(zip(names, grads)),
                             self._slots)
        for name, value in running.items():
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
            self._track_graph(x, labels)
            loss = float(self._train_graph(x, labels))
        else:
            loss = float(self._train_step(E, x, labels))
        self.steps += 1
        return loss

    def _track_graph(self, x, labels) -> None:
        """Compile (or find) the training graph of these shapes, remember it (its
        generator goes into checkpoints) and give it the generator state a
        checkpoint left for it."""
        executable = self._train_graph.executable(x, labels)
        key = _train_key(x.shape, labels.shape)
        self._trained[key] = executable
        pending = self._pending_random.pop(key, None)
        if pending is not None:
            set_random_state(executable, pending)

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

    def save_checkpoint(self, path) -> None:
        """Save what training needs to go on exactly from here: the parameters,
        running statistics, optimiser state, step count and random generators
        (dropout: ``graphc.eager``'s and the training graph's of each batch shape),
        to ``path`` (``.npz``, no pickle), atomically: a crash while saving leaves
        the previous checkpoint intact.

        Example: ``model.save_checkpoint("mnist-step-1000.npz")``
        """
        self._ready("save_checkpoint")
        arrays = {**self._states, **getattr(self, "_slots", {})}   # no slots: never trained
        random = {_EAGER_RANDOM: generator_state(_eager_generator())}
        random.update((key, random_state(g)) for key, g in self._trained.items())
        random.update(self._pending_random)      # what those graphs draw from next
        write_checkpoint(path, Checkpoint({n: s.numpy() for n, s in arrays.items()},
                                          random=random,
                                          meta={"kind": "model", "model": self.name,
                                                "steps": self.steps}))

    def load_checkpoint(self, path) -> None:
        """Go on from a checkpoint of :meth:`save_checkpoint`: compile the model
        as the saving one was (same optimiser and ``seed``), then load; the next
        steps compute exactly what the saving model's next steps computed, eagerly
        or through graphs. Everything is checked (names, shapes, dtypes, the step
        count, the generators) before anything is set.

        Example: ``model.compile([xb, yb], optimiser=Adam(1e-3)); model.load_checkpoint(path)``
        """
        self._ready("load_checkpoint")
        what = f"{self.name}.load_checkpoint"
        arrays = {**self._states, **getattr(self, "_slots", {})}
        checkpoint = read_checkpoint(path, {n: (s.shape, s.dtype) for n, s in arrays.items()},
                                     what=what)
        steps = checkpoint.count("steps", what)
        unknown = [k for k in checkpoint.random
                   if k != _EAGER_RANDOM and not _TRAIN_RANDOM.fullmatch(k)]
        if unknown:
            raise GraphError(f"{what}: {path} holds generator(s) {unknown[:3]}; a model's are "
                             f"{_EAGER_RANDOM!r} and 'train:<x shape>:<labels shape>'")
        # checked: from here on nothing fails
        for name, value in checkpoint.values.items():
            arrays[name].assign(value)
        if _EAGER_RANDOM in checkpoint.random:
            set_generator_state(_eager_generator(), checkpoint.random[_EAGER_RANDOM])
        # graphs of shapes the saving model never trained on start from the seed;
        # those not compiled here yet get their state on their first step
        fresh = generator_state(np.random.Generator(np.random.PCG64(self._seed)))
        states = dict.fromkeys(self._trained, fresh)
        states.update((k, v) for k, v in checkpoint.random.items() if k != _EAGER_RANDOM)
        self._pending_random = {}
        for key, state in states.items():
            if key in self._trained:
                set_random_state(self._trained[key], state)
            else:
                self._pending_random[key] = state
        self.steps = steps

    def graph(self, x, labels=None):
        """The compiled graph (an :class:`~graphc.Executable`) for these shapes: the
        training step with ``labels``, else inference. Example: ``model.graph(xb, yb).stats()``"""
        self._ready("graph")
        x = np.asarray(x, np.float32)
        if labels is not None:
            return self._train_graph.executable(x, np.asarray(labels, np.int64))
        return self._predict_graph.executable(x)

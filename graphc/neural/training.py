"""Compiled training and inference.

:func:`compile_training` builds one graph per training step: the forward
pass in training mode, the loss, its gradients (``N.grad``), the optimiser's
updates and the batch-norm running statistics (as graph updates), and
compiles it into one :class:`~graphc.Executable`. :func:`compile_inference`
compiles the inference forward pass with the weights as constants (batch norm
folded). :class:`EagerTrainer` is the same step without a graph
(``graphc.eager.value_and_grad`` and the optimiser's ``eager_step``).

Example::

    model = MnistCNN()
    trainer = compile_training(model, SGD(0.01), (64, 1, 28, 28), seed=0)
    for xb, yb in batches(x, y, 64):
        loss = trainer.step(xb, yb)
    predict = compile_inference(model, trainer.params(), (100, 1, 28, 28))
    print(evaluate_accuracy(predict, x_test, y_test))
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..algodiff.reverse import grad
from ..checkpoint import expected_variables, read_checkpoint, restore, save_values
from ..distributed.collectives import DEFAULT_BUCKET_BYTES, all_reduce, fused_all_reduce
from ..operator import NS as _LAZY
from ..symbol.node import Node
from ..type.kinds import KINDS
from .folding import fold_batchnorm, frozen
from .layers import BN_MOMENTUM


class Trainer:
    """A compiled training step. ``step(x, labels)`` runs it and returns the
    loss; ``params()`` gives the current parameters and running statistics;
    ``executable`` is the compiled graph (``stats()``, ``to_dot()``...)."""

    def __init__(self, model, optimiser, executable, names, optimiser_names, batch_shape):
        self.model, self.optimiser, self.executable = model, optimiser, executable
        self.batch_shape = tuple(batch_shape)
        self._names, self._optimiser_names = list(names), list(optimiser_names)
        self.steps = 0

    def step(self, x, labels) -> float:
        """One training step on a batch; returns its loss (before the update).

        Example: ``loss = trainer.step(images, labels)``
        """
        loss = self.executable.run(x=np.asarray(x, np.float32),
                                   labels=np.asarray(labels, np.int64))
        self.steps += 1
        return float(loss)

    def params(self) -> dict[str, np.ndarray]:
        """Copies of the current parameters and running statistics, by name."""
        return {n: self.executable.value(n) for n in self._names}

    def optimiser_state(self) -> dict[str, np.ndarray]:
        """Copies of the optimiser's state variables, by name."""
        return {n: self.executable.value(n) for n in self._optimiser_names}

    def save_checkpoint(self, path) -> None:
        """Save what training needs to go on exactly from here: the parameters,
        running statistics, optimiser state, step count and the graph's random
        generator (dropout), to ``path`` (``.npz``, no pickle), atomically: a crash
        while saving leaves the previous checkpoint intact. The batch last fed is
        not saved, nor the optimiser's settings (they are part of the graph).

        Example: ``trainer.save_checkpoint("mnist-step-1000.npz")``
        """
        save_values(self.executable, path, names=self._names + self._optimiser_names,
                    meta={"kind": "trainer", "steps": self.steps})

    def load_checkpoint(self, path) -> None:
        """Go on from a checkpoint of :meth:`save_checkpoint`, taken by a trainer of
        the same model and optimiser: the next steps compute exactly what the
        saving trainer's next steps computed. Everything is checked (names, shapes,
        dtypes, the step count) before anything is set.

        Example::

            trainer = compile_training(model, Adam(1e-3), batch_shape)
            trainer.load_checkpoint("mnist-step-1000.npz")
        """
        names = self._names + self._optimiser_names
        what = "Trainer.load_checkpoint"
        checkpoint = read_checkpoint(path, expected_variables(self.executable, names),
                                     what=what)
        steps = checkpoint.count("steps", what)
        restore(self.executable, checkpoint)
        self.steps = steps

    def __repr__(self) -> str:
        return (f"<Trainer {self.model.name}, {type(self.optimiser).__name__}, batch "
                f"{self.batch_shape}, {self.steps} steps>")


class EagerTrainer:
    """The training step without a graph, for comparison with :class:`Trainer`:
    the forward pass on ``graphc.eager``, gradients by ``E.value_and_grad`` (the
    eager tape), the optimiser's :meth:`~.Optimiser.eager_step` on NumPy arrays and
    the running statistics updated as in the graph. Every op allocates its result.
    ``seed`` restarts ``graphc.eager``'s random generator (dropout), which is shared.

    Example: ``trainer = EagerTrainer(MnistCNN(), SGD(0.01)); loss = trainer.step(x, y)``
    """

    def __init__(self, model, optimiser, params: Optional[dict] = None, seed: int = 0,
                 bn_momentum: float = BN_MOMENTUM):
        from .. import eager as E

        self.model, self.optimiser, self._E = model, optimiser, E
        initial = model.init(seed) if params is None else params
        self._params = {p.name: np.array(initial[p.name], np.float32) for p in model.specs()}
        self._trainable = model.parameter_names()
        self.state = optimiser.init_eager({n: self._params[n] for n in self._trainable})
        self.bn_momentum = bn_momentum
        self.steps = 0
        E.random.seed(seed)

    def step(self, x, labels) -> float:
        """One training step on a batch; returns its loss (before the update)."""
        E, model, names = self._E, self.model, self._trainable
        x, labels = np.asarray(x, np.float32), np.asarray(labels, np.int64)
        stats = {}

        def loss_of(*arrays):
            params = dict(self._params, **dict(zip(names, arrays)))
            logits = model.forward(E, params, x, training=True, batch_stats=stats)
            return model.loss(E, logits, labels)

        loss, grads = E.value_and_grad(loss_of, argnums=tuple(range(len(names))))(
            *[self._params[n] for n in names])
        self.optimiser.eager_step({n: self._params[n] for n in names}, dict(zip(names, grads)),
                                  self.state)
        plain = {bn: (_plain(m), _plain(v), count) for bn, (m, v, count) in stats.items()}
        for name, value in model.running_stat_updates(np, self._params, plain,
                                                      self.bn_momentum).items():
            np.copyto(self._params[name], value, casting="same_kind")
        self.steps += 1
        return float(loss)

    def params(self) -> dict[str, np.ndarray]:
        """Copies of the current parameters and running statistics, by name."""
        return {n: v.copy() for n, v in self._params.items()}


def _plain(value) -> np.ndarray:
    """The array of a value recorded on the eager tape (statistics need no gradient)."""
    return getattr(value, "value", value)


def training_graph(model, optimiser, batch_shape, bn_momentum: float = BN_MOMENTUM,
                   communicator=None, bucket_bytes: int = DEFAULT_BUCKET_BYTES):
    """``(inputs, loss, updates, optimiser_state)`` of one training step, before
    compiling: variables ``x`` (float32 ``batch_shape``), ``labels`` (int64), one
    per model array (by its name) and per optimiser state variable. With a
    ``communicator`` (data parallelism) the gradients are averaged over the ranks in
    fused all-reduces of about ``bucket_bytes``, and so are the running statistics
    and the loss, so every rank applies the same update.

    Example: ``inputs, loss, updates, state = training_graph(model, SGD(0.1), (8, 1, 28, 28))``
    """
    N = _LAZY
    batch_shape = tuple(batch_shape)
    x = N.var("x", batch_shape)
    labels = N.var("labels", (batch_shape[0],), np.int64)
    variables = {p.name: N.var(p.name, p.shape) for p in model.specs()}
    batch_stats = {}
    logits = model.forward(N, variables, x, training=True, batch_stats=batch_stats)
    loss = model.loss(N, logits, labels)
    trainable = model.parameter_names()
    grads = grad(loss, [variables[n] for n in trainable]) if trainable else []
    running = model.running_stat_updates(N, variables, batch_stats, bn_momentum)
    if communicator is not None:
        grads, running, loss = averaged_over_ranks(communicator, grads, running, loss,
                                                   bucket_bytes)
    state, updates = optimiser.graph_updates({n: variables[n] for n in trainable},
                                             dict(zip(trainable, grads)))
    updates.update({variables[n]: value for n, value in running.items()})
    inputs = [x, labels, *variables.values(), *state]
    return inputs, loss, updates, state


def compile_training(model, optimiser, batch_shape, seed: int = 0,
                     params: Optional[dict] = None, bn_momentum: float = BN_MOMENTUM,
                     communicator=None, bucket_bytes: int = DEFAULT_BUCKET_BYTES,
                     **compile_options) -> Trainer:
    """Compile ``model``'s training step with ``optimiser`` for batches of
    ``batch_shape`` (N, C, H, W) and return a :class:`Trainer`. The parameters
    start from ``params`` (name -> array) or ``model.init(seed)``; ``seed`` also
    seeds the graph's random ops (dropout). ``compile_options`` go to
    ``graphc.compile`` (``plan="offsets"``, ``check=True``, ``optimise=...``).

    With a ``communicator`` (:mod:`graphc.distributed`), every rank trains on its own
    ``batch_shape`` batches (``batches(..., communicator=comm)`` shards them) and the
    step averages gradients, running statistics and the loss over the ranks (fused
    all-reduces of about ``bucket_bytes``; ``schedule="parallel"`` overlaps them with
    the backward pass). Rank 0's initial parameters are broadcast to the others, and
    each rank's random ops draw from ``seed + rank``.

    Example: ``trainer = compile_training(MnistCNN(), Adam(1e-3), (64, 1, 28, 28))``
    """
    from ..compiler import compile as compile_graph

    inputs, loss, updates, state = training_graph(model, optimiser, batch_shape, bn_momentum,
                                                  communicator, bucket_bytes)
    rank = 0 if communicator is None else communicator.rank
    executable = compile_graph(inputs, loss, updates, seed=seed + rank, **compile_options)
    initial = model.init(seed) if params is None else params
    names = [p.name for p in model.specs()]
    missing = [n for n in names if n not in initial]
    if missing:
        raise KeyError(f"compile_training: params lack {len(missing)} of the model's arrays, "
                       f"e.g. {missing[:3]}")
    initial = {n: np.asarray(initial[n], np.float32) for n in names}
    if communicator is not None:
        initial = communicator.broadcast_arrays(initial, root=0)
    executable.assign(**initial)
    executable.assign(**{var.name: value for var, value in state.items()})
    return Trainer(model, optimiser, executable, names, [v.name for v in state], batch_shape)


def compile_inference(model, params: dict, batch_shape, fold: bool = True,
                      **compile_options):
    """An :class:`~graphc.Executable` mapping ``x`` (float32 ``batch_shape``) to
    logits, with the weights as graph constants (not copied: they are the
    read-only arrays of :func:`fold_batchnorm`); ``fold=False`` keeps the batch
    norm nodes. ``compile_options`` go to ``graphc.compile``.

    Example: ``predict = compile_inference(model, params, (100, 3, 224, 224)); logits = predict.run(x=images)``
    """
    from ..compiler import compile as compile_graph

    weights = fold_batchnorm(model, params) if fold else {k: frozen(v) for k, v in
                                                          params.items()}
    x = _LAZY.var("x", tuple(batch_shape))
    logits = model.forward(_LAZY, weights, x, training=False)
    return compile_graph([x], logits, **compile_options)


def evaluate_accuracy(predict, x: np.ndarray, y: np.ndarray,
                      batch: Optional[int] = None) -> float:
    """The fraction of ``x`` whose argmax logit equals ``y``, with ``predict`` an
    executable from :func:`compile_inference`, or any function from a batch to its
    logits (a compiled :class:`~.Model` in eval mode) with its ``batch`` size; a
    last partial batch is padded.

    Example: ``accuracy = evaluate_accuracy(predict, x_test, y_test)``
    """
    if hasattr(predict, "run"):
        batch, predict = predict.graph.inputs[0].shape[0], _by_keyword(predict)
    elif batch is None:
        raise ValueError("evaluate_accuracy: give the batch size of a predict function")
    correct = 0
    for start in range(0, len(x), batch):
        xb = np.asarray(x[start:start + batch], np.float32)
        n = len(xb)
        if n < batch:
            xb = np.concatenate([xb, np.zeros((batch - n,) + xb.shape[1:], np.float32)])
        logits = predict(xb)
        correct += int(np.sum(np.argmax(logits[:n], axis=1) == y[start:start + n]))
    return correct / max(len(x), 1)


def _by_keyword(executable):
    return lambda xb: executable.run(x=xb)


__all__ = ["Trainer", "EagerTrainer", "training_graph", "compile_training", "compile_inference",
           "evaluate_accuracy"]


def averaged_over_ranks(communicator, grads: list, running: dict, loss, bucket_bytes):
    """Data parallelism's exchange: ``grads`` (in the model's order) averaged over the
    ranks in fused all-reduces, issued last layer first (the order a backward pass
    computes them), then the running statistics' new values, then the loss.

    Example: ``grads, running, loss = averaged_over_ranks(comm, grads, running, loss,
    4 << 20)``
    """
    reduced = fused_all_reduce(grads[::-1], communicator, "mean", bucket_bytes)[::-1]
    last = [reduced[0]] if reduced else []
    names = list(running)
    stats = fused_all_reduce([running[n] for n in names], communicator, "mean",
                             bucket_bytes, after=_root_of(last))
    last = stats[-1:] or last
    loss = all_reduce(loss, communicator, "mean", after=_root_of(last))
    return reduced, dict(zip(names, stats)), loss


def _root_of(values) -> list:
    """The collectives graph nodes were sliced from (the chain's links); none for
    arrays computed at once (their order is the order of the calls)."""
    roots = []
    for value in values:
        if isinstance(value, Node):
            while KINDS[value.op.kind].family != "collective":
                value = value.parents[0]
            roots.append(value)
    return roots

"""The models benchmark's cases: what each one makes before the baseline RSS is
read (``prepare``: weights and one batch) and what it then times (``build``:
an eager step, or a compiled graph's run).

Inference uses batch-norm-folded weights in both modes. The graph holds them as
constants, packed into its convolutions' layout where they read them so; the caller's
arrays are dropped once it is compiled, so its peak counts the weights once. Training
hands the weights to the graph's variables one array at a time, dropping the caller's
copy as it goes, so the graph's peak does not count the weights twice.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import graphc
import graphc.eager as E
import graphc.neural as nn
from graphc.operator import NS as N

#: the plan the graph mode uses (the offsets planner is the tighter of the two)
PLAN = "offsets"
#: compile options of the training graphs: cheap forward values (ReLU outputs) are
#: recomputed in the backward pass where that lowers the peak (``compile(remat=)``;
#: off by default in graphc). ResNet50 b8: planned 701 -> 587 MiB, ~100 more steps.
TRAIN_OPTIONS = {"remat": "auto"}


@dataclass(frozen=True)
class Case:
    model: str
    batch: int
    size: int
    train: bool
    optimiser: str = ""

    def make_model(self):
        return {"resnet50": nn.resnet50, "inception_v3": nn.inception_v3,
                "mnist_cnn": nn.MnistCNN, "maskrcnn": nn.maskrcnn}[self.model]()

    def make_optimiser(self):
        return {"sgd_momentum": lambda: nn.SGD(0.01, momentum=0.9),
                "adagrad": lambda: nn.AdaGrad(0.005)}[self.optimiser]()

    # -- before the baseline ----------------------------------------------------------
    def prepare(self, seed: int) -> dict:
        model = self.make_model()
        rng = np.random.default_rng(seed)
        channels = model.input_shape[0]
        shape = (self.batch, channels, self.size, self.size)
        x = rng.random(shape, dtype=np.float32) * (255.0 if self.model == "mnist_cnn" else 1.0)
        params = model.init(seed)
        work = {"model": model, "x": x, "shape": shape}
        if self.train:
            work["labels"] = rng.integers(0, model.classes, self.batch).astype(np.int64)
            work["params"] = params
        else:
            work["params"] = nn.fold_batchnorm(model, params)
            del params
        return work

    # -- after it ------------------------------------------------------------------------
    def build(self, work: dict, mode: str):
        """``(step, executable)``: a callable doing one evaluation, and the compiled
        graph (``None`` in eager mode)."""
        model, x = work["model"], work["x"]
        if not self.train:
            if mode == "eager":
                return (lambda: model.forward(E, work["params"], x, training=False)), None
            exe = nn.compile_inference(model, work["params"], work["shape"], plan=PLAN)
            # the graph holds the weights now, packed where its kernels read them so
            # (graphc.held_once): the caller's arrays go, as a user's would once compiled,
            # and the peak counts the weights once (as training's hand-over does)
            work["params"].clear()
            return (lambda: exe.run(x=x)), exe
        optimiser = self.make_optimiser()
        labels = work["labels"]
        if mode == "eager":
            return self._eager_training(model, optimiser, work, x, labels), None
        inputs, loss, updates, state = nn.training_graph(model, optimiser, work["shape"])
        exe = graphc.compile(inputs, loss, updates, seed=0, plan=PLAN, **TRAIN_OPTIONS)
        params = work["params"]
        for name in list(params):       # one array at a time: never two full copies
            exe.assign(**{name: params.pop(name)})
        exe.assign(**{var.name: value for var, value in state.items()})
        return (lambda: exe.run(x=x, labels=labels)), exe

    @staticmethod
    def _eager_training(model, optimiser, work, x, labels):
        params = work["params"]
        trainable = model.parameter_names()
        state = optimiser.init_eager({n: params[n] for n in trainable})
        bn_state = set(model.state_names())

        stats: dict = {}

        def loss_of(*arrays):
            values = dict(params)
            values.update(zip(trainable, arrays))
            stats.clear()
            logits = model.forward(E, values, x, training=True, batch_stats=stats)
            return model.loss(E, logits, labels)

        def plain(v):   # a value recorded on the tape, or a NumPy array
            return np.asarray(getattr(v, "value", v))

        def step():
            loss, grads = E.value_and_grad(loss_of, argnums=tuple(range(len(trainable))))(
                *[params[n] for n in trainable])
            optimiser.eager_step(params, dict(zip(trainable, grads)), state)
            batch = {bn: tuple(plain(v) for v in values) for bn, values in stats.items()}
            for name, value in model.running_stat_updates(E, params, batch).items():
                if name in bn_state:
                    params[name][...] = value
            return loss
        return step

    def extra(self, work: dict) -> dict:
        return {"parameters": work["model"].num_parameters()}


CASES = {
    "inceptionv3_infer": Case("inception_v3", 1, 299, False),
    "resnet50_infer": Case("resnet50", 1, 224, False),
    "resnet50_train": Case("resnet50", 8, 224, True, "sgd_momentum"),
    "mnist_train": Case("mnist_cnn", 100, 28, True, "adagrad"),
    # Owl's fourth: ResNet101-FPN, 512x512, 1000 proposals, 100 detections (issue 18)
    "maskrcnn_infer": Case("maskrcnn", 1, 512, False),
}

#: the GPU benchmark's cases (benchmarks/gpu.py, issue 19): inference at batch 1 (launch
#: bound) and 32, ResNet50 training at batch 32, Owl's MNIST CNN training at batch 100
GPU_CASES = {
    "resnet50_infer_b1": Case("resnet50", 1, 224, False),
    "resnet50_infer_b32": Case("resnet50", 32, 224, False),
    "inceptionv3_infer_b1": Case("inception_v3", 1, 299, False),
    "inceptionv3_infer_b32": Case("inception_v3", 32, 299, False),
    "resnet50_train_b32": Case("resnet50", 32, 224, True, "sgd_momentum"),
    "mnist_train_b100": Case("mnist_cnn", 100, 28, True, "adagrad"),
}

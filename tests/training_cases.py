"""A small training step shared by the tests that compare the kernel engines on it:
Owl's MNIST CNN with SGD and momentum, and one batch of images and labels."""
import numpy as np

import graphc.neural as nn


def mnist_batch(seed: int = 4, batch: int = 8):
    """``(model, images, labels)``: a fresh MNIST CNN and a batch for it."""
    rng = np.random.default_rng(seed)
    x = rng.random((batch, 1, 28, 28), dtype=np.float32) * 255.0
    return nn.MnistCNN(), x, rng.integers(0, 10, batch).astype(np.int64)


def mnist_trainer(model, shape, kernels: str):
    """The model's SGD (momentum 0.9) training step for batches of ``shape``."""
    return nn.compile_training(model, nn.SGD(0.01, momentum=0.9), shape, kernels=kernels)

"""Neural networks on graphc: models written once against a namespace
(``graphc.ndarray`` or ``graphc.eager``), batch-norm folding, optimisers as
update expressions, compiled training and inference, MNIST-format data.

>>> import graphc.neural as nn
>>> nn.resnet50().num_parameters()
25557032
"""
from .data import (Dataset, IDXError, batches, load_fashion_mnist, load_mnist_format,
                   load_or_synthetic, read_idx, synthetic_mnist, write_idx)
from .folding import fold_batchnorm, frozen
from .inception import InceptionV3, inception_v3
from .maskrcnn import MaskRCNN, MaskRCNNConfig, maskrcnn
from .layers import BN_MOMENTUM, BatchNorm, Context, Conv, ConvBN, Dense, Param
from .mnist import MnistCNN
from .model import Model
from .optimisers import SGD, AdaGrad, Adam, Optimiser
from .resnet import ResNet, resnet50
from .training import (EagerTrainer, Trainer, compile_inference, compile_training, evaluate_accuracy,
                       training_graph)

__all__ = ["Model", "MnistCNN", "ResNet", "resnet50", "InceptionV3", "inception_v3",
           "MaskRCNN", "MaskRCNNConfig", "maskrcnn",
           "Param", "Context", "Conv", "ConvBN", "BatchNorm", "Dense", "BN_MOMENTUM",
           "fold_batchnorm", "frozen", "Optimiser", "SGD", "AdaGrad", "Adam",
           "Trainer", "EagerTrainer", "training_graph", "compile_training", "compile_inference",
           "evaluate_accuracy", "Dataset", "IDXError", "read_idx", "write_idx",
           "load_mnist_format", "load_fashion_mnist", "load_or_synthetic", "synthetic_mnist",
           "batches"]

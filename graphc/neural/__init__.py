"""Neural networks on graphc: models written once against a namespace
(``graphc.ndarray`` or ``graphc.eager``), batch-norm folding, optimisers as
update expressions, compiled training and inference, MNIST-format data.

>>> import graphc.neural as nn
>>> nn.resnet50().num_parameters()
25557032
"""
from .inception import InceptionV3, inception_v3
from .layers import BN_MOMENTUM, BatchNorm, Context, Conv, ConvBN, Dense, Param
from .mnist import MnistCNN
from .model import Model
from .resnet import ResNet, resnet50

__all__ = ["Model", "MnistCNN", "ResNet", "resnet50", "InceptionV3", "inception_v3",
           "Param", "Context", "Conv", "ConvBN", "BatchNorm", "Dense", "BN_MOMENTUM"]

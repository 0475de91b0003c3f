"""The converters, one module per family of ONNX operators; importing this
package fills :data:`graphc.onnx.registry.CONVERTERS`."""
from . import (attention, einsum, elementwise, indexing, nn, reduce, resize, rnn,  # noqa: F401
               scatter, shape, signal)

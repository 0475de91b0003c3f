"""The converters, one module per family of ONNX operators; importing this
package fills :data:`graphc.onnx.registry.CONVERTERS`."""
from . import (attention, bitcast, control, detection, einsum, elementwise,  # noqa: F401
               flex_attention, folding, indexing, linalg, linear_attention, ml,
               ml_trees, nn, quantize, quantize_products, reduce, resize, rnn,
               sampling, scatter, sequence_models, shape, signal, spectral,
               training, vision)

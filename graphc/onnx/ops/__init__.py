"""The converters, one module per family of ONNX operators; importing this
package fills :data:`graphc.onnx.registry.CONVERTERS`."""
from . import einsum, elementwise, nn, reduce, shape  # noqa: F401

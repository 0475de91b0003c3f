"""Shape layer: shape and dtype inference with NumPy's rules (broadcasting,
negative axes, keepdims, ``-1`` in reshape, type promotion)."""
from .axes import as_shape, normalize_axes, normalize_axis, resolve_reshape
from .broadcast import broadcast_shapes, check_broadcast_to
from .dtypes import as_dtype, probe_dtype
from .indexing import ArrayIndex, decode_basic, decode_with_arrays, encode_key
from .rules import RULES, infer

__all__ = ["as_shape", "normalize_axes", "normalize_axis", "resolve_reshape",
           "broadcast_shapes", "check_broadcast_to", "as_dtype", "probe_dtype",
           "ArrayIndex", "decode_basic", "decode_with_arrays", "encode_key", "RULES", "infer"]

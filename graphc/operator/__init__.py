"""Operator layer: NumPy-named constructors and the lazy array type."""
from .lazy import NS, LazyNamespace, Namespace, Tensor, public_functions
from .namespace import DEFAULT_DTYPE, Backend

__all__ = ["NS", "LazyNamespace", "Namespace", "Tensor", "Backend", "DEFAULT_DTYPE",
           "public_functions"]

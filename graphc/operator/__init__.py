"""Operator layer: NumPy-named constructors and the lazy array type."""
# namespace first: the mixin modules it imports at its end import it in turn
from .namespace import DEFAULT_DTYPE, Backend, Namespace  # isort: skip
from .lazy import NS, LazyNamespace, Tensor, public_functions

__all__ = ["NS", "LazyNamespace", "Namespace", "Tensor", "Backend", "DEFAULT_DTYPE",
           "public_functions"]

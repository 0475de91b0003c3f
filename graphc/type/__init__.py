"""Type layer: operations as immutable data and the registry of their kinds."""
from .op import Op
from .errors import DTypeError, GraphcError, GraphError, IndexOutOfRange, InputError, ShapeError
from .kinds import ANY, KINDS, OpKind, kind, may_overwrite, reference_function

__all__ = ["GraphcError", "ShapeError", "DTypeError", "InputError", "GraphError", "IndexOutOfRange", "Op", "OpKind", "KINDS", "ANY", "kind", "may_overwrite", "reference_function"]

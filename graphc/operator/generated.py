"""The operator layer's public-name tables, filled from the op definitions
(:mod:`graphc.ops`): which ``N.<name>`` builds which kind.

A name of a ``unary``, ``binary`` or ``reduction`` kind gets a generated function
(:func:`~.elementwise.unary_function` and the like) unless a mixin already writes
one by hand (``round``, ``clip``); a name of any other family must be written by
hand in a mixin (its arguments need normalising), and is recorded here.

>>> UNARY_NAMES["abs"], BINARY_NAMES["true_divide"], REDUCTION_NAMES["amax"]
('absolute', 'divide', 'max')
"""
from __future__ import annotations

from .elementwise import ElementwiseMixin, binary_function, unary_function
from .namespace import SUBMODULES, Namespace, with_location
from .reductions import ReductionMixin, arg_reduction_function, reduction_function

#: public name -> kind, for generated functions of one array
UNARY_NAMES: dict[str, str] = {}
#: public name -> kind, for generated broadcasting functions of two arrays
BINARY_NAMES: dict[str, str] = {}
#: public name -> kind, for generated reductions
REDUCTION_NAMES: dict[str, str] = {}
#: public name -> the kinds it builds, for functions written by hand in a mixin
#: (``getitem`` builds ``slice`` or ``gather``)
HANDWRITTEN: dict[str, tuple] = {}
#: NumPy ufunc name -> namespace function, for ``np.exp(tensor)`` and ``ndarray + tensor``
UFUNC_NAMES: dict[str, str] = {"matmul": "matmul", "rint": "rint", "isfinite": "isfinite"}

_MIXINS = tuple(base for base in Namespace.__mro__ if base.__name__.endswith("Mixin"))


def _reduction(name, kind):
    maker = arg_reduction_function if kind in ("argmax", "argmin") else reduction_function
    return maker(name, kind)


#: family -> (the mixin the function goes on, its maker, the table naming it)
_GENERATED = {"unary": (ElementwiseMixin, unary_function, UNARY_NAMES),
              "binary": (ElementwiseMixin, binary_function, BINARY_NAMES),
              "reduction": (ReductionMixin, _reduction, REDUCTION_NAMES)}


def _handwritten(name: str) -> bool:
    module, _, function = name.rpartition(".")
    if module:                              # N.random.normal, N.linalg.inv and the like
        return function in vars(SUBMODULES[module])
    return any(name in vars(mixin) for mixin in _MIXINS)


def install(name: str, kind: str, family: str) -> None:
    """Give ``kind`` the public function ``name``: generated for the families of
    :data:`_GENERATED`, else (or when a mixin writes it by hand) only recorded.

    Example: ``install("cbrt", "cbrt", "unary")`` makes ``N.cbrt``.
    """
    generated = _GENERATED.get(family)
    if generated is None or _handwritten(name):
        if not _handwritten(name):
            raise ValueError(f"op kind {kind!r} ({family}) names the public function {name!r}, "
                             f"which no mixin of graphc.operator defines")
        HANDWRITTEN[name] = HANDWRITTEN.get(name, ()) + (kind,)
        return
    mixin, make, table = generated
    # errors raised while normalising arguments name the user's line, as every
    # hand-written function's do
    setattr(mixin, name, with_location(make(name, kind)))
    table[name] = kind
    if family != "reduction":
        UFUNC_NAMES[name] = name

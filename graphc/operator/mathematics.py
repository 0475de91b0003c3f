"""NumPy's mathematical functions made of existing kinds (``logaddexp``, ``isclose``,
``outer``, ``trace``, ``cross``, ``diff``, ``convolve``, ...), so their gradients, ONNX
export, fusion and memory planning follow from the kinds they are made of.

They live in three modules by subject: :mod:`.math_elementwise` (predicates and
elementwise composites), :mod:`.math_products` (products, convolution, statistics)
and :mod:`.math_calculus` (differences, derivatives, integrals, polynomials), with
:mod:`.math_polynomials` (fitting, division, roots).

>>> import graphc.eager as E, numpy as np
>>> E.trace(np.arange(9.0).reshape(3, 3)).item()
12.0
"""
from __future__ import annotations

from .math_calculus import CalculusMixin
from .math_elementwise import ElementwiseMathMixin
from .math_polynomials import PolynomialMixin
from .math_products import ProductsMixin


class MathMixin(ElementwiseMathMixin, ProductsMixin, CalculusMixin, PolynomialMixin):
    """Composite mathematical functions, written once for every backend."""

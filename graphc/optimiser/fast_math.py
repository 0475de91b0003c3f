"""The ``fast_math`` pass: rewrites that may change results, applied only with
``graphc.compile(..., fast_math=True)`` (or ``optimise([...], fast_math=True)``).

The default pipeline gives NumPy's results bit for bit; each rule here breaks
that somewhere: ``x * 0 -> 0`` is wrong for inf and NaN, ``x + 0.0 -> x`` keeps
``-0.0`` where NumPy gives ``+0.0``, ``g / sqrt(v + eps) -> g * (1 / sqrt(v +
eps))`` rounds twice where NumPy rounds once, and a stride-1 convolution's input
gradient computed as a forward convolution sums in another order.

>>> import graphc.ndarray as N
>>> from graphc.optimiser.rewriter import rewrite
>>> x = N.var("x", (3,))
>>> rewrite([x + 0.0], FAST_MATH.rewrite_node)[0][0] is x
True
"""
from __future__ import annotations

from .fusion import RECIPROCAL_RULES
from .lowering import FORWARD_CONV_RULES
from .rewriter import Pass
from .simplify import FAST_MATH_RULES

#: what its rules make: a zero ``fill`` (``x * 0``); ``fused_adagrad`` and the
#: ``multiply`` by it (a division by a root); a forward ``conv2d`` of a kernel
#: transposed (reshaped when grouped, a view ``const`` of a constant one) and flipped
FAST_MATH_PRODUCES = frozenset({"fill", "fused_adagrad", "multiply", "conv2d", "transpose",
                                "reshape", "flip", "const"})

FAST_MATH = Pass("fast_math", FAST_MATH_RULES + RECIPROCAL_RULES + FORWARD_CONV_RULES,
                 produces=FAST_MATH_PRODUCES,
                 doc="value-changing rewrites (x*0 -> 0 is wrong for inf and NaN, x+0.0 -> x "
                     "keeps -0.0, a division by a reciprocal rounds twice, a convolution's "
                     "input gradient summed in another order): only with fast_math=True")

"""The kernel of ``random_draw``: one method of ``numpy.random.Generator``, named by
the op, called on the run context's seedable generator on every run.

The op's attributes say what to call: ``method`` (the Generator method's name),
``params`` (its static keyword arguments, ``(name, value)`` pairs) and
``array_params`` (the names under which the op's inputs are passed, in order).
Methods that can write into an array (``random``, ``standard_normal``,
``standard_exponential``, ``standard_gamma``) draw straight into the output in its
dtype, as ``Generator.standard_normal(dtype=np.float32)`` does; the others draw as
NumPy does and the result is cast into the output. So a graph, eager mode and a
``numpy.random.default_rng(seed)`` with the same seed draw the same numbers.

>>> import numpy as np
>>> from graphc.engine.cpu import RunContext
>>> from graphc.type import Op
>>> op = Op.make("random_draw", method="gamma", params=(("shape", 2.0), ("size", (3,))),
...              array_params=(), shape=(3,), dtype=np.dtype("float64"))
>>> out = np.empty(3)
>>> random_draw(op, [], out, RunContext(0))()
>>> bool((out == np.random.default_rng(0).gamma(2.0, size=3)).all())
True
"""
from __future__ import annotations


#: Generator methods that take ``dtype=`` (float32 or float64) and ``out=``
WRITES_OUT = frozenset({"random", "standard_normal", "standard_exponential", "standard_gamma"})


def random_draw(op, ins, out, ctx):
    """Build the kernel of a ``random_draw`` op (see the module docstring)."""
    method, names = op["method"], op["array_params"]
    static = dict(op["params"])
    typed = method in WRITES_OUT
    if typed:
        # the same bits whether drawn into the output or beside it
        static["dtype"] = out.dtype
    into_out = typed and out.flags.c_contiguous
    if into_out:
        static.pop("size", None)

    def draw():
        kwargs = dict(static)
        kwargs.update(zip(names, ins))
        if into_out:
            getattr(ctx.rng, method)(out=out, **kwargs)
        else:
            out[...] = getattr(ctx.rng, method)(**kwargs)
    return draw

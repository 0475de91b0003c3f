"""Values that come from nowhere: variables, constants, filled arrays, ranges,
random draws, and ``delay`` (a user NumPy function wrapped as a node).

Creation functions default to float32, like variables, so that mixing them
with a model's float32 values never promotes silently to float64.

>>> import graphc.ndarray as N
>>> N.zeros((2, 3)).dtype
dtype('float32')
"""
from __future__ import annotations

import numpy as np

from .random_functions import RandomFunctions  # noqa: F401  (N.random, re-exported)


class CreationMixin:
    def full(self, shape, fill_value, dtype=None):
        """A new array of ``shape`` filled with ``fill_value``. ``dtype`` defaults to
        float32 for floats, int64 for ints, bool for bools.

        Example: ``N.full((3, 3), 0.5)``
        """
        if dtype is None:
            dtype = np.result_type(np.float32, fill_value) if isinstance(fill_value, float) \
                else np.asarray(fill_value).dtype
        dtype = self._dtype("full", dtype)
        value = np.asarray(fill_value).astype(dtype).item()
        return self._op("fill", [], shape=self._shape("full", shape), dtype=dtype, value=value)

    def zeros(self, shape, dtype=None):
        """A new array of zeros (float32 by default). Example: ``N.zeros((10,))``"""
        return self.full(shape, 0, self._dtype("zeros", dtype))

    def ones(self, shape, dtype=None):
        """A new array of ones (float32 by default). Example: ``N.ones((10,))``"""
        return self.full(shape, 1, self._dtype("ones", dtype))

    def zeros_like(self, x, dtype=None):
        """Zeros with the shape (and dtype) of ``x``. Example: ``N.zeros_like(w)``"""
        return self.full(x.shape, 0, x.dtype if dtype is None else dtype)

    def ones_like(self, x, dtype=None):
        """Ones with the shape (and dtype) of ``x``. Example: ``N.ones_like(w)``"""
        return self.full(x.shape, 1, x.dtype if dtype is None else dtype)

    def full_like(self, x, fill_value, dtype=None):
        """``fill_value`` with the shape (and dtype) of ``x``."""
        return self.full(x.shape, fill_value, x.dtype if dtype is None else dtype)

    def arange(self, start, stop=None, step=1, dtype=None):
        """Evenly spaced values, exactly ``numpy.arange`` (a constant of the graph).

        Example: ``N.arange(10)``
        """
        return self.const(np.arange(start, stop, step, dtype=dtype) if stop is not None
                          else np.arange(start, step=step, dtype=dtype))

    def const(self, value, name=None):
        """``value`` (any array-like) as a constant, copied so later changes to the
        caller's array do not reach the graph. Example: ``N.const(np.zeros(10, np.float32))``"""
        return self._constant(np.array(value, copy=True), name=name)

    def var(self, *args, **kwargs):
        """``N.var(name, shape, dtype=float32)`` declares a named input variable;
        ``N.var(x, axis=None, ddof=0, keepdims=False)`` is NumPy's variance.

        Example: ``x = N.var("x", (64, 784))``
        """
        if args and isinstance(args[0], str) or "name" in kwargs:
            return self.variable(*args, **kwargs)
        return self.variance(*args, **kwargs)

    def delay(self, fn, inputs, shape, dtype=None):
        """A node that calls ``fn(*input_arrays)`` (plain NumPy) on every run; it must
        return an array of the declared ``shape`` and ``dtype``.

        Example: ``N.delay(np.sort, [x], x.shape, x.dtype)``
        """
        if not callable(fn):
            raise TypeError(f"delay: fn must be callable, got {fn!r}")
        parents = [self._lift(x) for x in inputs]
        return self._op("delay", parents, fn=fn, shape=self._shape("delay", shape),
                        dtype=self._dtype("delay", dtype))

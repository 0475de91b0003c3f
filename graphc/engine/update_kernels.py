"""The kernel of ``scatter``: a copy of an array with the cells a NumPy key selects
set to, or combined with, new values (``x.at[key].add(v)``, ``x[key] = v``).

Where the memory plan lets the result take over the array's memory, nothing is
copied: only the selected cells are written.

>>> import numpy as np
>>> from graphc.type import Op
>>> x, v, out = np.zeros(4), np.array([1.0, 2.0]), np.empty(4)
>>> idx = np.array([1, 1])
>>> scatter(Op.make("scatter", key=(("a", 2),), mode="add"), [x, v, idx], out, None)()
>>> out
array([0., 3., 0., 0.])
"""
from __future__ import annotations

import numpy as np

from ..shape.indexing import decode_basic, decode_with_arrays
from .cuda_blas import address

#: mode -> the NumPy ufunc combining old and new values (``set`` writes the new ones);
#: the modes are the operator layer's ``updates.MODES``
UFUNCS = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
          "divide": np.divide, "power": np.power, "min": np.minimum, "max": np.maximum}


def _same_memory(a, b) -> bool:
    """Whether ``a`` and ``b`` are the same cells (host or device arrays)."""
    return address(a) == address(b) and a.strides == b.strides and a.shape == b.shape


def scatter(op, ins, out, ctx):
    """``out`` = ``ins[0]`` with ``ins[0][key]`` set to or combined with ``ins[1]``
    (the key's index arrays are ``ins[2:]``)."""
    x, values, key, mode = ins[0], ins[1], op["key"], op["mode"]
    has_arrays = any(e[0] == "a" for e in key)
    in_place = _same_memory(out, x)
    ufunc = UFUNCS.get(mode)
    # the key on the output, bound once when it has no index arrays (a view)
    basic = out[decode_basic(key) + (Ellipsis,)] if not has_arrays else None

    def scatter():
        if not in_place:
            np.copyto(out, x)
        if basic is not None:
            if ufunc is None:
                basic[...] = values
            else:
                ufunc(basic, values, out=basic)
            return
        where = decode_with_arrays(key, dict(enumerate(ins)))
        if ufunc is None:
            out[where] = values
        else:
            # ufunc.at combines repeated indices one by one (JAX's .at semantics); the
            # new values are copied first when they are a view of the memory written
            new = values.copy() if np.may_share_memory(values, out) else values
            ufunc.at(out, where, new)
    return scatter

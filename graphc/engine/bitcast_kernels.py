"""The CPU kernel of ``bitcast``: the input's bytes copied unchanged into the output,
which is seen as the input's dtype while it is written (the two have one size).

>>> import numpy as np
>>> out = np.empty(1, np.int32)
>>> bitcast(None, [np.array([1.0], np.float32)], out, None)()
>>> hex(out[0])
'0x3f800000'
"""
from __future__ import annotations

from functools import partial

import numpy as np


def bitcast(op, ins, out, ctx):
    """Copy ``ins[0]`` into ``out`` seen as ``ins[0]``'s dtype: no conversion."""
    return partial(np.copyto, out.view(ins[0].dtype), ins[0])

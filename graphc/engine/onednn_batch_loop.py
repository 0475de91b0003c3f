"""The loop of :mod:`.onednn_batch` (imported only when a batch is made: it imports
Numba). ``dnnl_primitive_execute`` is called through its address, an argument, so the
compiled loop holds no address of this process and is cached on disk like the other
generated kernels.

>>> import numpy as np
>>> run(0, np.zeros(0, np.uint64), 0, np.zeros(0, np.uint64), np.zeros(2, np.int64))
False
"""
from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic


@intrinsic
def _execute(typingctx, address, handle, stream, args):
    """``dnnl_primitive_execute(handle, stream, 5, args)`` at ``address``: its status."""
    signature = types.int32(types.uint64, types.uint64, types.uint64, types.uint64)

    def codegen(context, builder, sig, values):
        word = ir.IntType(64)
        function = ir.FunctionType(ir.IntType(32), [word, word, ir.IntType(32), word])
        pointer = builder.inttoptr(values[0], function.as_pointer())
        return builder.call(pointer, [values[1], values[2], ir.Constant(ir.IntType(32), 5),
                                      values[3]])
    return signature, codegen


@njit(nogil=True, cache=True)
def run(address, handles, stream, args, status):
    """Execute each primitive in order; on a failure, its index and status into
    ``status`` and ``True``."""
    for i in range(handles.size):
        code = _execute(address, handles[i], stream, args[i])
        if code != 0:
            status[0], status[1] = i, code
            return True
    return False


__all__ = ["run"]

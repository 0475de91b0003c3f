"""The device program's kernel builders for the kinds whose CPU builder does not carry
over to CuPy through NumPy's dispatch protocols, and the kinds that run on the host.

Each builder is ``builder(op, ins, out, ctx, xp) -> kernel`` (the CPU's builder
signature plus the array module). :data:`DEVICE_BUILDERS` maps kinds to them;
:data:`HOST_CHECKS` names the kinds whose kernel reads back on the host, which a
captured run launches between its CUDA graphs.

>>> sorted(HOST_CHECKS & {"delay", "inv", "one_hot", "matmul"})
['delay', 'inv', 'one_hot']
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..type.kinds import reference_function
from . import cpu_kernels, loop_kernels, random_kernels
from .cpu_kernels import build_kernel
from .cuda_graphs import LibraryCall


def _affine_draw(method, factors):
    """The builder of a draw ``method`` (``random`` or ``standard_normal``) scaled and
    shifted: ``factors(op) -> (scale, shift)``."""
    def build(op, ins, out, ctx, xp):
        scale, shift = factors(op)

        def draw():
            xp.multiply(getattr(ctx.rng, method)(out.shape, dtype=out.dtype), scale, out)
            xp.add(out, shift, out)
        return draw
    return build


_uniform = _affine_draw("random", lambda op: (op["high"] - op["low"], op["low"]))
_normal = _affine_draw("standard_normal", lambda op: (op["scale"], op["loc"]))


def _bernoulli(op, ins, out, ctx, xp):
    p = op["p"]

    def bernoulli():
        xp.less(ctx.rng.random(out.shape, dtype=out.dtype), p, out)
    return bernoulli


def _draw(op, ins, out, ctx, xp):
    """``random_draw`` (one of NumPy's ``Generator`` methods): drawn by NumPy's generator
    on the host, seeded as the CPU's, and uploaded, so a device graph draws the same
    numbers as a CPU graph (CuPy's generator has few of the methods, and other
    streams); launched between captured graphs."""
    return LibraryCall(_on_host(random_kernels.random_draw)(
        op, ins, out, SimpleNamespace(rng=getattr(ctx, "host_rng", ctx.rng)), xp))


def _full_reduction(op, ins, out, ctx, xp):
    """A reduction: CuPy's own with ``out=``, except into a 0-d output, where CuPy 14's
    CUB path compares that output with a dtype and fails under NumPy 2 (seen on the
    H200): the 0-d result is computed, then written in."""
    if out.ndim:
        return cpu_kernels.reduction(op, ins, out, ctx)
    function = reference_function(op.kind)

    def reduce_all():
        out[...] = function(ins[0], axis=op["axis"], keepdims=op["keepdims"])
    return reduce_all


def _on_host(cpu_builder):
    """A CPU builder run on host copies of its inputs, its result uploaded: for the
    kinds that call back into Python with host arrays (``delay``) or run a graph of
    their own on the host (``loop``)."""
    def build(op, ins, out, ctx, xp):
        host_ins = [np.empty(a.shape, a.dtype) for a in ins]
        host_out = np.empty(out.shape, out.dtype)
        call = cpu_builder(op, host_ins, host_out, ctx)
        to_host = getattr(xp, "asnumpy", np.asarray)

        def on_host():
            for host, device in zip(host_ins, ins):
                host[...] = to_host(device)
            call()
            if hasattr(out, "set"):
                out.set(host_out)
            else:
                out[...] = host_out
        return on_host
    return build


#: kinds run on host copies with the CPU's kernel: the matrix decompositions and
#: solvers (NumPy's LAPACK: the CPU's results; CuPy's cuSOLVER covers only some of them,
#: with other conventions), the narrow formats' rounding (ml_dtypes' casts, which
#: CuPy arrays do not have) and the detection ops (RoIAlign's loop over boxes and
#: non-maximum suppression's data-dependent selection read their boxes on the host; top_k
#: ranks one row at a time)
HOST_KERNELS = frozenset({"inv", "solve", "det", "cholesky", "pinv", "slogdet", "qr", "svd",
                          "eigh", "eig", "round_to_format", "roi_align", "roi_align_backward",
                          "roi_align_levels", "non_max_suppression", "top_k"})


#: kinds whose CPU builder does not carry over to the device through NumPy's dispatch:
#: ``builder(op, ins, out, ctx, xp)``. CuPy's generator ignores ``out=`` (each draw
#: fills it with one number), so the uniform, normal and Bernoulli draws are made at the
#: output's size and written in; ``random_draw`` draws on the host (:func:`_draw`); ``one_hot`` makes its class row with ``xp``; full reductions into 0-d outputs;
#: ``delay`` calls its function, and ``loop`` runs its body (a graph compiled for
#: the host), on host copies.
DEVICE_BUILDERS = {"random_uniform": _uniform, "random_normal": _normal,
                   "random_bernoulli": _bernoulli, "random_draw": _draw,
                   **{kind: _full_reduction for kind in ("sum", "prod", "max", "min", "mean",
                                                          "any", "all")},
                   "delay": _on_host(cpu_kernels.delay),
                   **{kind: _on_host(build_kernel) for kind in HOST_KERNELS},
                   "loop": _on_host(loop_kernels.loop),
                   "one_hot": lambda op, ins, out, ctx, xp: cpu_kernels.one_hot(op, ins, out,
                                                                                ctx, xp)}
#: kinds whose device kernel reads back on the host (so it waits for the device)
HOST_CHECKS = frozenset({"one_hot", "delay", "loop"}) | HOST_KERNELS

"""The kernels of ``loop`` (a loop's body graph, compiled once and run once per
step, the carried values updated in place as the body graph's variables) and
``loop_part`` (one result out of a loop's bytes).

The body graph is compiled when the loop's kernel is built, with the outer
graph's kernel choice; each run of the outer graph assigns the carried and outside
values, runs the body ``length`` times (or while its condition holds) feeding the
index and the scanned slices, stacks the per-step outputs, and copies the final
carried values out.

>>> import numpy as np, graphc, graphc.ndarray as N
>>> x = N.var("x", (2,))
>>> g = graphc.compile([x], N.fori_loop(0, 3, lambda i, v: v + i, x))
>>> g.run(x=np.zeros(2, np.float32))
array([3., 3.], dtype=float32)
"""
from __future__ import annotations

import numpy as np


def _views(out, body):
    """Each result's array: ``out`` itself, or its part of ``out``'s bytes."""
    if body.parts is None:
        return [out]
    return [out[offset:offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize]
            .view(dtype).reshape(shape) for offset, shape, dtype in body.parts]


def loop(op, ins, out, ctx):
    from ..compiler import compile as compile_graph   # the body is a graph of its own

    body = op["body"]
    updates = dict(zip(body.carries, body.new_carries))
    # the body runs on the arrays this kernel is given, host arrays (on a device, the
    # device program hands it host copies: engine.device's _on_host)
    sub = compile_graph(body.inputs, list(body.ys), updates, kernels=ctx.kernels, device="cpu")
    carries = [v.name for v in body.carries]
    xs = [v.name for v in body.xs]
    n_carry, n_xs = len(carries), len(xs)
    outer = {v.name: a for v, a in zip(body.outer, ins[n_carry + n_xs:])}
    results = _views(out, body)
    stacked = results[n_carry:]
    reseed = body.stateful

    def run():
        if reseed:      # the body's draws follow the outer graph's generator
            sub.seed(int(ctx.rng.integers(2 ** 63)))
        sub.assign(**dict(zip(carries, ins[:n_carry])), **outer)
        if body.length is None:                         # a while loop
            go = bool(ins[-1])
            while go:
                go = bool(sub.run()[0])
        else:
            for t in range(body.length):
                position = body.length - 1 - t if body.reverse else t
                feeds = {name: ins[n_carry + k][position] for k, name in enumerate(xs)}
                if body.index is not None:
                    feeds["index"] = np.int64(body.start + position)
                ys = sub.run(**feeds)
                for target, y in zip(stacked, ys):
                    target[position] = y
        for target, name in zip(results, carries):
            np.copyto(target, sub.value(name))
    return run


def loop_part(op, ins, out, ctx):
    offset, dtype = op["offset"], np.dtype(op["dtype"])
    part = ins[0][offset:offset + out.size * dtype.itemsize].view(dtype).reshape(out.shape)
    return lambda: np.copyto(out, part)

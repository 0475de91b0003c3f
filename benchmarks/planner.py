"""Memory planned by graphc's two planners, against the lower bound, on varied graphs.

What it measures
----------------
For each graph below it compiles the same nodes twice, with ``plan="blocks"``
(Owl's pool of blocks) and ``plan="offsets"`` (one arena, greedy by size), and
reads ``g.stats()``:

- ``naive``: bytes if every computed value had memory of its own;
- ``lower bound``: the peak over evaluation steps of the bytes of values live
  at that step, counting a value that may overwrite its dying parent once
  with it (in-place aware, ``lower_bound_bytes``); the bound without in-place
  (``lower_bound_no_inplace_bytes``) is reported too;
- ``planned`` and ``ratio`` = planned / lower bound, for each strategy;
- build time per node: ``build_seconds / nodes`` (``graphc.compile`` alone:
  graph checks, liveness, planning, kernel binding), best of a few compiles.

Variables and constants own their memory and are in none of these figures.
Where ``graphc.compile`` has an optimiser (``optimise=``), the graph is planned
as written (optimiser off) unless ``--optimise`` is given.
Every plan is also verified with graphc's independent checker (not timed).
Issue targets: offsets within 5 % of the lower bound, blocks within 25 %,
build under 20 µs a node.

Graphs: a multi-layer perceptron forward pass and a hand-written training
step (forward, backward, SGD updates; the demo's, and a deeper one with
biases, batch 128); long chains (uniform shape, and matmul layers of varying
width); repeated diamonds; residual blocks; wide fan-out (one value feeding
many branches, reduced and summed, or stacked); random DAGs of broadcasting,
reducing and matmul ops; a convolution network written with
pad/slice/stack/transpose/reshape/matmul (im2col), forward and a training step.

Run from the repository root: ``python3 benchmarks/planner.py [--quick]``.
Prints a markdown table and writes ``benchmarks/results/planner.json``.
"""
from __future__ import annotations

import argparse
import gc
import inspect
import os
import platform
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

import graphc  # noqa: E402
from _report import write_json  # noqa: E402
import graphc.ndarray as N  # noqa: E402
from graphc.demo import build as demo_build  # noqa: E402
from graphc.engine.checker import check_plan  # noqa: E402

#: whether graphc.compile takes ``optimise=`` (rewrites change the graph planned)
HAS_OPTIMISER = "optimise" in inspect.signature(graphc.compile).parameters


# -- graphs: each returns (inputs, outputs, updates) -----------------------------------

def mlp(batch=128, sizes=(784, 512, 256, 128, 10), train=False, lr=0.05):
    """An MLP with biases and ReLU, softmax cross-entropy loss; with ``train`` its
    backward pass written by hand and SGD updates of every weight and bias."""
    x = N.var("x", (batch, sizes[0]))
    labels = N.var("labels", (batch,), np.int64)
    ws = [N.var(f"w{i}", (a, b)) for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]))]
    bs = [N.var(f"b{i}", (b,)) for i, b in enumerate(sizes[1:])]
    hs, zs = [x], []
    for i, (w, b) in enumerate(zip(ws, bs)):
        z = hs[-1] @ w + b
        zs.append(z)
        if i < len(ws) - 1:
            hs.append(N.relu(z))
    logits = zs[-1]
    logp = logits - N.logsumexp(logits, axis=1, keepdims=True)
    target = N.one_hot(labels, sizes[-1])
    loss = -N.sum(logp * target) / batch
    inputs = [x, labels] + ws + bs
    if not train:
        return inputs, [loss], None
    updates = {}
    g = (N.exp(logp) - target) / batch
    for i in reversed(range(len(ws))):
        dw = hs[i].T @ g
        db = N.sum(g, axis=0)
        if i > 0:
            g = (g @ ws[i].T) * (zs[i - 1] > 0)
        updates[ws[i]] = ws[i] - lr * dw
        updates[bs[i]] = bs[i] - lr * db
    return inputs, [loss], updates


def demo():
    """graphc.demo.build(): 784-256-10, batch 64, training step."""
    return demo_build()


def chain_uniform(ops=1000, shape=(256, 256)):
    """A chain of elementwise ops on one shape: every op can work in place."""
    x = N.var("x", shape)
    h = x
    for i in range(ops):
        h = [N.sin, N.exp, lambda v: v * 0.5, lambda v: v + x][i % 4](h)
    return [x], [h], None


def chain_widths(layers=200, batch=64, widths=(64, 512, 128, 1024, 32, 256)):
    """A chain of dense layers whose width changes every layer (tanh between)."""
    x = N.var("x", (batch, widths[0]))
    inputs, h = [x], x
    for i in range(layers):
        a, b = widths[i % len(widths)], widths[(i + 1) % len(widths)]
        w = N.var(f"w{i}", (a, b))
        inputs.append(w)
        h = N.tanh(h @ w)
    return inputs, [N.sum(h)], None


def diamonds(count=200, shape=(128, 128)):
    """Repeated diamonds: h -> (exp h, sin h * h) -> their sum."""
    x = N.var("x", shape)
    h = x
    for _ in range(count):
        h = N.exp(h) * 0.1 + N.sin(h) * h
    return [x], [h], None


def residual(blocks=50, batch=128, width=256, expand=4):
    """Residual blocks: h + W2 relu(W1 h), the hidden layer ``expand`` times wider."""
    x = N.var("x", (batch, width))
    inputs, h = [x], x
    for i in range(blocks):
        w1 = N.var(f"w1_{i}", (width, width * expand))
        w2 = N.var(f"w2_{i}", (width * expand, width))
        inputs += [w1, w2]
        h = h + N.relu(h @ w1) @ w2
    return inputs, [N.sum(h)], None


def fanout_reduce(branches=64, batch=256, width=512):
    """One value feeding many branches, each reduced to a column, then summed."""
    x = N.var("x", (batch, width))
    w = N.var("w", (width, width))
    v = x @ w
    total = None
    for i in range(branches):
        r = N.sum(N.tanh(v * (1.0 + i / branches)) * v, axis=1, keepdims=True)
        total = r if total is None else total + r
    return [x, w], [total], None


def fanout_stack(branches=32, batch=128, width=256):
    """One value feeding many full-size branches, stacked and reduced at the end:
    every branch result is live at the stack."""
    x = N.var("x", (batch, width))
    branch_results = [N.exp(N.sin(x * (0.5 + i)) * 0.5) for i in range(branches)]
    stacked = N.stack(branch_results, axis=0)
    return [x], [N.sum(N.max(stacked, axis=0))], None


def random_dag(nodes=500, seed=0, base=128):
    """A random DAG over shapes (b, b), (b, 1), (1, b): unary maths, broadcasting
    binaries, keepdims reductions, matmuls; parents drawn mostly among recent
    values. Every value nobody consumes is summed into the one output."""
    rng = random.Random(seed)
    inputs = [N.var("x", (base, base)), N.var("r", (base, 1)), N.var("c", (1, base))]
    pool = list(inputs)
    used = set()

    def pick(shape_ok=None):
        candidates = pool if shape_ok is None else [v for v in pool if shape_ok(v.shape)]
        depth = min(int(rng.expovariate(1 / 6)), len(candidates) - 1)
        return candidates[len(candidates) - 1 - depth]

    for _ in range(nodes):
        r = rng.random()
        if r < 0.3:
            a = pick()
            v = rng.choice([N.exp, N.tanh, N.sin, N.negative, N.sqrt, N.relu])(a)
            parents = [a]
        elif r < 0.65:
            a, b = pick(), pick()
            v = rng.choice([N.add, N.multiply, N.maximum, N.subtract])(a, b)
            parents = [a, b]
        elif r < 0.8:
            a = pick(lambda s: s == (base, base))
            v = N.sum(a, axis=rng.choice([0, 1]), keepdims=True)
            parents = [a]
        else:
            a = pick(lambda s: s[1] == base)
            b = pick(lambda s: s[0] == base)
            v = a @ b
            parents = [a, b]
        used.update(id(p) for p in parents)
        pool.append(v)
    sinks = [v for v in pool[len(inputs):] if id(v) not in used]
    total = None
    for v in sinks:
        total = N.sum(v) if total is None else total + N.sum(v)
    return inputs, [total], None


# -- convolution by im2col: pad, slices, stack, transpose, reshape, matmul ---------------

def conv3x3(x, w, b):
    """``x`` (B, C, H, W) * ``w`` (C*9, F) + ``b`` (F,), 'same' padding -> (B, F, H, W).
    Also returns the (B*H*W, C*9) patches (the backward pass needs them)."""
    B, C, H, W = x.shape
    xp = N.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = [xp[:, :, i:i + H, j:j + W] for i in range(3) for j in range(3)]
    patches = N.reshape(N.transpose(N.stack(cols, axis=2), (0, 3, 4, 1, 2)), (B * H * W, C * 9))
    y = N.reshape(patches @ w, (B, H, W, w.shape[1])) + b
    return N.transpose(y, (0, 3, 1, 2)), patches


def conv3x3_backward(dy, patches, w, x_shape):
    """Gradients of :func:`conv3x3` with respect to ``w``, ``b`` and ``x`` (col2im as
    nine padded slices summed)."""
    B, C, H, W = x_shape
    F = w.shape[1]
    dy2 = N.reshape(N.transpose(dy, (0, 2, 3, 1)), (B * H * W, F))
    dw = patches.T @ dy2
    db = N.sum(dy2, axis=0)
    dpatches = N.transpose(N.reshape(dy2 @ w.T, (B, H, W, C, 9)), (0, 3, 4, 1, 2))  # B,C,9,H,W
    dx = None
    for k in range(9):
        i, j = divmod(k, 3)
        shifted = N.pad(dpatches[:, :, k], ((0, 0), (0, 0), (i, 2 - i), (j, 2 - j)))
        dx = shifted if dx is None else dx + shifted
    return dw, db, dx[:, :, 1:H + 1, 1:W + 1]


def maxpool2(x):
    B, C, H, W = x.shape
    x6 = N.reshape(x, (B, C, H // 2, 2, W // 2, 2))
    return N.max(x6, axis=(3, 5)), x6


def maxpool2_backward(dy, x6, pooled):
    B, C, h, w = pooled.shape
    peak = N.reshape(pooled, (B, C, h, 1, w, 1))
    mask = (x6 == peak)
    dx6 = N.where(mask, N.reshape(dy, (B, C, h, 1, w, 1)), 0.0)
    return N.reshape(dx6, (B, C, h * 2, w * 2))


def convnet(batch=16, channels=(3, 16, 32), size=32, classes=10, train=False, lr=0.01):
    """conv3x3-relu-pool twice, then a dense layer and softmax cross-entropy."""
    x = N.var("x", (batch, channels[0], size, size))
    labels = N.var("labels", (batch,), np.int64)
    ws = [N.var(f"k{i}", (a * 9, b)) for i, (a, b) in enumerate(zip(channels[:-1], channels[1:]))]
    bs = [N.var(f"kb{i}", (b,)) for i, b in enumerate(channels[1:])]
    flat = channels[-1] * (size // 2 ** len(ws)) ** 2
    wd = N.var("wd", (flat, classes))
    h, saved = x, []
    for w, b in zip(ws, bs):
        z, patches = conv3x3(h, w, b)
        a = N.relu(z)
        pooled, x6 = maxpool2(a)
        saved.append((h, z, patches, x6, pooled))
        h = pooled
    hf = N.reshape(h, (batch, flat))
    logits = hf @ wd
    logp = logits - N.logsumexp(logits, axis=1, keepdims=True)
    target = N.one_hot(labels, classes)
    loss = -N.sum(logp * target) / batch
    inputs = [x, labels] + ws + bs + [wd]
    if not train:
        return inputs, [loss], None
    g = (N.exp(logp) - target) / batch
    updates = {wd: wd - lr * (hf.T @ g)}
    dh = N.reshape(g @ wd.T, h.shape)
    for i in reversed(range(len(ws))):
        hin, z, patches, x6, pooled = saved[i]
        da = maxpool2_backward(dh, x6, pooled)
        dz = da * (z > 0)
        dw, db, dx = conv3x3_backward(dz, patches, ws[i], hin.shape)
        updates[ws[i]] = ws[i] - lr * dw
        updates[bs[i]] = bs[i] - lr * db
        dh = dx
    return inputs, [loss], updates


def graphs(quick: bool):
    """``name -> (description, builder)``; smaller sizes with ``quick``."""
    if quick:
        return {
            "mlp_forward": ("784-512-256-128-10, batch 128", lambda: mlp()),
            "mlp_train": ("same + backward + SGD", lambda: mlp(train=True)),
            "demo_train": ("graphc.demo.build()", demo),
            "chain_uniform": ("200 elementwise ops, 256x256", lambda: chain_uniform(200)),
            "chain_widths": ("60 dense layers, widths 32..1024", lambda: chain_widths(60)),
            "diamonds": ("50 diamonds, 128x128", lambda: diamonds(50)),
            "residual": ("10 residual blocks 256-1024-256", lambda: residual(10)),
            "fanout_reduce": ("16 branches of 256x512, reduced", lambda: fanout_reduce(16)),
            "fanout_stack": ("16 branches of 128x256, stacked", lambda: fanout_stack(16)),
            "random_dag_a": ("300 random ops, seed 0", lambda: random_dag(300, 0)),
            "random_dag_b": ("300 random ops, seed 1, 64", lambda: random_dag(300, 1, 64)),
            "convnet_forward": ("2 conv3x3+pool, batch 8", lambda: convnet(batch=8)),
            "convnet_train": ("same + backward + SGD", lambda: convnet(batch=8, train=True)),
        }
    return {
        "mlp_forward": ("784-512-256-128-10, batch 128", lambda: mlp()),
        "mlp_train": ("same + backward + SGD", lambda: mlp(train=True)),
        "mlp_train_deep": ("784-1024x4-10, batch 128, train",
                           lambda: mlp(sizes=(784, 1024, 1024, 1024, 1024, 10), train=True)),
        "demo_train": ("graphc.demo.build()", demo),
        "chain_uniform": ("1000 elementwise ops, 256x256", lambda: chain_uniform(1000)),
        "chain_widths": ("200 dense layers, widths 32..1024", lambda: chain_widths(200)),
        "diamonds": ("200 diamonds, 128x128", lambda: diamonds(200)),
        "residual": ("50 residual blocks 256-1024-256", lambda: residual(50)),
        "fanout_reduce": ("64 branches of 256x512, reduced", lambda: fanout_reduce(64)),
        "fanout_stack": ("32 branches of 128x256, stacked", lambda: fanout_stack(32)),
        "random_dag_a": ("500 random ops, seed 0", lambda: random_dag(500, 0)),
        "random_dag_b": ("2000 random ops, seed 1, 64", lambda: random_dag(2000, 1, 64)),
        "random_dag_c": ("8000 random ops, seed 2, 64", lambda: random_dag(8000, 2, 64)),
        "convnet_forward": ("2 conv3x3+pool, batch 16", lambda: convnet()),
        "convnet_train": ("same + backward + SGD", lambda: convnet(train=True)),
    }


# -- measuring -------------------------------------------------------------------------

def measure(name, description, builder, tries, optimise=False):
    t0 = time.perf_counter()
    inputs, outputs, updates = builder()
    construct = time.perf_counter() - t0
    row = {"graph": name, "description": description, "construct_seconds": construct}
    for strategy in ("blocks", "offsets"):
        best, stats, g = None, None, None
        for _ in range(tries):
            gc.collect()
            options = {"optimise": optimise} if HAS_OPTIMISER else {}
            g = graphc.compile(inputs, outputs, updates, plan=strategy, **options)
            s = g.stats()
            if best is None or s["build_seconds"] < best:
                best, stats = s["build_seconds"], s
        check_plan(g.liveness, g.plan)  # raises if two live values share bytes
        row.update({"nodes": stats["nodes"], "edges": stats["edges"], "steps": stats["steps"],
                    "input_bytes": stats["input_bytes"],
                    "naive_bytes": stats["naive_bytes"],
                    "lower_bound_bytes": stats["lower_bound_bytes"],
                    "lower_bound_no_inplace_bytes": stats["lower_bound_no_inplace_bytes"]})
        row[strategy] = {"planned_bytes": stats["planned_bytes"], "ratio": stats["plan_ratio"],
                         "buffers": stats["blocks"], "inplace_values": stats["inplace_values"],
                         "build_seconds": best,
                         "build_us_per_node": best / stats["nodes"] * 1e6}
        del g
    print(f"  {name}: {row['nodes']} nodes, blocks {row['blocks']['ratio']:.3f}, "
          f"offsets {row['offsets']['ratio']:.3f}", file=sys.stderr)
    return row


def _bytes(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def markdown(rows) -> str:
    lines = ["| graph | nodes | variables | naive | lower bound | LB no in-place | blocks | ratio | "
             "offsets | ratio | build µs/node (blocks / offsets) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        b, o = r["blocks"], r["offsets"]
        flag_b = "" if b["ratio"] <= 1.25 else " ✗"
        flag_o = "" if o["ratio"] <= 1.05 else " ✗"
        slow = "" if max(b["build_us_per_node"], o["build_us_per_node"]) < 20 else " ✗"
        lines.append(
            f"| {r['graph']} | {r['nodes']} | {_bytes(r['input_bytes'])} | "
            f"{_bytes(r['naive_bytes'])} | "
            f"{_bytes(r['lower_bound_bytes'])} | {_bytes(r['lower_bound_no_inplace_bytes'])} | "
            f"{_bytes(b['planned_bytes'])} | {b['ratio']:.3f}{flag_b} | "
            f"{_bytes(o['planned_bytes'])} | {o['ratio']:.3f}{flag_o} | "
            f"{b['build_us_per_node']:.1f} / {o['build_us_per_node']:.1f}{slow} |")
    lines += ["", "variables: bytes of the input variables (not planned; compile allocates them). "
              "ratio = planned / lower bound (in-place aware). ✗: misses the target "
              "(blocks ≤ 1.25, offsets ≤ 1.05, build < 20 µs/node)."]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller graphs (a few seconds)")
    parser.add_argument("--optimise", action="store_true",
                        help="plan the optimised graph (default: the graph as written)")
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results",
                                                      "planner.json"))
    args = parser.parse_args(argv)
    tries = 3
    started = time.perf_counter()
    if args.optimise and not HAS_OPTIMISER:
        parser.error("this graphc.compile has no optimise= option")
    rows = [measure(name, desc, builder, tries, args.optimise)
            for name, (desc, builder) in graphs(args.quick).items()]
    result = {"benchmark": "planner", "quick": args.quick, "graphc": graphc.__version__,
              "optimised": args.optimise,
              "numpy": np.__version__, "python": platform.python_version(),
              "cpus": os.cpu_count(), "graphs": rows,
              "seconds": time.perf_counter() - started}
    print(markdown(rows))
    print(f"\n(total {result['seconds']:.1f} s)")
    write_json(result, args.out)


if __name__ == "__main__":
    main()

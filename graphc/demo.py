"""The Quick-start demo: build a small MLP training step as one graph, compile
it with both memory planners, run it, and print what the compiler did.

Run it with ``python -m graphc.demo``.
"""
from __future__ import annotations

import time

import numpy as np

import graphc
import graphc.eager as E
import graphc.ndarray as N


def build(batch=64, features=784, hidden=256, classes=10):
    """An MLP with a hand-written backward pass and an SGD update: one graph."""
    x = N.var("x", (batch, features))
    labels = N.var("labels", (batch,), np.int64)
    w1 = N.var("w1", (features, hidden))
    w2 = N.var("w2", (hidden, classes))
    pre = x @ w1
    h = N.relu(pre)
    logits = h @ w2
    logp = logits - N.logsumexp(logits, axis=1, keepdims=True)
    target = N.one_hot(labels, classes)
    loss = -N.sum(logp * target) / batch
    dlogits = (N.exp(logp) - target) / batch
    dw2 = h.T @ dlogits
    dh = (dlogits @ w2.T) * (pre > 0)
    dw1 = x.T @ dh
    lr = 0.1
    return [x, labels, w1, w2], [loss], {w1: w1 - lr * dw1, w2: w2 - lr * dw2}


def main():
    rng = np.random.default_rng(0)
    batch, features, hidden, classes = 64, 784, 256, 10
    X = rng.standard_normal((batch, features)).astype(np.float32)
    Y = rng.integers(0, classes, batch)
    W1 = (rng.standard_normal((features, hidden)) * 0.05).astype(np.float32)
    W2 = (rng.standard_normal((hidden, classes)) * 0.05).astype(np.float32)

    print("graphc demo: a 784-256-10 MLP training step (forward, backward, SGD) as one graph\n")
    for plan in ("blocks", "offsets"):
        inputs, outputs, updates = build(batch, features, hidden, classes)
        step = graphc.compile(inputs, outputs, updates, plan=plan, check=True)
        step.assign(w1=W1, w2=W2)
        losses = [float(step.run(x=X, labels=Y)[0]) for _ in range(20)]
        times = []
        for _ in range(50):
            t = time.perf_counter()
            step.run(x=X, labels=Y)
            times.append(time.perf_counter() - t)
        s = step.stats()
        print(f"plan={plan}: {s['nodes_unoptimised']} nodes as written -> {s['nodes']} after "
              f"the optimiser ({s['edges_unoptimised']} -> {s['edges']} edges), "
              f"{s['steps']} kernel steps, built in {s['build_seconds'] * 1e3:.1f} ms")
        changes = ", ".join(f"{k} {v}" for k, v in s["optimiser_changes"].items() if v)
        print(f"  rewrites: {changes}")
        print(f"  memory: planned {s['planned_bytes']:,} B in {s['blocks']} buffer(s); "
              f"lower bound {s['lower_bound_bytes']:,} B (ratio {s['plan_ratio']:.3f}); "
              f"without reuse {s['naive_bytes']:,} B; {s['inplace_values']} values in place")
        print(f"  loss over 20 steps: {losses[0]:.4f} -> {losses[-1]:.4f}; "
              f"median step {np.median(times) * 1e3:.2f} ms")

    print("\nwhat each optimiser round did (blocks plan; each graph planned on its own):")
    print(f"  {'after':<30}{'changes':>8}{'nodes':>7}{'edges':>7}{'planned B':>12}{'bound B':>12}")
    for row in step.pass_report("blocks"):
        print(f"  {row['passes']:<30}{row['changes']:>8}{row['nodes']:>7}{row['edges']:>7}"
              f"{row['planned_bytes']:>12,}{row['lower_bound_bytes']:>12,}")

    # the same forward pass eagerly, to show both modes agree
    h = E.relu(X @ W1)
    logits = h @ W2
    eager_loss = -np.mean((logits - E.logsumexp(logits, axis=1, keepdims=True))[
        np.arange(batch), Y])
    inputs, outputs, updates = build(batch, features, hidden, classes)
    forward = graphc.compile(inputs, outputs)
    graph_loss = float(forward.run(x=X, labels=Y, w1=W1, w2=W2)[0])
    print(f"\nfirst-step loss: graph {graph_loss:.6f}, eager {eager_loss:.6f}")
    print("graph as DOT: call .to_dot() on a compiled graph (nodes sharing a buffer share a colour)")


if __name__ == "__main__":
    main()

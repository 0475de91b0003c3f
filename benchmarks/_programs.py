"""The NumPy-style programs of benchmarks/numpy_programs.py, each written ONCE
against a namespace ``xp`` so the same source runs on NumPy (``numpy``), on
graphc (``graphc.ndarray``: every call builds a node, compiled once) and on JAX
(``jax.numpy`` under ``jax.jit``).

The programs are functional (no slice assignment, which graphc's lazy arrays do
not support): a stencil pads its interior back to full size with ``xp.pad``
instead of writing ``u[1:-1, 1:-1] = ...``. They use only what all three
namespaces share: elementwise ufuncs, reductions with ``axis``/``keepdims``,
``@``, slicing, ``xp.pad``, ``xp.swapaxes``, ``xp.arange``, ``astype``.

>>> import numpy as np
>>> p = PROGRAMS["covariance"]
>>> arrays = p.make_inputs(0, scale=0.01)
>>> p.fn(np, **arrays).shape
(8, 8)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

F32, F64 = np.float32, np.float64


@dataclass(frozen=True)
class Program:
    """One benchmark program: ``fn(xp, **inputs)`` returns an array or a tuple of
    arrays; ``shapes`` maps each input's name to ``(shape, dtype, kind)`` where
    ``kind`` says how :meth:`make_inputs` draws it (``"normal"``, ``"uniform"``,
    ``"positive"``, ``"fan_in"``, ``"labels"``). ``rtol``/``atol`` bound how far another
    engine's result may lie from NumPy's (reductions and GEMMs reorder sums).
    """
    name: str
    title: str
    fn: Callable
    shapes: dict
    rtol: float = 1e-4
    atol: float = 1e-5

    def make_inputs(self, seed: int, scale: float = 1.0) -> dict:
        """The inputs as NumPy arrays, drawn from ``seed``; ``scale`` < 1 shrinks
        every axis longer than 8 (quick tests of the programs themselves).

        Example: ``PROGRAMS["sobel"].make_inputs(0)["image"].shape``
        """
        rng = np.random.default_rng(seed)
        arrays = {}
        for name, (shape, dtype, kind) in self.shapes.items():
            shape = tuple(max(8, int(s * scale)) if s > 8 else s for s in shape)
            if kind == "normal":
                value = rng.standard_normal(shape)
            elif kind == "uniform":
                value = rng.random(shape)
            elif kind == "positive":
                value = 0.5 + rng.random(shape)
            elif kind == "fan_in":     # a weight matrix (in, out): unit-variance outputs
                value = rng.standard_normal(shape) / math.sqrt(shape[0])
            elif kind == "labels":
                value = (rng.random(shape) < 0.5)
            else:
                raise ValueError(f"program {self.name!r}: input {name!r} has unknown kind "
                                 f"{kind!r}; expected normal, uniform, positive, fan_in or labels")
            arrays[name] = np.ascontiguousarray(value, dtype=dtype)
        return arrays

    def outputs(self, xp, arrays: dict) -> tuple:
        """``fn``'s result as a tuple (one array or several)."""
        out = self.fn(xp, **arrays)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)


# -- stencils and image filters --------------------------------------------------------------
HEAT_STEPS = 6


def heat(xp, u):
    """``HEAT_STEPS`` Jacobi steps of the 2-D heat equation, zero (Dirichlet) boundary."""
    for _ in range(HEAT_STEPS):
        interior = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        u = xp.pad(interior, 1)
    return u


def sobel(xp, image):
    """Gradient magnitude of the 3x3 Sobel filter (valid region)."""
    a = image
    gx = ((a[:-2, 2:] + 2.0 * a[1:-1, 2:] + a[2:, 2:])
          - (a[:-2, :-2] + 2.0 * a[1:-1, :-2] + a[2:, :-2]))
    gy = ((a[2:, :-2] + 2.0 * a[2:, 1:-1] + a[2:, 2:])
          - (a[:-2, :-2] + 2.0 * a[:-2, 1:-1] + a[:-2, 2:]))
    return xp.sqrt(gx * gx + gy * gy)


# -- deep-learning blocks --------------------------------------------------------------------
def attention(xp, q, k, v):
    """Scaled dot-product attention over heads: softmax(q k^T / sqrt(d)) v."""
    scores = (q @ xp.swapaxes(k, -1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    scores = scores - xp.max(scores, axis=-1, keepdims=True)
    weights = xp.exp(scores)
    weights = weights / xp.sum(weights, axis=-1, keepdims=True)
    return weights @ v


def mlp2(xp, x, w1, b1, w2, b2):
    """A 2-layer perceptron's forward pass: relu(x w1 + b1) w2 + b2."""
    h = xp.maximum(x @ w1 + b1, 0.0)
    return h @ w2 + b2


def batchnorm_relu(xp, x, gamma, beta):
    """Training-mode batch normalisation over (N, H, W) of an NCHW batch, then ReLU."""
    mean = xp.mean(x, axis=(0, 2, 3), keepdims=True)
    centred = x - mean
    var = xp.mean(centred * centred, axis=(0, 2, 3), keepdims=True)
    y = centred * (1.0 / xp.sqrt(var + 1e-5)) * gamma + beta
    return xp.maximum(y, 0.0)


def gelu_silu_mlp(xp, x, w1, w3, w2):
    """A gated transformer MLP (GELU-tanh times SiLU) with a residual: elementwise heavy."""
    h = x @ w1
    gelu = 0.5 * h * (1.0 + xp.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))
    g = x @ w3
    silu = g / (1.0 + xp.exp(-g))
    return x + (gelu * silu) @ w2


# -- machine learning and statistics -----------------------------------------------------------
def kmeans_step(xp, points, centroids):
    """One Lloyd step: assign each point to its nearest centroid, then average."""
    k = centroids.shape[0]
    distances = (xp.sum(points * points, axis=1, keepdims=True) - 2.0 * (points @ centroids.T)
                 + xp.sum(centroids * centroids, axis=1)[None, :])
    nearest = xp.argmin(distances, axis=1)
    member = (nearest[:, None] == xp.arange(k)[None, :]).astype(points.dtype)
    counts = xp.sum(member, axis=0)
    return (member.T @ points) / xp.maximum(counts, 1.0)[:, None]


def logreg_step(xp, x, y, w):
    """One gradient step of logistic regression (mean cross-entropy, rate 0.1)."""
    p = 1.0 / (1.0 + xp.exp(-(x @ w)))
    grad = (x.T @ (p - y)) * (1.0 / x.shape[0])
    return w - 0.1 * grad


def covariance(xp, samples):
    """The sample covariance matrix of the columns (``numpy.cov(samples, rowvar=False)``)."""
    centred = samples - xp.mean(samples, axis=0, keepdims=True)
    return (centred.T @ centred) * (1.0 / (samples.shape[0] - 1))


def nbody(xp, pos, vel, mass):
    """One leapfrog-style step of softened gravity, all pairs: new positions and velocities."""
    dt, soft = 0.01, 0.01
    diff = pos[None, :, :] - pos[:, None, :]
    r2 = xp.sum(diff * diff, axis=-1) + soft
    inv_r3 = 1.0 / (r2 * xp.sqrt(r2))
    accel = xp.sum(diff * (inv_r3 * mass[None, :])[:, :, None], axis=1)
    vel = vel + dt * accel
    return pos + dt * vel, vel


PROGRAMS = {p.name: p for p in [
    Program("heat", f"2-D heat, {HEAT_STEPS} Jacobi steps, 1024² f64", heat,
            {"u": ((1024, 1024), F64, "uniform")}, rtol=1e-12, atol=1e-12),
    Program("sobel", "Sobel filter, 2048² f32", sobel,
            {"image": ((2048, 2048), F32, "uniform")}, rtol=1e-5, atol=1e-5),
    Program("attention", "softmax attention, 8 heads × 512 × 64 f32", attention,
            {"q": ((8, 512, 64), F32, "normal"), "k": ((8, 512, 64), F32, "normal"),
             "v": ((8, 512, 64), F32, "normal")}, rtol=1e-4, atol=1e-5),
    Program("kmeans", "k-means step, 20000 × 16 points, 32 centroids f64", kmeans_step,
            {"points": ((20000, 16), F64, "normal"), "centroids": ((32, 16), F64, "normal")},
            rtol=1e-9, atol=1e-9),
    Program("logreg", "logistic regression step, 8192 × 512 f32", logreg_step,
            {"x": ((8192, 512), F32, "normal"), "y": ((8192,), F32, "labels"),
             "w": ((512,), F32, "fan_in")}, rtol=1e-4, atol=1e-5),
    Program("mlp2", "2-layer MLP forward, 512 × 1024 → 1024 → 10 f32", mlp2,
            {"x": ((512, 1024), F32, "normal"), "w1": ((1024, 1024), F32, "fan_in"),
             "b1": ((1024,), F32, "normal"), "w2": ((1024, 10), F32, "fan_in"),
             "b2": ((10,), F32, "normal")}, rtol=1e-4, atol=1e-4),
    Program("batchnorm_relu", "batch norm + ReLU, 32 × 64 × 56² f32", batchnorm_relu,
            {"x": ((32, 64, 56, 56), F32, "normal"), "gamma": ((1, 64, 1, 1), F32, "positive"),
             "beta": ((1, 64, 1, 1), F32, "normal")}, rtol=1e-4, atol=1e-4),
    Program("covariance", "covariance matrix, 4096 × 256 f64", covariance,
            {"samples": ((4096, 256), F64, "normal")}, rtol=1e-10, atol=1e-10),
    Program("nbody", "n-body force step, 768 bodies f64", nbody,
            {"pos": ((768, 3), F64, "normal"), "vel": ((768, 3), F64, "normal"),
             "mass": ((768,), F64, "positive")}, rtol=1e-9, atol=1e-9),
    Program("gelu_silu_mlp", "GELU×SiLU MLP block, 4096 × 128 → 512 f32", gelu_silu_mlp,
            {"x": ((4096, 128), F32, "normal"), "w1": ((128, 512), F32, "fan_in"),
             "w3": ((128, 512), F32, "fan_in"), "w2": ((512, 128), F32, "fan_in")},
            rtol=1e-4, atol=1e-4),
]}

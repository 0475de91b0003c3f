"""A pre-norm transformer block: multi-head self-attention and a GELU MLP."""
import numpy as np

INPUTS = {"x": ((10, 16), "float32"), "wqkv": ((16, 48), "float32"),
          "wo": ((16, 16), "float32"), "w1": ((16, 32), "float32"), "w2": ((32, 16), "float32")}


def layer_norm(x, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def program(x, wqkv, wo, w1, w2, heads=4):
    t, d = x.shape
    q, k, v = np.split(layer_norm(x) @ wqkv, 3, axis=-1)
    q, k, v = (a.reshape(t, heads, d // heads).transpose(1, 0, 2) for a in (q, k, v))
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(d // heads)
    mask = np.triu(np.ones((t, t), dtype=bool), k=1)
    scores = np.where(mask, -np.inf, scores)
    attended = (softmax(scores) @ v).transpose(1, 0, 2).reshape(t, d)
    x = x + attended @ wo
    return x + gelu(layer_norm(x) @ w1) @ w2

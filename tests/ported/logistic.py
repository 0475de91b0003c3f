"""Logistic regression trained by full-batch gradient descent."""
import numpy as np

INPUTS = {"x": ((100, 3), "float64"), "y": ((100,), "float64"), "w": ((3,), "float64")}


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def train(x, y, w, b, lr=0.5, epochs=25):
    for _ in range(epochs):
        p = sigmoid(x @ w + b)
        w -= lr * x.T @ (p - y) / len(y)
        b -= lr * np.mean(p - y)
    return b


def program(x, y, w):
    labels = (y > 0).astype(x.dtype)
    b = train(x, labels, w, 0.0)
    p = sigmoid(x @ w + b)
    loss = -np.mean(labels * np.log(p) + (1 - labels) * np.log1p(-p))
    return w, b, loss, np.mean((p > 0.5) == (labels > 0.5))

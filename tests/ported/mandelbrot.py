"""Escape times of the Mandelbrot set on a grid of complex points."""
import numpy as np

INPUTS = {"re": ((30,), "float64"), "im": ((20,), "float64")}


def program(re, im, iterations=25):
    c = re[None, :] + 1j * im[:, None]
    z = np.zeros_like(c)
    escaped = np.zeros(c.shape, dtype=np.int64)
    for _ in range(iterations):
        inside = np.abs(z) <= 2.0
        z = np.where(inside, z * z + c, z)
        escaped += inside
    return escaped

"""Jacobi relaxation of Laplace's equation on a square, the boundary held fixed."""
import numpy as np

INPUTS = {"u": ((48, 48), "float32")}


def program(u, iterations=20):
    for _ in range(iterations):
        u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    return u

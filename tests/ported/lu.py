"""LU factorisation without pivoting (Doolittle), row by row in place."""
import numpy as np

INPUTS = {"a": ((12, 12), "float64")}


def program(a):
    a = a + a.shape[0] * np.eye(a.shape[0])      # diagonally dominant: no pivoting needed
    n = a.shape[0]
    for k in range(n - 1):
        a[k + 1:, k] /= a[k, k]
        a[k + 1:, k + 1:] -= np.outer(a[k + 1:, k], a[k, k + 1:])
    lower = np.tril(a, -1) + np.eye(n)
    upper = np.triu(a)
    return lower, upper

"""Ridge regression three ways: normal equations by Cholesky, QR and lstsq."""
import numpy as np

INPUTS = {"x": ((60, 5), "float64"), "y": ((60,), "float64")}


def program(x, y, ridge=0.5):
    gram = x.T @ x + ridge * np.eye(x.shape[1])
    chol = np.linalg.cholesky(gram)
    z = np.linalg.solve(chol, x.T @ y)
    w_chol = np.linalg.solve(chol.T, z)
    augmented = np.vstack([x, np.sqrt(ridge) * np.eye(x.shape[1])])
    target = np.concatenate([y, np.zeros(x.shape[1])])
    q, r = np.linalg.qr(augmented)
    w_qr = np.linalg.solve(r, q.T @ target)
    w_lstsq = np.linalg.lstsq(augmented, target, rcond=None)[0]
    residual = np.linalg.norm(x @ w_chol - y)
    return w_chol, w_qr, w_lstsq, residual, np.linalg.det(gram)

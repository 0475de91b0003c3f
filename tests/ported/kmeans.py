"""Lloyd's k-means: assign points to the nearest centre, move the centres."""
import numpy as np

INPUTS = {"points": ((150, 2), "float64"), "centres": ((4, 2), "float64")}


def program(points, centres, iterations=5):
    k = centres.shape[0]
    for _ in range(iterations):
        distances = np.sum((points[:, None, :] - centres[None, :, :]) ** 2, axis=-1)
        labels = np.argmin(distances, axis=1)
        members = labels[:, None] == np.arange(k)[None, :]
        counts = members.sum(axis=0)
        sums = members.T.astype(points.dtype) @ points
        centres = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], centres)
    inertia = np.min(distances, axis=1).sum()
    return centres, labels, inertia

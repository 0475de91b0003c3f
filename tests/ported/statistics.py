"""Column statistics of a data table: robust and classical summaries."""
import numpy as np

INPUTS = {"data": ((200, 4), "float64")}


def program(data):
    centred = data - data.mean(axis=0)
    scaled = centred / data.std(axis=0, ddof=1)
    summary = np.stack([np.median(data, axis=0), np.percentile(data, 90, axis=0),
                        np.quantile(data, 0.1, axis=0), data.min(axis=0), data.max(axis=0)])
    clipped = np.clip(scaled, -2.0, 2.0)
    return summary, np.cov(data, rowvar=False), np.corrcoef(data.T), clipped.mean(axis=0), \
        np.histogram(data[:, 0], bins=8, range=(-3, 3))[0]

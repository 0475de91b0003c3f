"""MNIST-format data: the IDX file reader, Fashion-MNIST from the Debian
package ``dataset-fashion-mnist`` (or any directory with MNIST-named files),
and a synthetic stand-in for machines without the data.

Images come back as float32 ``(N, 1, 28, 28)`` with values 0..255 (Owl's
network divides by 256 itself), labels as int64 ``(N,)``.

>>> x, y = synthetic_mnist(8, seed=0)
>>> x.shape, x.dtype, y.dtype
((8, 1, 28, 28), dtype('float32'), dtype('int64'))
"""
from __future__ import annotations

import gzip
import sys
import warnings
from pathlib import Path
from typing import NamedTuple, Optional

import numpy as np

from ..distributed.collectives import shard

#: where Debian's dataset-fashion-mnist installs its four gzipped IDX files
FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"

#: IDX type code -> big-endian dtype (the format's table)
IDX_DTYPES = {0x08: np.dtype(">u1"), 0x09: np.dtype(">i1"), 0x0B: np.dtype(">i2"),
              0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}

_GZIP_MAGIC = b"\x1f\x8b"

_FILES = {"train_images": ("train-images", "idx3"), "train_labels": ("train-labels", "idx1"),
          "test_images": ("t10k-images", "idx3"), "test_labels": ("t10k-labels", "idx1")}


class IDXError(ValueError):
    """A file that is not a well-formed IDX file (what is wrong, and where)."""


def parse_idx(data: bytes, source: str = "<bytes>") -> np.ndarray:
    """The array stored in the IDX bytes ``data`` (already decompressed), in
    native byte order. ``source`` names the file in errors.

    Example: ``parse_idx(bytes([0, 0, 8, 1, 0, 0, 0, 2, 7, 9]))`` is ``array([7, 9], uint8)``
    """
    if len(data) < 4:
        raise IDXError(f"{source}: {len(data)} bytes is too short for an IDX header "
                       "(4 bytes: 0, 0, type code, number of dimensions)")
    if data[0] != 0 or data[1] != 0:
        raise IDXError(f"{source}: bad magic number {data[:4].hex()}: an IDX file starts with "
                       "two zero bytes")
    code, ndim = data[2], data[3]
    dtype = IDX_DTYPES.get(code)
    if dtype is None:
        known = ", ".join(f"0x{c:02X}" for c in IDX_DTYPES)
        raise IDXError(f"{source}: unknown IDX type code 0x{code:02X}; expected one of {known}")
    if ndim == 0:
        raise IDXError(f"{source}: an IDX file needs at least one dimension, got 0")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise IDXError(f"{source}: truncated header: {ndim} dimensions need {header} bytes, "
                       f"the file has {len(data)}")
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", ndim, offset=4))
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) != expected:
        raise IDXError(f"{source}: dimensions {shape} of {dtype.newbyteorder('=')} need "
                       f"{expected} bytes with the header, the file has {len(data)}"
                       + (" (truncated)" if len(data) < expected else " (trailing bytes)"))
    array = np.frombuffer(data, dtype, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="))


def read_idx(path) -> np.ndarray:
    """The array in the IDX file ``path``, gzipped or not (recognised by content).

    Example: ``labels = read_idx("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz")``
    """
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise IDXError(f"{path}: corrupt gzip data: {exc}") from None
    return parse_idx(raw, str(path))


def write_idx(path, array: np.ndarray, compress: Optional[bool] = None) -> None:
    """Write ``array`` as an IDX file (gzipped when ``compress``, or when the
    name ends in ``.gz`` if ``compress`` is None).

    Example: ``write_idx(tmp / "labels-idx1-ubyte.gz", np.arange(10, dtype=np.uint8))``
    """
    array = np.asarray(array)
    code = next((c for c, d in IDX_DTYPES.items() if d.newbyteorder("=") == array.dtype.
                 newbyteorder("=")), None)
    if code is None or array.ndim == 0 or array.ndim > 255:
        raise IDXError(f"write_idx: cannot store a {array.ndim}-d {array.dtype} array; IDX "
                       "holds 1 to 255 dimensions of uint8, int8, int16, int32, float32, float64")
    data = (bytes([0, 0, code, array.ndim]) + np.asarray(array.shape, ">u4").tobytes()
            + array.astype(IDX_DTYPES[code]).tobytes())
    path = Path(path)
    if compress if compress is not None else path.suffix == ".gz":
        data = gzip.compress(data, compresslevel=1)
    path.write_bytes(data)


class Dataset(NamedTuple):
    """Train and test images (float32, (N, 1, H, W), 0..255) and labels (int64),
    and where they came from (``source``: a directory, or ``"synthetic"``)."""
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    source: str


def _find(directory: Path, stem: str, idx: str) -> Path:
    names = [f"{stem}-{idx}-ubyte", f"{stem}.{idx}-ubyte"]
    candidates = [n + ext for n in names for ext in (".gz", "")]
    for name in candidates:
        if (directory / name).is_file():
            return directory / name
    raise FileNotFoundError(f"no {stem} file in {directory}: looked for {', '.join(candidates)}")


def load_mnist_format(directory, limit: Optional[int] = None) -> Dataset:
    """The four MNIST-named IDX files of ``directory`` (``train-images-idx3-ubyte``,
    ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``,
    each optionally ``.gz``; ``train-images.idx3-ubyte`` also accepted), checked
    for consistent shapes. ``limit`` keeps the first ``limit`` examples of each split.

    Example: ``data = load_mnist_format("/data/mnist", limit=1000)``
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"MNIST data directory {directory} does not exist")
    arrays = {key: read_idx(_find(directory, *name)) for key, name in _FILES.items()}
    out = []
    for split in ("train", "test"):
        images, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise IDXError(f"{directory}: {split} images of shape {images.shape} and labels of "
                           f"shape {labels.shape}: expected (N, H, W) images and N labels")
        if images.dtype != np.uint8 or labels.dtype != np.uint8:
            raise IDXError(f"{directory}: {split} images and labels should be uint8, got "
                           f"{images.dtype} and {labels.dtype}")
        images, labels = images[:limit], labels[:limit]
        out += [images[:, None].astype(np.float32), labels.astype(np.int64)]
    return Dataset(*out, source=str(directory))


def load_fashion_mnist(directory=None, limit: Optional[int] = None) -> Dataset:
    """Fashion-MNIST from ``directory`` (default: Debian's
    ``/usr/share/datasets/fashion-mnist``, package dataset-fashion-mnist); real MNIST
    files work the same way. Raises ``FileNotFoundError`` when the files are missing:
    the caller decides whether to fall back (:func:`load_or_synthetic`).

    Example: ``x_train, y_train, x_test, y_test, source = load_fashion_mnist()``
    """
    return load_mnist_format(FASHION_MNIST_DIR if directory is None else directory, limit)


def synthetic_mnist(n: int, seed: int = 0, classes: int = 10,
                    image_size: int = 28) -> tuple[np.ndarray, np.ndarray]:
    """``n`` learnable stand-in images and labels: each class is a fixed random
    pattern of blobs plus noise, values 0..255, float32 (N, 1, H, W), labels int64.

    Example: ``x, y = synthetic_mnist(512, seed=0)``
    """
    rng = np.random.default_rng(seed)
    templates = np.random.default_rng(12345).random((classes, image_size, image_size))
    templates = (templates > 0.7).astype(np.float32)
    labels = rng.integers(0, classes, n)
    noise = rng.random((n, image_size, image_size), dtype=np.float32)
    images = np.clip(templates[labels] * 200.0 + noise * 80.0, 0, 255)
    return images[:, None].astype(np.float32), labels.astype(np.int64)


def load_or_synthetic(directory=None, limit: Optional[int] = None, synthetic_n: int = 10000,
                      seed: int = 0) -> Dataset:
    """Fashion-MNIST if it can be read, else synthetic data (``synthetic_n``
    training and ``synthetic_n // 6`` test examples), announced loudly: a
    ``UserWarning`` and a line on stderr. ``Dataset.source`` says which it is.

    Example: ``data = load_or_synthetic(); print(data.source)``
    """
    try:
        return load_fashion_mnist(directory, limit)
    except (OSError, IDXError) as exc:
        message = (f"graphc.neural: Fashion-MNIST not available ({exc}); using SYNTHETIC data "
                   f"instead (install the Debian package dataset-fashion-mnist)")
        warnings.warn(message, stacklevel=2)
        print(message, file=sys.stderr)
        n = synthetic_n if limit is None else min(synthetic_n, limit)
        x, y = synthetic_mnist(n, seed)
        xt, yt = synthetic_mnist(max(n // 6, 1), seed + 1)
        return Dataset(x, y, xt, yt, source="synthetic")


def batches(x: np.ndarray, y: np.ndarray, batch: int, seed: Optional[int] = None,
            communicator=None):
    """Consecutive full batches ``(x[i:i+batch], y[i:i+batch])`` (shuffled first
    when ``seed`` is given); the remainder is dropped (graphs have static shapes).

    With a ``communicator`` (data parallelism; every rank passes the same data and
    seed), ``batch`` is each rank's share: the data goes in global batches of
    ``batch * size`` rows, and this rank gets the ``rank``-th block of each, so the
    ranks together see what one process would at ``batch * size``.

    Example: ``for xb, yb in batches(x, y, 64, seed=epoch): trainer.step(xb, yb)``
    """
    if not isinstance(batch, (int, np.integer)) or batch < 1:
        raise ValueError(f"batches: batch must be a positive int, got {batch!r}")
    if len(x) != len(y):
        raise ValueError(f"batches: x has {len(x)} rows but y has {len(y)}")
    size = 1 if communicator is None else communicator.size
    order = np.arange(len(x)) if seed is None else np.random.default_rng(seed).permutation(
        len(x))
    step = batch * size
    for start in range(0, len(x) - step + 1, step):
        index = order[start:start + step]
        if communicator is not None:
            index = shard(index, communicator)
        yield np.ascontiguousarray(x[index]), np.ascontiguousarray(y[index])


__all__ = ["IDXError", "parse_idx", "read_idx", "write_idx", "Dataset", "load_mnist_format",
           "load_fashion_mnist", "synthetic_mnist", "load_or_synthetic", "batches",
           "FASHION_MNIST_DIR", "IDX_DTYPES"]

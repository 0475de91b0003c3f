"""MNIST-format data: the IDX reader and writer, directory loading, the
synthetic fallback and its loud announcement."""
import gzip
import struct
import warnings

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

from graphc.neural import data
from graphc.neural.data import IDXError, parse_idx, read_idx, write_idx
from opcheck import examples

IDX_NATIVE = [np.dtype(d) for d in ("uint8", "int8", "int16", "int32", "float32", "float64")]


def _idx_bytes(code, shape, payload):
    return bytes([0, 0, code, len(shape)]) + struct.pack(f">{len(shape)}I", *shape) + payload


@examples(30)
@given(st.sampled_from(IDX_NATIVE).flatmap(
    lambda d: hnp.arrays(d, hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=5))),
    st.booleans())
def test_write_then_read_round_trips(tmp_path_factory, array, compress):
    path = tmp_path_factory.mktemp("idx") / ("a.idx.gz" if compress else "a.idx")
    write_idx(path, array)
    assert (path.read_bytes()[:2] == b"\x1f\x8b") == compress
    back = read_idx(path)
    assert back.dtype == array.dtype and back.shape == array.shape
    np.testing.assert_array_equal(back, array)


def test_reads_a_hand_written_big_endian_file(tmp_path):
    # two 2x3 int16 images, bytes laid out as the format describes (big-endian)
    values = np.arange(-6, 6, dtype=np.int16).reshape(2, 2, 3)
    raw = _idx_bytes(0x0B, (2, 2, 3), values.astype(">i2").tobytes())
    (tmp_path / "plain").write_bytes(raw)
    (tmp_path / "zipped").write_bytes(gzip.compress(raw))
    for name in ("plain", "zipped"):
        got = read_idx(tmp_path / name)
        assert got.dtype == np.int16 and got.dtype.isnative
        np.testing.assert_array_equal(got, values)


@pytest.mark.parametrize("raw, message", [
    (b"\x00\x00", "too short"),
    (b"\x01\x00\x08\x01" + struct.pack(">I", 1) + b"\x05", "magic number"),
    (b"\x00\x00\x07\x01" + struct.pack(">I", 1) + b"\x05", "type code 0x07"),
    (b"\x00\x00\x08\x00", "at least one dimension"),
    (b"\x00\x00\x08\x03" + struct.pack(">I", 1), "truncated header"),
    (_idx_bytes(0x08, (2, 3), bytes(5)), "truncated"),
    (_idx_bytes(0x08, (2, 3), bytes(7)), "trailing bytes"),
    (_idx_bytes(0x0C, (2,), bytes(4)), "(2,)"),
])
def test_corrupt_files_give_clear_errors(tmp_path, raw, message):
    path = tmp_path / "bad-idx1-ubyte"
    path.write_bytes(raw)
    with pytest.raises(IDXError, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
        read_idx(path)
    assert str(path) in str(e.value)


def test_corrupt_gzip_is_reported(tmp_path):
    path = tmp_path / "x.gz"
    path.write_bytes(gzip.compress(_idx_bytes(0x08, (4,), bytes(4)))[:-6])
    with pytest.raises(IDXError, match="gzip"):
        read_idx(path)


def test_write_rejects_types_idx_cannot_hold(tmp_path):
    with pytest.raises(IDXError, match="int64"):
        write_idx(tmp_path / "x", np.zeros(3, np.int64))


def _mnist_dir(directory, n_train=12, n_test=5, style="gz", size=28, rng=None):
    rng = rng or np.random.default_rng(0)
    arrays = {}
    for stem, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, (n, size, size), dtype=np.uint8)
        labels = rng.integers(0, 10, n).astype(np.uint8)
        arrays[stem] = (images, labels)
        for kind, idx, array in (("images", "idx3", images), ("labels", "idx1", labels)):
            name = {"gz": f"{stem}-{kind}-{idx}-ubyte.gz", "plain": f"{stem}-{kind}-{idx}-ubyte",
                    "dotted": f"{stem}-{kind}.{idx}-ubyte"}[style]
            write_idx(directory / name, array)
    return arrays


@pytest.mark.parametrize("style", ["gz", "plain", "dotted"])
def test_load_fashion_mnist_from_a_directory(tmp_path, style):
    arrays = _mnist_dir(tmp_path, style=style)
    d = data.load_fashion_mnist(tmp_path)
    assert d.source == str(tmp_path)
    for x, y, (images, labels) in ((d.x_train, d.y_train, arrays["train"]),
                                   (d.x_test, d.y_test, arrays["t10k"])):
        assert x.dtype == np.float32 and x.shape == (len(images), 1, 28, 28)
        assert y.dtype == np.int64
        np.testing.assert_array_equal(x[:, 0], images)
        np.testing.assert_array_equal(y, labels)
    limited = data.load_fashion_mnist(tmp_path, limit=3)
    assert len(limited.x_train) == len(limited.y_test) == 3


def test_missing_and_inconsistent_directories(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        data.load_fashion_mnist(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte.gz"):
        data.load_fashion_mnist(tmp_path)
    _mnist_dir(tmp_path)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", np.zeros(4, np.uint8))  # 5 images
    with pytest.raises(IDXError, match="test images"):
        data.load_fashion_mnist(tmp_path)


def test_fallback_to_synthetic_is_loud(tmp_path, capsys):
    with pytest.warns(UserWarning, match="SYNTHETIC"):
        d = data.load_or_synthetic(tmp_path / "nowhere", synthetic_n=60)
    assert "SYNTHETIC" in capsys.readouterr().err
    assert d.source == "synthetic" and len(d.x_train) == 60 and len(d.x_test) == 10
    _mnist_dir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert data.load_or_synthetic(tmp_path).source == str(tmp_path)


def test_synthetic_mnist_is_deterministic_and_in_range():
    x, y = data.synthetic_mnist(50, seed=3)
    x2, y2 = data.synthetic_mnist(50, seed=3)
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(y, y2)
    assert x.shape == (50, 1, 28, 28) and x.dtype == np.float32 and y.dtype == np.int64
    assert x.min() >= 0 and x.max() <= 255 and set(np.unique(y)) <= set(range(10))
    # same class, same template: class means differ more between classes than within
    assert not np.array_equal(x[y == y[0]].mean(0), x[y != y[0]].mean(0))


def test_batches_drop_the_remainder_and_shuffle_by_seed():
    x = np.arange(10, dtype=np.float32)[:, None]
    y = np.arange(10)
    plain = list(data.batches(x, y, 3))
    assert [b[1].tolist() for b in plain] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    shuffled = [b[1] for b in data.batches(x, y, 3, seed=1)]
    assert len(shuffled) == 3 and len(set(np.concatenate(shuffled))) == 9
    for xb, yb in data.batches(x, y, 3, seed=1):
        np.testing.assert_array_equal(xb[:, 0], yb)


@pytest.mark.skipif(not (data.Path(data.FASHION_MNIST_DIR) / "t10k-labels-idx1-ubyte.gz")
                    .is_file(), reason="dataset-fashion-mnist is not installed")
def test_installed_fashion_mnist_reads():
    labels = read_idx(data.Path(data.FASHION_MNIST_DIR) / "t10k-labels-idx1-ubyte.gz")
    assert labels.shape == (10000,) and labels.dtype == np.uint8
    assert np.bincount(labels).tolist() == [1000] * 10  # the test split is balanced

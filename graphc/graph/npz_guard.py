"""The ``.npz`` archive of a saved graph, read as untrusted input.

Nothing is read before it is checked: the zip directory is parsed first (its
names, compression methods and declared sizes), then each ``.npy`` header on
its own (a strict match of what ``numpy.save`` writes: no Python literal is
evaluated, no pickle is ever loaded), and only then the data, in exactly the
number of bytes the header declares. zip's own CRC-32 check covers the data.
Every failure is a :class:`GraphError` naming the member.

>>> import numpy as np, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "a.npz")
>>> np.savez(path, const_1=np.arange(3.0))
>>> with Archive(path) as archive:
...     header = archive.header("const_1")
...     header.shape, header.dtype, archive.read("const_1", header)
((3,), dtype('float64'), array([0., 1., 2.]))
"""
from __future__ import annotations

import os
import re
import struct
import zipfile
import zlib
from dataclasses import dataclass

import numpy as np

from ..shape.dtypes import as_dtype
from ..type.errors import GraphcError, GraphError

#: the compression methods ``numpy.savez`` and ``numpy.savez_compressed`` use; others
#: (bzip2, lzma) are refused: their decompressors cannot bound their output
_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}
_MAGIC = b"\x93NUMPY"
#: ``numpy.save`` pads its header to 64 bytes; a few KiB leave room for long shapes
_MAX_HEADER = 4096
# exactly the dict numpy.save writes: descr, fortran_order, shape, in this order
_HEADER = re.compile(
    rb"\{'descr': '([<>|=]?[a-zA-Z][0-9]{0,2})', 'fortran_order': (True|False), "
    rb"'shape': \(((?:[0-9]{1,20}, )*[0-9]{1,20},?|)\), \} *\n")
_READ_CHUNK = 1 << 24
#: the zip directory read at most: zipfile makes an object of a few hundred bytes for
#: each entry (46 bytes and up), so this bounds what opening a file costs; a graph's
#: entries take about 80 bytes, so this is room for 100,000 constants
MAX_DIRECTORY_BYTES = 8 << 20


@dataclass(frozen=True)
class ArrayHeader:
    """What a member's ``.npy`` header declares, and where its data starts."""

    shape: tuple
    dtype: np.dtype
    fortran_order: bool
    offset: int            # bytes before the data (magic, length field and header)

    @property
    def nbytes(self) -> int:
        count = 1
        for d in self.shape:
            count *= d
        return count * self.dtype.itemsize


class Archive:
    """An opened graph archive: ``names`` are its members without ``.npy``.

    Members are opened one by one and only on request; a member that is never
    asked for is never read (an unreferenced 4 GiB member costs nothing).
    Errors start with ``what`` (the operation) and the path, and call a file
    that is no archive "not a ``kind``"; with ``damaged``, errors about a member
    also say the file "is a damaged ``kind``". ``labels`` (member -> what it holds,
    empty unless the caller fills it) adds to the errors about a member.
    """

    def __init__(self, path, what: str = "load", kind: str = "graphc graph file",
                 damaged: bool = False):
        self.path = os.fspath(path)
        self.what, self.kind, self.damaged = what, kind, damaged
        self.labels: dict[str, str] = {}
        try:
            self._file = open(self.path, "rb")
        except OSError as exc:
            raise self._error(f"is not a {self.kind}: {exc}") from None
        try:
            start = self._file.read(len(_MAGIC))
            self._file.seek(0)
            if start == _MAGIC:
                raise self._error(f"is not a {self.kind}: it holds a single .npy array, "
                                  "not an .npz archive")
            self._check_directory_size()
            self._zip = zipfile.ZipFile(self._file)
            self.names = self._directory()
        except GraphcError:
            self._file.close()
            raise
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError,
                NotImplementedError, struct.error, UnicodeDecodeError) as exc:
            self._file.close()
            raise self._error(f"is not a {self.kind}: {type(exc).__name__}: "
                              f"{exc}") from None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        self._file.close()

    def _error(self, message: str) -> GraphError:
        return GraphError(f"{self.what}: {self.path} {message}")

    def member_error(self, name: str, message: str) -> GraphError:
        """A :class:`GraphError` about member ``name`` (``.npy`` added)."""
        file = f" is a damaged {self.kind}" if self.damaged else ""
        label = f" ({self.labels[name]})" if name in self.labels else ""
        return GraphError(f"{self.what}: {self.path}{file}: member {_named(name + '.npy')}"
                          f"{label} {message}")

    def _check_directory_size(self) -> None:
        # zipfile reads the whole directory its end record declares, and parses it
        # into objects, before anything else can be checked
        end = zipfile._EndRecData(self._file)
        self._file.seek(0)
        if end is not None and end[zipfile._ECD_SIZE] > MAX_DIRECTORY_BYTES:
            raise self._error(f"is not a {self.kind}: its zip directory declares "
                              f"{end[zipfile._ECD_SIZE]} bytes; at most {MAX_DIRECTORY_BYTES} "
                              "are read")

    def _directory(self) -> dict[str, zipfile.ZipInfo]:
        names: dict[str, zipfile.ZipInfo] = {}
        for info in self._zip.infolist():
            name = info.filename
            if not name.endswith(".npy"):
                raise self._error(f"is not a {self.kind}: member {_named(name)} is not an "
                                  ".npy array")
            key = name[:-4]
            if key in names:
                raise self.member_error(key, "appears twice in the zip directory")
            if info.compress_type not in _METHODS:
                raise self.member_error(key, f"uses zip compression method {info.compress_type}; "
                                             "expected stored (0) or deflated (8)")
            if info.flag_bits & 0x1:
                raise self.member_error(key, "is encrypted")
            names[key] = info
        return names

    def size(self, name: str) -> int:
        """The uncompressed size the zip directory declares for member ``name``."""
        return self.names[name].file_size

    def header(self, name: str, expect=None, what: str = "") -> ArrayHeader:
        """Member ``name``'s ``.npy`` header, checked against ``expect`` (a shape and
        a dtype, which ``what`` declares) and the member's size in the zip directory;
        reads at most a few KiB."""
        with self._open(name) as f:
            magic = self._read_exactly(name, f, 8, "its .npy magic")
            if bytes(magic[:6]) != _MAGIC:
                raise self.member_error(name, "is not an .npy array (bad magic bytes)")
            major, minor = magic[6], magic[7]
            if (major, minor) == (1, 0):
                width, fmt = 2, "<H"
            elif (major, minor) in ((2, 0), (3, 0)):
                width, fmt = 4, "<I"
            else:
                raise self.member_error(name, f"has .npy format version {major}.{minor}; "
                                              "expected 1.0, 2.0 or 3.0")
            (length,) = struct.unpack(fmt, self._read_exactly(name, f, width, "its header "
                                                                            "length"))
            if length > _MAX_HEADER:
                raise self.member_error(name, f"declares a header of {length} bytes; at most "
                                              f"{_MAX_HEADER} are accepted")
            text = self._read_exactly(name, f, length, "its header")
        match = _HEADER.fullmatch(bytes(text))
        if match is None:
            raise self.member_error(name, f"has a malformed .npy header {text[:120]!r}; "
                                          "expected the dict numpy.save writes")
        descr, fortran, dims = match.groups()
        if descr.lstrip(b"<>|=").startswith(b"O"):
            raise self.member_error(name, "holds Python objects (pickled data), which graphc "
                                          "never loads (as numpy with allow_pickle=False)")
        try:
            dtype = as_dtype(self.what, descr.decode("ascii"))
        except GraphcError as exc:
            raise self.member_error(name, f"has an unsupported dtype: {exc}") from None
        shape = tuple(int(d) for d in dims.split(b",") if d.strip())
        header = ArrayHeader(shape, dtype, fortran == b"True", 8 + width + length)
        if expect is not None and (shape, dtype) != tuple(expect):
            raise self.member_error(name, f"holds shape {shape} dtype {dtype}, but {what} is "
                                          f"declared with shape {expect[0]} dtype {expect[1]}")
        declared = self.size(name)
        if declared != header.offset + header.nbytes:
            raise self.member_error(
                name, f"is {declared} bytes long (zip directory), but its header declares "
                      f"shape {shape} dtype {dtype}: {header.offset} + {header.nbytes} bytes")
        return header

    def read(self, name: str, header: ArrayHeader, writeable: bool = False) -> np.ndarray:
        """Member ``name``'s array as described by ``header`` (from :meth:`header`):
        made from exactly ``header.nbytes`` bytes, read-only unless ``writeable``."""
        with self._open(name) as f:
            self._read_exactly(name, f, header.offset, "its header")
            data = self._read_exactly(name, f, header.nbytes, "its data")
            if f.read(1):        # also makes zipfile check the CRC-32 of the whole member
                raise self.member_error(name, "holds more bytes than its header declares")
        array = np.frombuffer(data, dtype=header.dtype)
        array.flags.writeable = writeable     # its own buffer: no one else holds it
        if header.fortran_order:
            return array.reshape(header.shape[::-1]).transpose()
        return array.reshape(header.shape)

    def _open(self, name: str):
        try:
            return self._zip.open(self.names[name])
        except (zipfile.BadZipFile, NotImplementedError, OSError, EOFError, ValueError,
                struct.error, UnicodeDecodeError) as exc:
            raise self.member_error(name, f"cannot be opened: {type(exc).__name__}: "
                                          f"{exc}") from None

    def _read_exactly(self, name: str, f, count: int, what: str) -> bytearray:
        # one buffer of the validated size, filled chunk by chunk: no second copy
        buffer, done = bytearray(count), 0
        view = memoryview(buffer)
        try:
            while done < count:
                got = f.readinto(view[done:done + min(count - done, _READ_CHUNK)])
                if not got:
                    break
                done += got
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error,
                struct.error) as exc:
            raise self.member_error(name, f"is corrupt while reading {what}: "
                                          f"{type(exc).__name__}: {exc}") from None
        finally:
            view.release()
        if done < count:
            raise self.member_error(name, f"ends after {done} of the {count} bytes of {what}")
        return buffer


def _named(name: str) -> str:
    """A member's name for a message: zip allows names of 64 KiB."""
    return repr(name) if len(name) <= 100 else repr(name[:100]) + "..."

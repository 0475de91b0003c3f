"""Checkpoints: the values of a compiled graph's variables and the state of its
random generator, in an ``.npz`` file that cannot run code, written atomically,
so that training stopped at any step resumes bit for bit.

A checkpoint holds every variable that has a value (weights, optimiser state,
the last batch fed), the names of those that had none, the states of random
generators (dropout masks go on where they were) and a few numbers its writer
wants back (a trainer's step count). ``Executable.save_values`` and
``load_values`` keep it beside the graph; ``Executable.save(path,
values=True)`` puts it in the graph's own file, for ``graphc.load``.

Files are untrusted input: only plain arrays are read (``allow_pickle=False``);
names, shapes and dtypes are checked against the graph (from the file's
description and each array's header) before any array is read, and nothing is
assigned unless everything fits. A file is written beside its target under a
temporary name, flushed to disk and renamed over the target in one step, so a
crash while saving leaves the previous checkpoint as it was.

>>> import numpy as np, os, tempfile, graphc, graphc.ndarray as N
>>> x = N.var("x", (2,)); w = N.var("w", (2,))
>>> step = lambda: graphc.compile([x, w], N.sum(x * w), updates={w: w + x})
>>> g = step(); g.assign(w=np.ones(2, np.float32))
>>> float(g.run(x=np.ones(2, np.float32)))
2.0
>>> path = os.path.join(tempfile.mkdtemp(), "values.npz")
>>> g.save_values(path)
>>> h = step(); h.load_values(path); h.value("w")
array([2., 2.], dtype=float32)
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import re
import secrets
import stat
import struct
import zipfile
import zlib
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

import numpy as np

from .engine.interrupts import held_interrupts
from .graph import save as save_graph
from .graph.npz_guard import Archive
from .graph.serialize import CHECKPOINT_PREFIX
from .type.errors import GraphcError, GraphError, InputError

FORMAT, VERSION = "graphc-values", 1
#: every member of a checkpoint starts with this: a graph file that also holds
#: values keeps them beside the graph's own members, which never do
MEMBER_PREFIX = CHECKPOINT_PREFIX     # the graph loader skips these members unread
_DESCRIPTION = MEMBER_PREFIX + "json"
_VALUE = MEMBER_PREFIX + "value_{}"
#: the description takes a few dozen bytes per variable: anything bigger is not one
MAX_DESCRIPTION_BYTES = 16 << 20
#: what :func:`read_checkpoint` reads at most when no graph bounds it
DEFAULT_MAX_BYTES = 4 << 30
#: the key of an executable's own generator in ``Checkpoint.random``
GRAPH_RANDOM = "graph"
#: what a damaged description (JSON, dtypes) can raise, and a safety net behind
#: ``Archive``'s own checks of the zip archive and the ``.npy`` headers
_DAMAGED = (OSError, ValueError, TypeError, KeyError, IndexError, EOFError, OverflowError,
            RuntimeError, RecursionError, UnicodeError, struct.error, zipfile.BadZipFile,
            zlib.error)
#: dtypes a variable may have, written as NumPy's ``dtype.str`` (``<f4``, ``|b1``)
_DTYPE_TEXT = re.compile(r"[<>|=][biufc][0-9]{1,2}")
_MAX_META, _MAX_TEXT = 64, 4096


@dataclass
class Checkpoint:
    """What a checkpoint file holds: ``values`` (variable name -> array),
    ``unset`` (variables that had no value when it was saved), ``random``
    (generator name -> state, see :func:`generator_state`) and ``meta`` (name ->
    a number, string, bool or None: a trainer's step count).

    Example: ``read_checkpoint("run.npz").values["w"]``
    """

    values: dict
    unset: tuple = ()
    random: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)

    def count(self, key: str, what: str = "load") -> int:
        """``meta[key]`` as a count (an int >= 0), or a :class:`GraphError` saying
        what the file holds instead. Example: ``checkpoint.count("steps")``"""
        value = self.meta.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise GraphError(f"{what}: the checkpoint's {key!r} should be a count (an int >= 0), "
                             f"but it holds {value!r}")
        return value


# -- random generators ------------------------------------------------------------------
def generator_state(rng: np.random.Generator) -> dict:
    """The state of ``rng`` (a PCG64 generator, as graphs and ``graphc.eager`` use)
    as JSON-ready data; :func:`set_generator_state` with it repeats the draws
    made after this call.

    >>> rng = np.random.default_rng(0); state = generator_state(rng); first = rng.random()
    >>> set_generator_state(rng, state); rng.random() == first
    True
    """
    raw = rng.bit_generator.state
    if raw.get("bit_generator") != "PCG64":
        raise GraphError(f"generator_state: a {raw.get('bit_generator')} generator cannot be "
                         "saved; graphc's generators are PCG64")
    return {"bit_generator": "PCG64", "state": str(raw["state"]["state"]),
            "inc": str(raw["state"]["inc"]), "has_uint32": int(raw["has_uint32"]),
            "uinteger": int(raw["uinteger"])}


def set_generator_state(rng: np.random.Generator, state: Mapping) -> None:
    """Put ``rng`` back in ``state`` (from :func:`generator_state`); a malformed
    state raises :class:`GraphError` and leaves ``rng`` as it was.
    Example: ``set_generator_state(rng, saved)``"""
    rng.bit_generator.state = _pcg64(state, "set_generator_state")


def _pcg64(state, what: str) -> dict:
    """``state`` checked and in NumPy's form (two 128-bit ints and a buffered word)."""
    def bad(reason):
        return GraphError(f"{what}: a random generator state {reason}")

    if not isinstance(state, Mapping) or set(state) != {"bit_generator", "state", "inc",
                                                        "has_uint32", "uinteger"}:
        raise bad("should have exactly the keys bit_generator, state, inc, has_uint32, "
                  f"uinteger; got {sorted(state) if isinstance(state, Mapping) else state!r}")
    if state["bit_generator"] != "PCG64":
        raise bad(f"is for {state['bit_generator']!r}; graphc's generators are PCG64")
    words = {}
    for key in ("state", "inc"):
        text = state[key]
        if not isinstance(text, str) or not text.isdigit() or len(text) > 39 \
                or int(text) >= 1 << 128:
            raise bad(f"has {key}={text!r}; expected a decimal 128-bit unsigned integer")
        words[key] = int(text)
    flag, word = state["has_uint32"], state["uinteger"]
    if flag not in (0, 1) or isinstance(flag, bool):
        raise bad(f"has has_uint32={flag!r}; expected 0 or 1")
    if not isinstance(word, int) or isinstance(word, bool) or not 0 <= word < 1 << 32:
        raise bad(f"has uinteger={word!r}; expected a 32-bit unsigned integer")
    return {"bit_generator": "PCG64", "state": words, "has_uint32": flag, "uinteger": word}


def random_state(executable) -> dict:
    """The state of a compiled graph's random generator (see :func:`generator_state`;
    on a device, the host generator that ``random_draw`` uses: CuPy's, which the
    dropout-style draws use, is not saved, so a restored device graph draws new
    masks). Example: ``state = random_state(g)``"""
    with executable.lock:
        return generator_state(executable.program.ctx.saved_rng)


def set_random_state(executable, state: Mapping) -> None:
    """Put a compiled graph's random generator in ``state``: its next runs draw
    what they drew after :func:`random_state` gave it. Example: ``set_random_state(g, state)``"""
    checked = _pcg64(state, "set_random_state")
    with executable.lock:
        executable.program.ctx.saved_rng.bit_generator.state = checked


# -- writing ----------------------------------------------------------------------------
def write_checkpoint(path, checkpoint: Checkpoint, *, graph=None,
                     single_output: bool = False) -> None:
    """Write ``checkpoint`` to ``path`` (``.npz``), atomically: a crash or an error
    part-way leaves what ``path`` held before. With ``graph`` (a ``Graph``), the
    file also holds the graph as ``Executable.save`` writes it.

    Example: ``write_checkpoint("run.npz", Checkpoint({"w": W}, meta={"steps": 10}))``
    """
    values = {name: _writable(name, array) for name, array in checkpoint.values.items()}
    unset = [_name(n, "write_checkpoint") for n in checkpoint.unset]
    twice = sorted(set(values) & set(unset))
    if twice:
        raise GraphError(f"write_checkpoint: variables {twice} are both given and unset")
    random = {_name(k, "write_checkpoint"): state for k, state in checkpoint.random.items()}
    for key, state in random.items():
        _pcg64(state, f"write_checkpoint: generator {key!r}")
    doc = {"format": FORMAT, "version": VERSION,
           "values": [[name, list(a.shape), a.dtype.str] for name, a in values.items()],
           "unset": unset, "random": random,
           "meta": _meta(checkpoint.meta, "write_checkpoint")}
    text = np.frombuffer(json.dumps(doc).encode(), dtype=np.uint8)
    with _replacing(path) as temp:
        if graph is not None:
            save_graph(graph, temp, single_output=single_output)
        with zipfile.ZipFile(temp, "a" if graph is not None else "w", allowZip64=True) as archive:
            _write_array(archive, _DESCRIPTION, text)
            for i, array in enumerate(values.values()):
                _write_array(archive, _VALUE.format(i), array)


def _write_array(archive: zipfile.ZipFile, key: str, array: np.ndarray) -> None:
    """One ``.npy`` member, as ``np.savez`` writes it but dated 1980-01-01: the same
    values always give the same bytes (a checkpoint's hash says what it holds)."""
    info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
    info.external_attr = 0o600 << 16          # what ZipFile.open gives a new member
    with archive.open(info, "w", force_zip64=True) as member:
        np.lib.format.write_array(member, array, allow_pickle=False)


def _writable(name, array) -> np.ndarray:
    _name(name, "write_checkpoint")
    array = np.asarray(array)
    if not _DTYPE_TEXT.fullmatch(array.dtype.str):
        raise GraphError(f"write_checkpoint: variable {name!r} has dtype {array.dtype}; a "
                         "checkpoint holds booleans and numbers only")
    return array


def _name(name, what: str) -> str:
    if not isinstance(name, str) or not name or len(name) > _MAX_TEXT:
        raise GraphError(f"{what}: a name must be a non-empty string of at most {_MAX_TEXT} "
                         f"characters, got {name!r}")
    return name


def _meta(meta, what: str) -> dict:
    """``meta`` checked: at most 64 names, each a number, string, bool or None."""
    if not isinstance(meta, Mapping) or len(meta) > _MAX_META:
        raise GraphError(f"{what}: meta should be a mapping of at most {_MAX_META} entries, "
                         f"got {type(meta).__name__}")
    for key, value in meta.items():
        _name(key, what)
        if isinstance(value, str) and len(value) > _MAX_TEXT or not (
                value is None or isinstance(value, (bool, str))
                or isinstance(value, int) and -(1 << 63) <= value < 1 << 63
                or isinstance(value, float) and math.isfinite(value)):
            raise GraphError(f"{what}: meta {key!r} should be a 64-bit int, a finite float, a "
                             f"short string, a bool or None, got {value!r}"[:500])
    return dict(meta)


@contextlib.contextmanager
def _replacing(path):
    """A new empty file beside ``path``, named so no one else uses it. When the
    block ends normally the file is flushed to disk and renamed over ``path``
    (one step: readers and crashes see the old file or the new, never part of
    one); when it raises, the file is removed and ``path`` is untouched."""
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    temp = _new_file(folder, os.path.basename(target))
    try:
        yield temp
        with contextlib.suppress(FileNotFoundError):     # keep the old file's permissions
            os.chmod(temp, stat.S_IMODE(os.stat(target).st_mode))
        with open(temp, "rb+") as written:
            os.fsync(written.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if os.name == "posix":      # the rename itself reaches the disk with the folder
        folder_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(folder_fd)
        except OSError:         # some file systems cannot sync a folder; the rename stands
            pass
        finally:
            os.close(folder_fd)


def _new_file(folder: str, base: str) -> str:
    for _ in range(16):
        temp = os.path.join(folder, f".{base[:100]}.{secrets.token_hex(8)}.tmp")
        try:
            os.close(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return temp
        except FileExistsError:
            continue
    raise FileExistsError(f"save: no free temporary name beside {base!r} in {folder}")


# -- reading ----------------------------------------------------------------------------
def read_checkpoint(path, expected: Optional[Mapping[str, tuple]] = None, *,
                    strict: bool = True, max_bytes: int = DEFAULT_MAX_BYTES,
                    what: str = "read_checkpoint") -> Checkpoint:
    """Read a checkpoint written by :func:`write_checkpoint` (``save_values``,
    ``save(path, values=True)``, a trainer's ``save_checkpoint``).

    With ``expected`` (name -> ``(shape, dtype)``, the variables it should
    fit), names, shapes and dtypes are checked against it before any array is
    read: an :class:`InputError` names a variable it lacks or one it does not
    expect (unless ``strict=False``: those are skipped, the others kept as they
    are) or one whose shape or dtype differs. Without ``expected`` every array
    is read, ``max_bytes`` in all at most. A file that is not a checkpoint, or
    is damaged, raises :class:`GraphError`; no code in it ever runs.

    Example: ``weights = read_checkpoint("run.npz").values``
    """
    try:
        with Archive(path, what, "graphc checkpoint", damaged=True) as archive:
            return _read(archive, path, expected, strict, max_bytes, what)
    except GraphcError:
        raise
    except _DAMAGED as exc:
        raise GraphError(f"{what}: {path} is a damaged graphc checkpoint: "
                         f"{type(exc).__name__}: {exc}"[:2000]) from None


def has_values(path) -> bool:
    """Whether the file at ``path`` holds a checkpoint (``save(path, values=True)``
    writes one beside the graph). Example: ``has_values("model.npz")``"""
    try:
        with Archive(path, "has_values", "graphc checkpoint") as archive:
            return _DESCRIPTION in archive.names
    except (GraphcError,) + _DAMAGED:
        return False


def _read(archive: Archive, path, expected, strict, max_bytes, what) -> Checkpoint:
    members = {name for name in archive.names if name.startswith(MEMBER_PREFIX)}
    if _DESCRIPTION not in members:
        raise GraphError(f"{what}: {path} holds no variable values (no {_DESCRIPTION!r} member); "
                         "write them with save_values or save(path, values=True)")
    doc = json.loads(_description(archive).tobytes().decode("utf-8"))
    entries, checkpoint = _described(doc, path, what)
    member_of = {name: _VALUE.format(i) for i, (name, _, _) in enumerate(entries)}
    stray = sorted(members - {_DESCRIPTION} - set(member_of.values()))
    if stray:
        raise GraphError(f"{what}: {path} holds members {[s + '.npy' for s in stray[:5]]} that "
                         "its description does not mention")
    wanted = _wanted(entries, checkpoint.unset, expected, strict, path, what)
    checkpoint.unset = tuple(n for n in checkpoint.unset if expected is None or n in expected)
    # every header before any data: nothing is allocated for a file that does not fit
    budget = max_bytes if expected is None else None
    plans = []
    for name, shape, dtype in wanted:
        member = member_of[name]
        if member not in members:
            raise GraphError(f"{what}: {path} lacks the array of variable {name!r} "
                             f"({member + '.npy'!r})")
        archive.labels[member] = f"variable {name!r}"
        header = archive.header(member, (shape, dtype), "its entry in the description")
        if budget is not None:
            budget -= header.nbytes
            if budget < 0:
                raise GraphError(f"{what}: {path} holds more than max_bytes={max_bytes} bytes "
                                 "of values; pass a larger max_bytes to read it")
        plans.append((name, member, header))
    for name, member, header in plans:
        array = archive.read(member, header, writeable=True)
        native = header.dtype.newbyteorder("=") if expected is None \
            else np.dtype(expected[name][1])
        checkpoint.values[name] = array.astype(native, copy=False)
    return checkpoint


def _description(archive: Archive) -> np.ndarray:
    """The description member's bytes, as a 1-d uint8 array of bounded size."""
    size = archive.size(_DESCRIPTION)
    if size > MAX_DESCRIPTION_BYTES:
        raise archive.member_error(_DESCRIPTION, f"holds {size} bytes, more than the "
                                                 f"{MAX_DESCRIPTION_BYTES} a checkpoint "
                                                 "description may")
    header = archive.header(_DESCRIPTION)
    if len(header.shape) != 1 or header.dtype != np.uint8:
        raise archive.member_error(_DESCRIPTION, f"should be a 1-d uint8 array, not shape "
                                                 f"{header.shape} dtype {header.dtype}")
    return archive.read(_DESCRIPTION, header)


def _described(doc, path, what):
    """The description's entries ``(name, shape, dtype)`` and a :class:`Checkpoint`
    holding its other parts, every field checked."""
    def bad(reason):
        return GraphError(f"{what}: {path} has a malformed checkpoint description: {reason}")

    if not isinstance(doc, dict):
        raise bad(f"a {type(doc).__name__}, not an object")
    if doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise GraphError(f"{what}: {path} has format {doc.get('format')!r} version "
                         f"{doc.get('version')!r}; expected {FORMAT!r} version {VERSION}")
    values, unset = doc.get("values"), doc.get("unset")
    if not isinstance(values, list) or not isinstance(unset, list):
        raise bad("'values' and 'unset' should be lists")
    entries = []
    for entry in values:
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[1], list)
                and all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 1 << 62
                        for d in entry[1]) and len(entry[1]) <= 32
                and isinstance(entry[2], str) and _DTYPE_TEXT.fullmatch(entry[2])):
            raise bad(f"a value entry should be [name, shape, dtype], got {entry!r}"[:300])
        entries.append((_name(entry[0], what), tuple(entry[1]), np.dtype(entry[2])))
    names = [e[0] for e in entries] + [_name(n, what) for n in unset]
    if len(set(names)) != len(names):
        raise bad("a variable is named twice")
    random = doc.get("random")
    if not isinstance(random, dict):
        raise bad("'random' should be an object")
    for key, state in random.items():
        _pcg64(state, f"{what}: {path}: generator {key!r}")
    meta = _meta(doc.get("meta"), f"{what}: {path}")
    return entries, Checkpoint({}, tuple(unset), dict(random), meta)


def _wanted(entries, unset, expected, strict, path, what):
    """The entries to read: all of them, or those ``expected`` names, after
    checking names (unless not ``strict``), shapes and dtypes against it."""
    if expected is None:
        return entries
    saved = {e[0] for e in entries} | set(unset)
    if strict:
        unknown = sorted(saved - set(expected))
        missing = sorted(set(expected) - saved)
        if unknown or missing:
            parts = ([f"holds {_some(unknown)} that are not expected"] if unknown else []) \
                + ([f"lacks {_some(missing)}"] if missing else [])
            raise InputError(f"{what}: {path} {' and '.join(parts)}; pass strict=False to load "
                             "the variables both have")
    wanted = []
    for name, shape, dtype in entries:
        if name not in expected:
            continue
        want_shape, want_dtype = tuple(expected[name][0]), np.dtype(expected[name][1])
        if shape != want_shape or dtype.newbyteorder("=") != want_dtype.newbyteorder("="):
            raise InputError(f"{what}: variable {name!r} has shape {want_shape} dtype "
                             f"{want_dtype} in the graph but shape {shape} dtype "
                             f"{_dtype_text(dtype)} in {path}")
        wanted.append((name, shape, dtype))
    return wanted


def _some(names) -> str:
    shown = ", ".join(repr(n) for n in names[:8])
    return f"variable(s) {shown}" + (f" and {len(names) - 8} more" if len(names) > 8 else "")


def _dtype_text(dtype: np.dtype) -> str:
    return dtype.name if dtype.isnative else dtype.str


# -- compiled graphs --------------------------------------------------------------------
def expected_variables(executable, names: Optional[Sequence[str]] = None) -> dict:
    """``name -> (shape, dtype)`` of a compiled graph's variables (all of them, or
    ``names``): what :func:`read_checkpoint` checks a file against.
    Example: ``expected_variables(g, ["w"])``"""
    return {n: (v.shape, v.dtype) for n, v in _variables(executable, names, "load").items()}


def _variables(executable, names, what) -> dict:
    if names is None:
        return dict(executable._vars)
    unknown = [n for n in names if n not in executable._vars]
    if unknown:
        raise InputError(f"{what}: unknown variable(s) {unknown}; the graph's inputs are "
                         f"{sorted(executable._vars)}")
    return {n: executable._vars[n] for n in names}


def snapshot(executable, names: Optional[Sequence[str]] = None) -> Checkpoint:
    """Copies of a compiled graph's variables (all, or ``names``) and of its random
    generator's state, taken together: no run of the graph from another thread
    falls between them. Example: ``checkpoint = snapshot(g)``"""
    variables = _variables(executable, names, "save_values")
    with executable.lock:
        has_value = set(executable._has_value)
        values = {n: executable.value(n) for n in variables if n in has_value}
        random = {GRAPH_RANDOM: generator_state(executable.program.ctx.saved_rng)}
    return Checkpoint(values, tuple(n for n in variables if n not in has_value), random)


def restore(executable, checkpoint: Checkpoint) -> None:
    """Assign a checkpoint's values to a compiled graph's variables and put its
    random generator in the saved state, all at once: a bad value sets nothing,
    and no run from another thread sees part of it. Variables the checkpoint
    lists as unset keep their values. Example: ``restore(g, read_checkpoint(path))``"""
    state = checkpoint.random.get(GRAPH_RANDOM)
    generator = None if state is None else _pcg64(state, "load_values")
    with executable.lock, held_interrupts():
        executable.assign(**checkpoint.values)
        if generator is not None:
            executable.program.ctx.saved_rng.bit_generator.state = generator


def save_values(executable, path, *, names: Optional[Sequence[str]] = None,
                meta: Optional[Mapping] = None) -> None:
    """Save a compiled graph's variables (all, or ``names``) and its random
    generator's state to ``path`` (``.npz``), atomically. ``meta`` adds numbers
    or strings to read back (``Checkpoint.meta``). Example: ``save_values(g, "run.npz")``"""
    checkpoint = snapshot(executable, names)
    checkpoint.meta = _meta(meta or {}, "save_values")
    write_checkpoint(path, checkpoint)


def load_values(executable, path, *, strict: bool = True,
                names: Optional[Sequence[str]] = None, what: str = "load_values") -> None:
    """Load variables saved by :func:`save_values` into a compiled graph, checked
    first against its variables (all, or ``names``; see :func:`read_checkpoint`
    for ``strict``), then assigned all at once with the generator's state.
    Example: ``load_values(g, "run.npz")``"""
    expected = expected_variables(executable, names)
    restore(executable, read_checkpoint(path, expected, strict=strict, what=what))


def save(executable, path, *, values: bool = False) -> None:
    """Write the graph as written (``executable.source``) to ``path``, atomically;
    with ``values=True`` the file also holds a checkpoint of every variable
    (:func:`snapshot`), which ``graphc.load`` restores.
    Example: ``save(g, "g.npz", values=True)``"""
    if values:
        write_checkpoint(path, snapshot(executable), graph=executable.source,
                         single_output=executable._single)
        return
    with _replacing(path) as temp:
        save_graph(executable.source, temp, single_output=executable._single)


def load_saved_values(executable, path) -> bool:
    """Restore the checkpoint a graph file holds (``save(path, values=True)``) into
    the graph just compiled from it; ``False`` if the file holds none.
    Example: ``g = graphc.load(path); load_saved_values(g, path)``"""
    if not has_values(path):
        return False
    load_values(executable, path, what="load")
    return True


__all__ = ["Checkpoint", "read_checkpoint", "write_checkpoint", "has_values", "snapshot",
           "restore", "save_values", "load_values", "save", "load_saved_values",
           "expected_variables", "generator_state", "set_generator_state", "random_state",
           "set_random_state", "MEMBER_PREFIX"]

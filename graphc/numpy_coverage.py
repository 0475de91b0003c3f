"""How much of NumPy's main namespace ``graphc.ndarray`` covers, name by name.

Every public name of ``numpy``, of ``numpy.linalg`` and ``numpy.fft``
(``linalg.inv``) and every method of ``numpy.random.Generator`` (``random.normal``)
is in one of three classes:

- ``supported``: ``graphc.ndarray`` has it (a function building graph nodes, or for a
  dtype, a constant or an index helper, NumPy's own object);
- ``not planned``: it has no meaning in a static graph (files, printing, error state,
  dates and strings, Python-level iteration), with the reason;
- ``to do``: it has one and graphc lacks it yet; the reason says what it needs.

Coverage is ``supported / (supported + to do)``, the figure CI checks and
``docs/numpy.md`` (written by :func:`markdown`) shows.

>>> report = coverage()
>>> report.status["exp"], report.status["loadtxt"][0]
(('supported', ''), 'not planned')
>>> 0 < report.fraction <= 1
True
"""
from __future__ import annotations

import types
from dataclasses import dataclass

import numpy as np

_FILES = "reads or writes files: load the arrays with NumPy, then feed them to the graph"
_TEXT = "formats or parses text, not array values"
_STATE = "NumPy's process state or build facts, not an array operation"
_DATES = "dates and times: graphc computes on booleans, integers, floats and complex numbers"
_STRINGS = "strings, bytes and objects: graphc computes on numeric dtypes only"
_PYTHON = "runs Python per element or per index: write the loop over graph arrays instead"
_MEMORY = "asks about NumPy's memory layout; graph values have none until they run"
_CLASS = "a NumPy class: graph values are graphc.ndarray.Tensor"
_VALUES = "its output shape depends on the values: it needs a static size= (JAX's form)"

#: name -> why graphc will not have it
NOT_PLANNED = {
    **dict.fromkeys(["load", "save", "savez", "savez_compressed", "loadtxt", "savetxt",
                     "genfromtxt", "fromfile", "fromregex", "memmap"], _FILES),
    **dict.fromkeys(["array2string", "array_repr", "array_str", "set_printoptions",
                     "get_printoptions", "printoptions", "format_float_positional",
                     "format_float_scientific", "base_repr", "binary_repr", "fromstring",
                     "typename"], _TEXT),
    **dict.fromkeys(["seterr", "geterr", "seterrcall", "geterrcall", "errstate",
                     "setbufsize", "getbufsize", "show_config", "show_runtime", "info", "test",
                     "get_include", "from_dlpack", "frombuffer"], _STATE),
    **dict.fromkeys(["busday_count", "busday_offset", "is_busday", "busdaycalendar",
                     "datetime_as_string", "datetime_data", "datetime64", "timedelta64",
                     "isnat"], _DATES),
    **dict.fromkeys(["bytes_", "str_", "character", "flexible", "void", "object_", "record",
                     "recarray"], _STRINGS),
    **dict.fromkeys(["nditer", "ndenumerate", "ndindex", "nested_iters", "flatiter",
                     "vectorize", "frompyfunc", "fromiter", "apply_along_axis",
                     "apply_over_axes", "piecewise"], _PYTHON),
    **dict.fromkeys(["may_share_memory", "shares_memory", "isfortran", "asfortranarray",
                     "require"], _MEMORY),
    **dict.fromkeys(["ndarray", "matrix", "asmatrix", "bmat", "poly1d", "ufunc",
                     "broadcast"], _CLASS),
    "char": _STRINGS, "strings": _STRINGS, "rec": _STRINGS,
    "ctypeslib": "C pointers to NumPy memory", "f2py": "builds Fortran extensions",
    "testing": "NumPy's test helpers: compare a graph's outputs with them",
    "typing": "type annotations", "exceptions": "NumPy's exception classes",
    "dtypes": "NumPy's dtype classes (the dtypes themselves are supported)",
    "lib": "NumPy's implementation modules", "core": "NumPy's implementation modules",
    "ma": "masked arrays: use N.where with a mask",
    "polynomial": "the polynomial package's classes (np.polyval and friends are to do)",
    "emath": "results whose dtype depends on the values (complex where negative)",
    "mintypecode": _STATE, "iterable": _STATE, "isscalar": _STATE,
    "real_if_close": "its output dtype depends on the values",
    "asarray_chkfinite": "raises on values: a graph checks values with check=True",
}

#: name -> what it needs (names neither supported nor in NOT_PLANNED are to do for
#: the reason given here, or "not written yet")
TO_DO = {
    **dict.fromkeys(["nonzero", "argwhere", "flatnonzero", "unique", "unique_all",
                     "unique_counts", "unique_inverse", "unique_values", "extract",
                     "compress", "trim_zeros", "intersect1d", "setdiff1d", "setxor1d",
                     "union1d", "histogram_bin_edges"], _VALUES),
}

#: the submodules whose names are walked one by one (the module names themselves are
#: not counted), and what each is in NumPy
SUBMODULES = {"linalg": np.linalg, "fft": np.fft, "random": np.random.Generator}

NOT_PLANNED.update({
    "linalg.test": _STATE, "fft.test": _STATE,
    "random.bit_generator": _STATE, "random.spawn": _STATE,
    "random.bytes": _STRINGS,
    "random.shuffle": "shuffles its argument in place: use N.random.permutation",
})


@dataclass(frozen=True)
class Coverage:
    """``status``: name -> ``(class, reason)``; ``fraction``: the coverage figure."""

    status: dict

    def names(self, kind: str) -> list:
        return sorted(n for n, (k, _) in self.status.items() if k == kind)

    @property
    def fraction(self) -> float:
        done, todo = len(self.names("supported")), len(self.names("to do"))
        return done / (done + todo)


def _kind(value) -> str:
    if isinstance(value, types.ModuleType):
        return "module"
    if isinstance(value, np.ufunc):
        return "ufunc"
    if isinstance(value, type):
        return "type"
    return "function" if callable(value) else "constant"


def public_names() -> dict:
    """NumPy's public names -> their kind (module, ufunc, type, function, constant):
    the main namespace's (its submodules of :data:`SUBMODULES` left out) and those
    of the submodules, as ``linalg.inv``."""
    names = {n: _kind(getattr(np, n)) for n in dir(np)
             if not n.startswith("_") and n not in SUBMODULES}
    for module, members in SUBMODULES.items():
        names.update({f"{module}.{n}": _kind(getattr(members, n)) for n in dir(members)
                      if not n.startswith("_")})
    return names


def _has(namespace, name: str) -> bool:
    module, _, function = name.rpartition(".")
    return hasattr(getattr(namespace, module) if module else namespace, function)


def coverage(namespace=None) -> Coverage:
    """Every public NumPy name classified against ``namespace`` (``graphc.ndarray``)."""
    if namespace is None:
        import graphc.ndarray as namespace
    status = {}
    for name in public_names():
        if _has(namespace, name):
            status[name] = ("supported", "")
        elif name in NOT_PLANNED:
            status[name] = ("not planned", NOT_PLANNED[name])
        else:
            status[name] = ("to do", TO_DO.get(name, "not written yet"))
    return Coverage(status)


def markdown(report: Coverage | None = None) -> str:
    """The page ``docs/numpy.md``: the figure, then every name with its class."""
    report = report or coverage()
    kinds = public_names()
    lines = ["# NumPy's namespace in graphc.ndarray", "",
             "Written by `python3 -m graphc.numpy_coverage`; CI checks it is current.", "",
             f"**{len(report.names('supported'))} of "
             f"{len(report.names('supported')) + len(report.names('to do'))} names "
             f"({report.fraction:.1%})** that have a meaning in a static graph are supported; "
             f"{len(report.names('not planned'))} more are not planned, each with its reason.",
             "", "| name | kind | status | why |", "|---|---|---|---|"]
    for name in sorted(report.status, key=str.lower):
        kind, reason = report.status[name]
        lines.append(f"| `{name}` | {kinds[name]} | {kind} | {reason} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":   # python3 -m graphc.numpy_coverage > docs/numpy.md
    print(markdown(), end="")

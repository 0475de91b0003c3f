"""Real NumPy programs that run as graphs with only their import changed.

Each file of ``tests/ported/`` is a NumPy program as one would write it
(``import numpy as np``; slice assignment, augmented assignment on arguments,
``np.linalg``, ``np.fft``, Python loops over steps), plus ``INPUTS``, the shapes and
dtypes of its inputs. The test runs it with NumPy, then runs the same source with
``import numpy as np`` replaced by ``import graphc.ndarray as np``, its inputs
declared as ``N.var``, compiled and run on the same arrays: the results must equal
NumPy's (within float tolerance where the arithmetic may be ordered differently).
"""
from __future__ import annotations

import pathlib

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import graphc
import graphc.ndarray as N

PROGRAMS = sorted(pathlib.Path(__file__).with_name("ported").glob("*.py"))
IMPORT = "import numpy as np"


def load(path: pathlib.Path, graph: bool) -> dict:
    source = path.read_text()
    assert source.count(IMPORT) == 1, f"{path.name} must import numpy as np once"
    if graph:
        source = source.replace(IMPORT, "import graphc.ndarray as np")
    scope = {"__name__": f"ported_{path.stem}"}
    exec(compile(source, str(path), "exec"), scope)
    return scope


def sample(shape, dtype, rng):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.35
    if dtype.kind in "iu":
        return rng.integers(-5, 6, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def flat(results):
    return list(results) if isinstance(results, (tuple, list)) else [results]


@pytest.mark.parametrize("path", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_a_numpy_program_runs_as_a_graph_with_only_its_import_changed(path):
    plain = load(path, graph=False)
    rng = np.random.default_rng(sum(map(ord, path.stem)))
    arrays = {name: sample(shape, dtype, rng) for name, (shape, dtype) in
              plain["INPUTS"].items()}
    want = flat(plain["program"](**{k: v.copy() for k, v in arrays.items()}))
    lazy = load(path, graph=True)
    variables = {name: N.var(name, shape, dtype) for name, (shape, dtype) in
                 lazy["INPUTS"].items()}
    outputs = [N.asarray(v) if hasattr(N, "asarray") else v
               for v in flat(lazy["program"](**variables))]
    kept = {k: v.copy() for k, v in arrays.items()}
    got = graphc.compile(list(variables.values()), outputs).run(**arrays)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        assert (g.shape, g.dtype) == (w.shape, w.dtype), \
            f"output {i}: {g.shape} {g.dtype}, NumPy's {w.shape} {w.dtype}"
        if w.dtype.kind in "biu":
            assert_array_equal(g, w, err_msg=f"output {i}")
        else:
            tol = 1e-4 if w.dtype in (np.float32, np.complex64) else 1e-9
            assert_allclose(g, w, rtol=tol, atol=tol, err_msg=f"output {i}")
    for name, array in arrays.items():   # the caller's arrays are never written
        assert_array_equal(array, kept[name], err_msg=name)

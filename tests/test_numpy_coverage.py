"""NumPy's namespace against graphc.ndarray (graphc/numpy_coverage.py): every name is
classified, the reasons name real NumPy names, the figure does not fall, and the docs
page is the one the table writes; the NumPy objects graphc.ndarray shares work there."""
import pathlib

import numpy as np

import graphc
import graphc.ndarray as N
from graphc.numpy_coverage import NOT_PLANNED, TO_DO, coverage, markdown, public_names

#: the coverage CI holds graphc to: raise it as names are added, never lower it
FLOOR = 1.0


def test_every_numpy_name_is_classified_with_a_reason():
    report = coverage()
    assert set(report.status) == set(public_names())
    for name, (kind, reason) in report.status.items():
        assert kind in ("supported", "not planned", "to do")
        assert kind == "supported" or reason, name
    # the tables name NumPy's names, and nothing graphc has is called unplanned
    assert set(NOT_PLANNED) <= set(public_names()), set(NOT_PLANNED) - set(public_names())
    assert set(TO_DO) <= set(public_names())
    assert not set(report.names("supported")) & set(NOT_PLANNED)
    assert report.fraction >= FLOOR, f"coverage fell to {report.fraction:.1%}"


def test_the_docs_page_is_current():
    page = pathlib.Path(__file__).parents[1] / "docs" / "numpy.md"
    assert page.read_text() == markdown(), "run: python3 -m graphc.numpy_coverage > docs/numpy.md"


def test_shared_dtypes_and_helpers_work_on_graph_values():
    x = N.var("x", (3, 4), np.float32)
    small = N.astype(x[N.s_[1:, ::2]] * 10.0, N.int16)
    assert small.dtype == np.int16 and N.issubdtype(small.dtype, N.integer)
    assert (N.shape(small), N.ndim(small), N.size(small), N.size(small, 1)) == ((2, 2), 2, 4, 2)
    assert N.result_type(x, 1.0) == np.float32 and N.result_type(small, x) == np.float32
    feed = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    got = graphc.compile([x], small).run(x=feed)
    np.testing.assert_array_equal(got, (feed[1:, ::2] * np.float32(10.0)).astype(np.int16))


def test_dtype_functions_are_numpy_s_and_name_themselves():
    assert N.promote_types(N.int8, N.float32) == np.promote_types(np.int8, np.float32)
    assert N.min_scalar_type(300) == np.min_scalar_type(300)
    assert N.can_cast(N.int16, N.float32) and not N.can_cast(N.float64, N.int8)
    assert N.isdtype(N.float16, "real floating") and not N.isdtype(N.int8, "real floating")
    assert N.finfo(N.float16).eps == np.finfo(np.float16).eps and N.iinfo(N.uint8).max == 255
    assert N.dtype("float32") == N.float32 and N.index_exp[1:, ::2] == np.s_[1:, ::2]
    for call in (lambda: N.promote_types(N.int8, type3=N.int8),
                 lambda: N.min_scalar_type(1, b=2), lambda: N.shape(1, axis=0)):
        try:
            call()
        except TypeError as error:
            assert str(error).startswith("N.") and "takes (" in str(error)
        else:
            raise AssertionError("no TypeError")

"""Every error path: the exception type, and a message that names the op or the
input, the shapes or dtypes involved and what was expected. Bad calls to
``run`` fail before anything is computed and leave the graph usable."""
from __future__ import annotations

import inspect
import pickle
import re

import numpy as np
import pytest

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc.engine.cpu_kernels import KernelError

F32 = np.float32
HERE = "test_errors.py"


def line_of(marker: str) -> int:
    """The line of this file holding ``marker`` (so the tests survive edits)."""
    source, start = inspect.getsourcelines(inspect.getmodule(line_of))
    for i, text in enumerate(source):
        if marker in text and "line_of(" not in text:
            return start + i if start else i + 1
    raise AssertionError(marker)


# -- construction: shapes and dtypes -------------------------------------------------
def test_broadcast_mismatch_names_op_shapes_and_source_line():
    x, y = N.var("x", (2, 3)), N.var("y", (4,))
    with pytest.raises(graphc.ShapeError) as info:
        x + y  # MARK-add
    msg = str(info.value)
    assert "add" in msg and "(2, 3)" in msg and "(4,)" in msg
    assert "could not be broadcast" in msg and "neither is 1" in msg
    assert f"{HERE}:{line_of('MARK-add')}" in msg
    assert isinstance(info.value, ValueError)       # what NumPy users catch


def test_matmul_mismatch_names_contracted_sizes_and_line():
    x, w = N.var("x", (8, 3)), N.var("w", (4, 5))
    with pytest.raises(graphc.ShapeError) as info:
        N.maximum(x @ w, 0.0)  # MARK-matmul
    msg = str(info.value)
    assert msg.startswith("matmul:") and "(8, 3)" in msg and "(4, 5)" in msg
    assert "expected 3 == 4" in msg
    assert f"{HERE}:{line_of('MARK-matmul')}" in msg


def test_concatenate_and_where_mismatches_name_the_op_and_line():
    a, b = N.var("a", (2, 3)), N.var("b", (2, 4))
    with pytest.raises(graphc.ShapeError) as info:
        N.concatenate([a, b], axis=0)  # MARK-concat
    msg = str(info.value)
    assert "concatenate" in msg and "(2, 3)" in msg and "(2, 4)" in msg and "axis 0" in msg
    assert f"{HERE}:{line_of('MARK-concat')}" in msg
    with pytest.raises(graphc.ShapeError) as info:
        N.where(a > 0, a, b)  # MARK-where
    assert "where" in str(info.value) and f"{HERE}:{line_of('MARK-where')}" in str(info.value)


def test_reshape_and_axis_errors_name_the_op_and_shapes():
    x = N.var("x", (2, 3))
    with pytest.raises(graphc.ShapeError, match=r"reshape.*\(2, 3\).*\(5,\)"):
        x.reshape(5)
    with pytest.raises(graphc.ShapeError, match=r"sum: axis 2 is out of bounds.*dimension 2"):
        N.sum(x, axis=2)
    with pytest.raises(graphc.IndexOutOfRange, match=r"index 5 is out of bounds for axis 0 "
                                                      r"with size 2"):
        x[5]
    with pytest.raises(IndexError):
        x[0, 0, 0]


def test_dtype_errors_name_the_op_and_dtypes():
    x = N.var("x", (3,))
    flags = N.var("flags", (3,), np.bool_)
    with pytest.raises(graphc.DTypeError) as info:
        flags - flags  # MARK-bool-sub
    msg = str(info.value)
    assert "subtract" in msg and "bool" in msg
    assert f"{HERE}:{line_of('MARK-bool-sub')}" in msg
    assert isinstance(info.value, TypeError)
    with pytest.raises(graphc.DTypeError, match=r"bitwise_and: expected integer or boolean "
                                                r"operands, got float32 and float32"):
        x & x
    with pytest.raises(graphc.DTypeError, match=r"invert.*float32"):
        ~x
    with pytest.raises(graphc.DTypeError, match=r"take: index arrays must be integer, got "
                                                r"float64"):
        N.take(x, N.const(np.array([0.5])), axis=0)
    with pytest.raises(graphc.DTypeError, match=r"one_hot.*integer.*float32"):
        N.one_hot(x, 4)
    with pytest.raises(graphc.DTypeError, match=r"random_uniform.*float dtype.*int32"):
        N.random.uniform(size=(2,), dtype=np.int32)
    with pytest.raises(graphc.DTypeError, match=r"var: dtype object is not supported"):
        N.var("o", (2,), object)
    with pytest.raises(graphc.DTypeError, match=r"is not a dtype"):
        N.var("o", (2,), "no-such-dtype")


def test_bad_variable_declarations():
    with pytest.raises(TypeError, match="non-empty string"):
        N.var("", (2,))
    with pytest.raises(graphc.ShapeError, match=r"negative dimension in shape \(-1,\)"):
        N.var("v", (-1,))
    with pytest.raises(graphc.ShapeError, match="sequence of integers"):
        N.var("v", (2.5,))


def test_a_computed_boolean_mask_is_refused():
    x = N.var("x", (3,))
    with pytest.raises(graphc.ShapeError, match="data-dependent shape; use N.where"):
        x[x > 0]


# -- the user's source line, stored once on the error -------------------------------
def located_error(build, error_type=graphc.GraphcError):
    with pytest.raises(error_type) as info:
        build()
    return info.value


@pytest.mark.parametrize("marker, build", [
    # a shape rule (Node.apply), argument checks of a function and of one that calls
    # others, an operator of the array type, and eager mode (its own apply)
    ("MARK-loc-rule", lambda x: x + N.var("y", (4,))),
    ("MARK-loc-args", lambda x: x.reshape(5)),
    ("MARK-loc-nested", lambda x: N.std(x, axis=5)),
    ("MARK-loc-invert", lambda x: ~x),
    ("MARK-loc-eager", lambda x: E.add(np.zeros(2), np.zeros(3))),
])
def test_an_error_holds_the_users_line_once_as_its_location(marker, build):
    error = located_error(lambda: build(N.var("x", (2, 3))))
    where = f"{HERE}:{line_of(marker)}"
    assert error.location == where
    assert str(error) == f"{error.message} (at {where})"
    assert " (at " not in error.message and str(error).count(" (at ") == 1


def test_a_located_error_survives_pickling_and_copies():
    x = N.var("x", (2, 3))
    error = located_error(lambda: x.reshape(5), graphc.ShapeError)  # MARK-loc-pickle
    clone = pickle.loads(pickle.dumps(error))
    assert type(clone) is graphc.ShapeError and clone.location == error.location
    assert str(clone) == str(error) and clone.message == error.message
    # a copy made from the text (as code re-raising with more context does) reads the same
    copy = type(error)(str(error))
    assert str(copy) == str(error) and copy.location is None
    assert f"{HERE}:{line_of('MARK-loc-pickle')}" in str(copy)


def test_an_error_raised_without_a_user_call_has_no_location():
    error = graphc.ShapeError("reshape: cannot reshape array of shape (2,) into shape (3,)")
    assert error.location is None and str(error) == error.message
    assert str(error) == "reshape: cannot reshape array of shape (2,) into shape (3,)"


# -- lazy values are not data --------------------------------------------------------
def test_truth_value_and_conversion_raise_type_error():
    x = N.var("x", (3,))
    with pytest.raises(TypeError, match=r"truth value of lazy graphc value x .* N\.where"):
        bool(x)
    with pytest.raises(TypeError, match="truth value"):
        if x > 0:
            pass
    with pytest.raises(TypeError, match=r"x is a lazy graphc value with no data yet: compile"):
        np.asarray(x)
    with pytest.raises(TypeError, match="no data yet"):
        np.array(x * 2.0)
    with pytest.raises(TypeError, match=r"numpy\.add \(reduce\) cannot take a lazy graphc "
                                        r"value"):
        np.add.reduce(x)
    with pytest.raises(TypeError, match=r"len\(\) of a 0-d lazy array"):
        len(N.sum(x))


# -- compile errors ------------------------------------------------------------------
def test_an_input_that_is_not_a_variable():
    x = N.var("x", (3,))
    y = N.exp(x)
    with pytest.raises(graphc.GraphError, match=r"every input must be a variable made by "
                                                r"N\.var, got a exp \(created at "
                                                rf"{HERE}:\d+\)"):
        graphc.compile([x, y], y * 2.0)
    with pytest.raises(graphc.GraphError, match="got a ndarray"):
        graphc.compile([np.zeros(3)], N.exp(x))


def test_duplicate_input_names():
    a, b = N.var("x", (3,)), N.var("x", (3,))
    with pytest.raises(graphc.GraphError, match="two inputs are named 'x'"):
        graphc.compile([a, b], a + b)


def test_a_variable_used_but_not_given_as_input():
    x = N.var("x", (3,))
    hidden = N.var("hidden", (3,))  # MARK-hidden
    y = x * hidden
    with pytest.raises(graphc.GraphError) as info:
        graphc.compile([x], y)
    msg = str(info.value)
    assert "'hidden'" in msg and "not among the inputs" in msg
    assert f"(created at {HERE}:{line_of('MARK-hidden')})" in msg


def test_updates_whose_shape_or_dtype_do_not_match():
    w = N.var("w", (3,))
    x = N.var("x", (4,))
    with pytest.raises(graphc.GraphError) as info:
        graphc.compile([w, x], N.sum(w), {w: N.sum(x)})
    msg = str(info.value)
    assert "update of 'w'" in msg and "shape ()" in msg and "shape (3,)" in msg
    with pytest.raises(graphc.GraphError) as info:
        graphc.compile([w], N.sum(w), {w: w.astype(np.float64)})
    msg = str(info.value)
    assert "float64" in msg and "float32" in msg and "update of 'w'" in msg


def test_an_update_of_a_variable_that_is_not_an_input():
    w, other = N.var("w", (3,)), N.var("other", (3,))
    with pytest.raises(graphc.GraphError, match="update target 'other' must be one of the "
                                                "graph's input variables"):
        graphc.compile([w], w * 2.0, {other: w})
    with pytest.raises(graphc.GraphError, match="update target"):
        graphc.compile([w], w * 2.0, {N.exp(w): w})
    with pytest.raises(graphc.GraphError, match="the update of 'w' must be a graph value, "
                                                "got ndarray"):
        graphc.compile([w], w * 2.0, {w: np.zeros(3, F32)})


def test_updates_that_are_not_a_mapping():
    w = N.var("w", (3,))
    with pytest.raises(graphc.GraphError, match=r"updates must be a mapping \{variable: new "
                                                r"value\}, got list"):
        graphc.compile([w], w * 2.0, [(w, w * 3.0)])


def test_outputs_that_are_not_graph_values_or_no_outputs_at_all():
    x = N.var("x", (3,))
    with pytest.raises(graphc.GraphError, match="outputs must be graph values, got ndarray"):
        graphc.compile([x], [x * 2.0, np.zeros(3)])
    with pytest.raises(graphc.GraphError, match="at least one output or update"):
        graphc.compile([x], [])


def test_an_unknown_plan_name():
    x = N.var("x", (3,))
    with pytest.raises(ValueError, match=r"unknown plan 'best'; expected one of "
                                         r"\['blocks', 'offsets'\]"):
        graphc.compile([x], x * 2.0, plan="best")


# -- run: bad inputs fail first, and change nothing ----------------------------------
class Counter:
    """A delay function that counts its calls (to see whether anything ran)."""

    def __init__(self):
        self.calls = 0

    def __call__(self, a):
        self.calls += 1
        return a * 2


def counted_step():
    x = N.var("x", (2, 3))
    n = N.var("n", (), np.int64)
    w = N.var("w", (3,))
    counter = Counter()
    doubled = N.delay(counter, [x], (2, 3), F32)
    loss = N.sum(doubled * w) * n.astype(F32)
    g = graphc.compile([x, n, w], [loss], {w: w + 1.0}, check=True)
    g.assign(w=np.ones(3, F32))
    return g, counter


GOOD = {"x": np.ones((2, 3), F32), "n": np.int64(2)}


def bad_runs():
    # each bad call also carries a valid new x, which must not be copied in
    alt = {"x": np.full((2, 3), 7.0, F32), "n": np.int64(3)}
    yield "unknown", {**alt, "z": alt["x"]}, r"unknown input 'z'; the graph's inputs are " \
                                             r"\['n', 'w', 'x'\]"
    yield "shape", {**alt, "x": np.ones((3, 2), F32)}, \
        r"input 'x' expects shape \(2, 3\) but got shape \(3, 2\)"
    yield "dtype", {**alt, "x": np.ones((2, 3))}, \
        r"input 'x' expects dtype float32 but got float64; convert it with " \
        r"\.astype\(np\.float32\)"
    yield "int dtype", {**alt, "n": np.float32(2)}, r"input 'n' expects dtype int64 but got " \
                                                    r"float32"
    yield "python float for int", {**alt, "n": 2.5}, \
        r"input 'n' expects dtype int64 but got the Python float 2\.5"
    yield "overflow", {**alt, "n": 2 ** 70}, r"input 'n' expects dtype int64 but got " \
                                             r"\d+, which is out of its range"
    yield "ragged", {**alt, "w": [[1.0, 2.0, 3.0], [4.0]]}, \
        r"input 'w' expects shape \(3,\) dtype float32 but got a value that is not an array"
    yield "lazy", {**alt, "w": N.var("w", (3,))}, r"input 'w' got a lazy graph value"
    yield "list", {**alt, "w": [1.0, 2.0, 3.0]}, r"input 'w' expects dtype float32 but got " \
                                                 r"float64"
    yield "state shape", {**alt, "w": np.ones(4, F32)}, \
        r"input 'w' expects shape \(3,\) but got shape \(4,\)"


@pytest.mark.parametrize("label,feeds,message", list(bad_runs()),
                         ids=[b[0] for b in bad_runs()])
def test_bad_run_inputs_raise_before_computing_and_change_nothing(label, feeds, message):
    g, counter = counted_step()
    first = g.run(**GOOD)
    assert counter.calls == 1
    x_before, n_before, w_before = g.value("x"), g.value("n"), g.value("w")
    with pytest.raises(graphc.InputError, match=message):
        g.run(**feeds)
    assert counter.calls == 1                         # nothing was computed
    np.testing.assert_array_equal(g.value("w"), w_before)   # the state is unchanged
    np.testing.assert_array_equal(g.value("x"), x_before)   # no input was copied in
    assert g.value("n") == n_before
    # and the graph still works
    again = g.run(**GOOD)
    assert counter.calls == 2
    np.testing.assert_array_equal(again[0], first[0] + 2 * 2 * 6)
    np.testing.assert_array_equal(g.value("w"), w_before + 1.0)


def test_a_missing_input_raises_before_computing_and_the_graph_recovers():
    g, counter = counted_step()
    with pytest.raises(graphc.InputError, match=r"missing value for input\(s\) \['n'\]; "
                                                r"pass them by name"):
        g.run(x=np.full((2, 3), 7.0, F32))
    assert counter.calls == 0
    with pytest.raises(graphc.InputError, match="'x' has no value yet"):   # not copied in
        g.value("x")
    np.testing.assert_array_equal(g.value("w"), np.ones(3, F32))
    assert g.run(**GOOD)[0] == 2 * 2 * 6
    assert counter.calls == 1


def test_a_state_variable_must_be_given_once():
    w = N.var("w", (3,))
    g = graphc.compile([w], N.sum(w), {w: w * 2.0})
    with pytest.raises(graphc.InputError, match=r"missing value for input\(s\) \['w'\].*assign"):
        g.run()
    g.assign(w=np.ones(3, F32))
    assert g.run() == 3.0


def test_bad_assign_changes_nothing():
    a, b = N.var("a", (2,)), N.var("b", (2,))
    g = graphc.compile([a, b], a + b, {a: a * 2.0, b: b * 2.0})
    g.assign(a=np.ones(2, F32), b=np.ones(2, F32))
    with pytest.raises(graphc.InputError, match=r"assign: input 'b' expects shape \(2,\)"):
        g.assign(a=np.full(2, 5.0, F32), b=np.ones(3, F32))
    np.testing.assert_array_equal(g.value("a"), [1.0, 1.0])   # a was not assigned either
    with pytest.raises(graphc.InputError, match=r"assign: unknown input 'c'"):
        g.assign(c=np.ones(2, F32))


def test_python_scalars_of_a_compatible_kind_are_accepted():
    i = N.var("i", (), np.int32)
    f = N.var("f", (), np.float64)
    u = N.var("u", (), np.uint8)
    g = graphc.compile([i, f, u], [i * 2, f * 2.0, u + 1])
    out = g.run(i=True, f=3, u=7)
    assert [o.item() for o in out] == [2, 6.0, 8]
    assert [o.dtype for o in out] == [np.int32, np.float64, np.uint8]
    with pytest.raises(graphc.InputError, match="out of its range"):
        g.run(i=1, f=1.0, u=-1)
    with pytest.raises(graphc.InputError, match="Python complex"):
        g.run(i=1, f=1j, u=1)


# -- delay ---------------------------------------------------------------------------
def test_a_delay_returning_the_wrong_shape_or_dtype_fails_clearly_and_recovers():
    mode = {"bad": None}

    def sort_rows(a):
        if mode["bad"] == "shape":
            return np.sort(a, axis=1)[:, :2]
        if mode["bad"] == "dtype":
            return np.sort(a, axis=1).astype(np.float64)
        return np.sort(a, axis=1)

    x = N.var("x", (2, 3))
    w = N.var("w", (2, 3))
    y = N.delay(sort_rows, [x + w], (2, 3), F32)
    g = graphc.compile([x, w], [y * 2.0], {w: w + y}, check=True)
    X = np.array([[3, 1, 2], [0, -1, 5]], F32)
    g.assign(w=np.zeros((2, 3), F32))
    np.testing.assert_array_equal(g.run(x=X)[0], np.sort(X, axis=1) * 2)
    w_before = g.value("w")
    mode["bad"] = "shape"
    with pytest.raises(KernelError) as info:
        g.run(x=X)
    msg = str(info.value)
    assert "sort_rows" in msg and "(2, 2)" in msg and "(2, 3)" in msg and "declares" in msg
    assert isinstance(info.value, graphc.GraphcError)
    np.testing.assert_array_equal(g.value("w"), w_before)    # no update was applied
    mode["bad"] = "dtype"
    with pytest.raises(KernelError, match=r"sort_rows returned shape \(2, 3\) dtype float64.*"
                                          r"dtype float32"):
        g.run(x=X)
    np.testing.assert_array_equal(g.value("w"), w_before)
    mode["bad"] = None
    np.testing.assert_array_equal(g.run(x=X)[0], np.sort(X + w_before, axis=1) * 2)


def test_a_delay_that_raises_propagates_and_the_graph_recovers():
    state = {"fail": True}

    def flaky(a):
        if state["fail"]:
            raise RuntimeError("flaky failed")
        return a + 1

    x = N.var("x", (3,))
    g = graphc.compile([x], N.delay(flaky, [x], (3,), F32) * 2.0)
    with pytest.raises(RuntimeError, match="flaky failed"):
        g.run(x=np.zeros(3, F32))
    state["fail"] = False
    np.testing.assert_array_equal(g.run(x=np.zeros(3, F32)), [2.0, 2.0, 2.0])


def test_delay_needs_a_callable():
    with pytest.raises(TypeError, match="delay: fn must be callable, got 3"):
        N.delay(3, [N.var("x", (2,))], (2,))


# -- the exception hierarchy ---------------------------------------------------------
def test_exception_hierarchy():
    assert issubclass(graphc.ShapeError, ValueError)
    assert issubclass(graphc.DTypeError, TypeError)
    assert issubclass(graphc.InputError, ValueError)
    assert issubclass(graphc.GraphError, ValueError)
    assert issubclass(graphc.IndexOutOfRange, IndexError)
    assert issubclass(graphc.IndexOutOfRange, graphc.ShapeError)
    for cls in (graphc.ShapeError, graphc.DTypeError, graphc.InputError, graphc.GraphError,
                KernelError):
        assert issubclass(cls, graphc.GraphcError)
    assert re.match(r"\d+\.\d+\.\d+", graphc.__version__)

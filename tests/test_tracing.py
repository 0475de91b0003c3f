"""graphc.trace, graphc.State and the SINGA-style model API: traced functions
equal hand-built graphs (results and memory plans), graphs are cached per
signature, states carry values between graphs and modes, and one flag trains
the same model eagerly, serially or in parallel with the same losses."""
import time
import warnings

import numpy as np
import pytest

from concurrency import in_threads

import graphc
import graphc.eager as E
import graphc.ndarray as N
import graphc.neural as nn
from graphc import GraphError, InputError


def _placements(executable):
    """The memory plan as a sequence over steps (node ids differ between builds)."""
    live, plan = executable.liveness, executable.plan
    return [(n.op.kind, n.shape, plan.place.get(id(n))) for n in live.steps], plan.buffers


def _data(seed=0, shape=(8, 5)):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(np.float32), rng.standard_normal(
        shape[1]).astype(np.float32)


def test_traced_function_equals_numpy_and_is_cached_per_signature():
    calls = []

    @graphc.trace
    def f(x, y, scale=2.0):
        calls.append(1)
        return N.sum(N.tanh(x) * y, axis=1) * scale

    x, y = _data()
    want = np.sum(np.tanh(x) * y, axis=1) * 2.0
    # a sum of products of either sign: within float32 rounding of its terms' scale
    np.testing.assert_allclose(f(x, y), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(f(x * 2, y), np.sum(np.tanh(x * 2) * y, axis=1) * 2, rtol=1e-6,
                               atol=1e-6)
    assert len(calls) == 1 and len(f.cache) == 1            # same shapes: no new trace
    f(x[:3], y)                                              # new shape: a new graph
    f(x.astype(np.float64), y)                               # new dtype: a new graph
    np.testing.assert_allclose(f(x, y, scale=3.0), want * 1.5, rtol=1e-6)  # static argument
    assert len(calls) == len(f.cache) == 4
    assert f.executable(x, y) is f.executable(x + 1, y)


def test_traced_and_hand_built_graphs_agree_in_results_and_plans():
    def body(x, w):
        h = N.maximum(x @ w, 0.0)
        return N.sum(N.exp(h), axis=1), h

    traced = graphc.trace(body, plan="offsets")
    xv, wv = N.var("x", (8, 5)), N.var("w", (5, 4))
    hand = graphc.compile([xv, wv], list(body(xv, wv)), plan="offsets")
    x, _ = _data()
    w = np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32)
    got, want = traced(x, w), hand.run(x=x, w=w)
    assert isinstance(got, tuple) and len(got) == 2
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert _placements(traced.executable(x, w)) == _placements(hand)
    assert traced.executable(x, w).input_names == ["x", "w"]


def test_nested_arguments_become_named_inputs():
    @graphc.trace
    def f(params, xs):
        return params["w"] * xs[0] + params["b"] - xs[1]

    a, b = np.ones(3, np.float32), np.arange(3, dtype=np.float32)
    got = f({"w": a * 2, "b": b}, (b, a))
    np.testing.assert_array_equal(got, 2 * b + b - a)
    assert f.executable({"w": a, "b": b}, (b, a)).input_names == [
        "params.w", "params.b", "xs[0]", "xs[1]"]


def test_a_training_step_with_state_equals_the_hand_built_update_graph():
    x, y = _data(1)
    w0 = np.zeros(5, np.float32)
    w = graphc.State(w0, name="w")

    @graphc.trace
    def step(x, y):
        loss = N.mean(N.square(x @ w - N.sum(x * y, axis=1)))
        w.assign(w - 0.05 * N.grad(loss, w))
        return loss

    xv, yv, wv = N.var("x", x.shape), N.var("y", y.shape), N.var("w", (5,))
    loss = N.mean(N.square(xv @ wv - N.sum(xv * yv, axis=1)))
    hand = graphc.compile([xv, yv, wv], loss, {wv: wv - 0.05 * N.grad(loss, wv)})
    hand.assign(w=w0)
    for k in range(5):
        assert step(x, y) == hand.run(x=x, y=y), f"step {k}"
    np.testing.assert_array_equal(w.numpy(), hand.value("w"))
    assert _placements(step.executable(x, y)) == _placements(hand)
    assert step.executable(x, y).stats()["planned_bytes"] == hand.stats()["planned_bytes"]


def test_states_move_between_graphs_only_when_they_change():
    w = graphc.State(np.ones(4, np.float32), name="w")
    predict = graphc.trace(lambda x: N.sum(x * w))

    @graphc.trace
    def train(x):
        w.assign(w + x)
        return N.sum(w)               # read after assign: the new value, as eagerly

    norm = graphc.trace(lambda: N.sum(N.exp(w)))
    x = np.full(4, 0.5, np.float32)
    assert predict(x) == 2.0
    assert norm() == pytest.approx(4 * np.e)
    norm()
    assert norm.executable().stats()["steps_last_run"] == 0   # w unchanged: not fed again
    assert train(x) == 6.0                                         # sum(1.5 * 4)
    assert predict(x) == 3.0                                       # sees the new w
    assert norm() == pytest.approx(4 * np.exp(1.5), rel=1e-6)
    w.assign(np.zeros(4, np.float32))                              # an eager assignment
    assert predict(x) == 0.0 and train(x) == 2.0
    np.testing.assert_array_equal(w.numpy(), x)
    # eagerly, a state is a read-only array in expressions
    np.testing.assert_array_equal(E.exp(w) + w, np.exp(x) + x)
    np.testing.assert_array_equal(np.asarray(w) * 2, x * 2)


def test_random_draws_in_a_traced_function_are_seeded():
    def noisy(x):
        return x + N.random.uniform(size=x.shape)

    x = np.zeros(5, np.float32)
    a, b = graphc.trace(noisy, seed=3), graphc.trace(noisy, seed=3)
    first = a(x)
    np.testing.assert_array_equal(first, b(x))
    assert not np.array_equal(first, a(x))          # a fresh draw every call


def test_value_and_grad_is_the_same_in_both_namespaces():
    def f(w, x):
        return N.sum(N.sin(w) * x) if isinstance(w, N.Tensor) else E.sum(E.sin(w) * x)

    w, x = _data(2)[1], _data(3)[1]
    wv, xv = N.var("w", w.shape), N.var("x", x.shape)
    value, (gw, gx) = N.value_and_grad(f, argnums=(0, 1))(wv, xv)
    got = graphc.compile([wv, xv], [value, gw, gx]).run(w=w, x=x)
    want = E.value_and_grad(f, argnums=(0, 1))(w, x)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], want[1][0], rtol=1e-6)
    np.testing.assert_allclose(got[2], want[1][1], rtol=1e-6)


def test_tracing_errors_name_the_problem():
    w = graphc.State(np.zeros(3, np.float32), name="x")
    with pytest.raises(GraphError, match="outside a traced function"):
        N.exp(w)
    with pytest.raises(GraphError, match="name of another input"):
        graphc.trace(lambda x: x + w)(np.zeros(3, np.float32))
    with pytest.raises(InputError, match="neither an array nor hashable"):
        graphc.trace(lambda x, opts: x)(np.zeros(3), {"a": bytearray(b"1")})
    with pytest.raises(InputError, match="shape"):
        w.assign(np.zeros(4, np.float32))
    v = graphc.State(np.zeros(3, np.float32), name="v")
    with pytest.raises(GraphError, match="shape"):
        graphc.trace(lambda x: v.assign(N.sum(x)))(np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="expected a function"):
        graphc.trace(3)
    with pytest.raises(TypeError, match="no data while its graph is traced"):
        graphc.trace(lambda x: x + np.asarray(v))(np.zeros(3, np.float32))
    np.testing.assert_array_equal(w.numpy(), np.zeros(3))     # nothing half-applied


# -- the cache of compiled graphs ---------------------------------------------------------
def _recompile_warnings(record):
    return [w for w in record if issubclass(w.category, RuntimeWarning)
            and "graphc.trace" in str(w.message)]


def test_the_cache_keeps_the_graphs_used_last():
    @graphc.trace(cache_size=2)
    def f(x):
        return N.tanh(x) * 2.0

    def call_and_check(n):
        x = np.linspace(-1, 1, n, dtype=np.float32)
        np.testing.assert_allclose(f(x), np.tanh(x) * 2, rtol=1e-6)

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for n in (1, 2, 1):                  # two signatures: both fit
            call_and_check(n)
        assert f.compiles == 2 and not _recompile_warnings(record)
        call_and_check(3)                    # a third: size 2 is the least recently used
        assert f.compiles == 3 and len(f.cache) == 2
        call_and_check(1)                    # still cached
        assert f.compiles == 3
        call_and_check(2)                    # dropped: traced and compiled again
        assert f.compiles == 4 and len(f.cache) == 2
    (warning,) = _recompile_warnings(record)     # once per function, not per compile
    message = str(warning.message)
    assert "f has compiled 3 graphs" in message and "cache_size=2" in message
    assert "argument 'x' changes shape (" in message
    assert all(shape in message for shape in ("(1,)", "(2,)", "(3,)"))
    assert warning.filename == __file__          # points at the caller's line


def test_python_floats_that_keep_changing_warn_once_naming_the_argument():
    @graphc.trace
    def scaled(x, lr):
        return x * lr

    x = np.arange(4, dtype=np.float32)
    rates = [0.5 * k for k in range(12)]
    with pytest.warns(RuntimeWarning) as record:
        for lr in rates:
            np.testing.assert_array_equal(scaled(x, lr), x * np.float32(lr))
    (warning,) = _recompile_warnings(record)
    message = str(warning.message)
    assert "scaled has compiled 9 graphs" in message and "cache_size=8" in message
    assert "argument 'lr' takes the Python float values 0.0, 0.5, 1.0, 1.5, ..." in message
    assert "np.float32(lr)" in message
    assert len(scaled.cache) == 8 and scaled.compiles == 12
    # the advice works: a NumPy scalar is an input, so one more graph serves every rate
    for lr in rates:
        np.testing.assert_array_equal(scaled(x, np.float32(lr)), x * np.float32(lr))
    assert scaled.compiles == 13


def test_static_values_equal_in_python_but_of_other_types_get_their_own_graphs():
    """2 == 2.0 == True, but x * 2 and x * 2.0 differ for an integer x (as in NumPy)."""
    f = graphc.trace(lambda x, k: x * k)
    x = np.arange(3)
    for k in (2, 2.0, True):
        got, want = f(x, k), x * k
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    assert f.compiles == 3


@pytest.mark.parametrize("size", [0, -1, 2.5, True, None])
def test_cache_size_must_be_a_positive_integer(size):
    with pytest.raises(ValueError, match="cache_size must be a positive integer"):
        graphc.trace(lambda x: x, cache_size=size)


# -- threads ------------------------------------------------------------------------------
THREADS, CALLS, SHARED_CALLS = 4, 25, 100


def _in_threads(work):
    """``work(t)`` in THREADS threads at once; re-raises the first error."""
    errors = in_threads(work, THREADS)
    if errors:
        raise errors[0]


@pytest.mark.parametrize("cache_size", [8, 1], ids=["cached", "rebuilt-every-call"])
def test_one_traced_function_called_from_many_threads_gives_each_its_own_result(cache_size):
    """Different inputs (two shapes, so graphs are built while others run) against
    the results of the same calls made one after another."""
    @graphc.trace(cache_size=cache_size)
    def f(x, y):
        h = N.tanh(x) * y + 1.0
        return N.sum(h, axis=1), h

    def inputs(t, i):
        rng = np.random.default_rng(100 * t + i)
        rows = 3 + (t + i) % 2
        return (rng.standard_normal((rows, 5)).astype(np.float32),
                rng.standard_normal(5).astype(np.float32))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # cache_size=1 recompiles on purpose
        serial = {(t, i): f(*inputs(t, i)) for t in range(THREADS) for i in range(CALLS)}
        got = {}

        def work(t):
            for i in range(CALLS):
                got[t, i] = f(*inputs(t, i))
                time.sleep(0)                     # let another thread in
        _in_threads(work)
    for key, (total, h) in serial.items():
        np.testing.assert_array_equal(got[key][0], total)
        np.testing.assert_array_equal(got[key][1], h)


def test_traced_functions_sharing_a_state_in_many_threads_apply_every_update_once():
    """Two functions increment one counter from four threads: every call sees its own
    value before the increment, so the values seen are 0..n-1, each exactly once."""
    count = graphc.State(np.zeros((), np.int64), name="count")

    def increment(step):
        def body(x):
            before = count + 0
            count.assign(count + step)
            return before + 0 * N.sum(x)
        return graphc.trace(body)

    by_one, by_one_too = increment(1), increment(np.int64(1))
    seen = {t: [] for t in range(THREADS)}

    def work(t):
        f = by_one if t % 2 else by_one_too
        for i in range(SHARED_CALLS):
            seen[t].append(int(f(np.full(3, i, np.int64))))
            if i % 5 == 0:
                count.numpy()                     # an eager read in between
            time.sleep(0)                         # let another thread in
    _in_threads(work)
    values = sorted(v for vs in seen.values() for v in vs)
    assert values == list(range(THREADS * SHARED_CALLS))
    assert count.numpy() == THREADS * SHARED_CALLS
    for vs in seen.values():                      # each thread's calls in its own order
        assert vs == sorted(vs)


# -- the model API ------------------------------------------------------------------------
def _batch(model, n=3, seed=0):
    rng = np.random.default_rng(seed)
    return (np.abs(rng.standard_normal((n,) + model.input_shape)).astype(np.float32),
            rng.integers(0, model.classes, n))


@pytest.mark.parametrize("opt", [nn.SGD(0.05, momentum=0.9), nn.Adam(0.01)],
                         ids=lambda o: type(o).__name__)
@pytest.mark.cpu_engine   # the CPU thread schedules
def test_one_model_trains_eagerly_serially_and_in_parallel_alike(opt):
    make = lambda: nn.MnistCNN(image_size=8, hidden=16, dropout=0.0)  # noqa: E731
    x, y = _batch(make())
    runs = {}
    for mode in ("eager", "serial", "parallel"):
        model = make()
        model.compile([x, y], is_train=True, use_graph=mode != "eager",
                      sequential=mode != "parallel", optimiser=opt, seed=1)
        runs[mode] = ([model.train_one_batch(x, y) for _ in range(3)], model)
    # the graph rounds differently (GEMM-lowered convolutions), the schedules never
    assert runs["serial"][0] == runs["parallel"][0]
    np.testing.assert_allclose(runs["serial"][0], runs["eager"][0], rtol=1e-4)
    for name, value in runs["serial"][1].params().items():
        np.testing.assert_array_equal(runs["parallel"][1].params()[name], value)
        np.testing.assert_allclose(runs["eager"][1].params()[name], value, rtol=1e-3,
                                   atol=1e-5, err_msg=name)
    for model in (runs["serial"][1], runs["eager"][1]):
        model.eval()
    np.testing.assert_allclose(runs["serial"][1](x), runs["eager"][1](x), rtol=1e-4, atol=1e-5)


def test_model_step_is_the_compile_training_graph():
    make = lambda: nn.ResNet((1, 1, 1, 1), classes=5, width=4)  # noqa: E731
    model = make()
    x, y = _batch(model)
    opt = nn.Adam(0.01)
    model.compile([x, y], optimiser=opt, seed=2)
    hand = nn.compile_training(make(), opt, x.shape, seed=2)
    assert _placements(model.graph(x, y)) == _placements(hand.executable)
    assert model.graph(x, y).input_names == hand.executable.input_names
    for k in range(3):
        assert model(x, y) == hand.step(x, y), f"step {k}"     # training mode: a step
    for name, value in hand.params().items():
        np.testing.assert_array_equal(model.params()[name], value, err_msg=name)
    for name, value in hand.optimiser_state().items():
        np.testing.assert_array_equal(model.optimiser_state()[name], value, err_msg=name)


def test_switching_modes_keeps_training_where_it_was():
    model = nn.MnistCNN(image_size=8, hidden=16, dropout=0.0)
    x, y = _batch(model)
    model.compile([x, y], use_graph=True, optimiser=nn.SGD(0.05), seed=0)
    model.train_one_batch(x, y)
    after_one = model.params()
    model.compile([x, y], use_graph=False, seed=0)       # same arrays, same optimiser
    assert model.params().keys() == after_one.keys()
    for name, value in after_one.items():
        np.testing.assert_array_equal(model.params()[name], value)
    model.train_one_batch(x, y)
    assert not np.array_equal(model.params()["fc1.weight"], after_one["fc1.weight"])


def test_model_api_errors():
    model = nn.MnistCNN(image_size=8, hidden=16)
    with pytest.raises(RuntimeError, match="compile"):
        model.train_one_batch(*_batch(model))
    with pytest.raises(ValueError, match="optimiser"):
        model.compile([], is_train=True)


def test_an_inference_only_model_needs_no_optimiser_and_agrees_across_modes():
    model = nn.MnistCNN(image_size=8, hidden=16)
    x, _ = _batch(model)
    outputs = []
    for use_graph, sequential in [(False, True), (True, True), (True, False)]:
        model.compile([x], is_train=False, use_graph=use_graph, sequential=sequential, seed=0)
        outputs.append(model(x))
    assert model.graph(x).stats()["schedule"] == "parallel"
    np.testing.assert_array_equal(outputs[1], outputs[2])
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=1e-4, atol=1e-6)

"""Fused programs whose branches meet (registers, :mod:`graphc.type.program`): the
optimiser makes them, both engines compute them bit for bit as the unoptimised graph
does (in place, streamed, strided, reduced), and they write over only what they may."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, given, note, settings
from hypothesis import strategies as st

import graphc
import graphc.ndarray as N
from graphc.engine.numba_kernels import available
from graphc.engine.strategy import STREAM_MIN, fused_overwritable
from graphc.type import Op
from graphc.type.program import last_branch, registers

pytestmark = pytest.mark.cpu_engine   # the CPU's fused programs and registers

needs_numba = pytest.mark.skipif(available() is not None, reason="Numba is not installed")
KERNELS = ["numpy", pytest.param("generated", marks=needs_numba)]


def sobel(a):
    gx = ((a[:-2, 2:] + 2.0 * a[1:-1, 2:] + a[2:, 2:])
          - (a[:-2, :-2] + 2.0 * a[1:-1, :-2] + a[2:, :-2]))
    gy = ((a[2:, :-2] + 2.0 * a[2:, 1:-1] + a[2:, 2:])
          - (a[:-2, :-2] + 2.0 * a[:-2, 1:-1] + a[:-2, 2:]))
    return np.sqrt(gx * gx + gy * gy) if isinstance(a, np.ndarray) else N.sqrt(gx * gx + gy * gy)


def fused_nodes(exe):
    return [n for n in exe.graph.order if n.op.kind == "fused"]


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("side", [24, 300])    # one kernel pass; streamed on NumPy's side
def test_a_sobel_filter_is_one_program(kernels, side):
    image = np.random.default_rng(0).standard_normal((side, side)).astype(np.float32)
    a = N.var("image", image.shape, np.float32)
    exe = graphc.compile([a], sobel(a), kernels=kernels, check=True)
    (node,) = fused_nodes(exe)
    assert registers(node.op["program"]) and len(node.op["program"]) == 13
    # nothing is planned but the output: the branches never reach memory
    assert exe.stats()["planned_bytes"] == (side - 2) ** 2 * 4
    plain = graphc.compile([a], sobel(a), optimise=False)
    for _ in range(2):
        np.testing.assert_array_equal(exe.run(image=image), plain.run(image=image))
    np.testing.assert_array_equal(exe.run(image=image), sobel(image))


EXACT = ["add", "subtract", "multiply", "maximum", "minimum"]


@st.composite
def dags(draw):
    """An elementwise DAG over 1-3 inputs: each op reads any earlier values."""
    count = draw(st.integers(1, 3))
    steps = []
    for k in range(draw(st.integers(2, 9))):
        values = count + k
        kind = draw(st.sampled_from(EXACT + ["negative", "abs", "where", "scalar"]))
        picks = [draw(st.integers(0, values - 1)) for _ in range(3)]
        steps.append((kind, picks, draw(st.sampled_from([0.5, -2.0, 3.0]))))
    return count, steps


def build(ns, inputs, steps):
    values = list(inputs)
    for kind, (i, j, k), scalar in steps:
        a, b, c = values[i], values[j], values[k]
        if kind in EXACT:
            values.append(getattr(ns, kind)(a, b))
        elif kind == "where":
            values.append(ns.where(a > b, c, a))
        elif kind == "scalar":
            values.append(a * scalar + b)
        else:
            values.append(getattr(ns, kind)(a))
    return values[-1]


@settings(max_examples=40, deadline=None)
@given(dag=dags(), size=st.sampled_from([(5,), (3, 7), (STREAM_MIN + 3,)]),
       kernels=st.sampled_from(["numpy", "generated"] if available() is None else ["numpy"]),
       dtype=st.sampled_from(["float32", "float64"]))
def test_random_dags_match_the_unoptimised_graph(dag, size, kernels, dtype):
    count, steps = dag
    note(repr(steps))
    rng = np.random.default_rng(len(steps))
    feeds = {f"x{i}": rng.standard_normal(size).astype(dtype) for i in range(count)}
    xs = [N.var(name, size, dtype) for name in feeds]
    out = build(N, xs, steps)
    if out.op.kind == "var":
        return
    exe = graphc.compile(xs, out, kernels=kernels, check=True)
    event("registers" if any(registers(n.op["program"]) for n in fused_nodes(exe))
          else "no registers")
    plain = graphc.compile(xs, out, optimise=False)
    for _ in range(2):
        np.testing.assert_array_equal(exe.run(**feeds), plain.run(**feeds))


@pytest.mark.parametrize("kernels", KERNELS)
def test_an_update_computed_over_its_variable_after_a_branch(kernels):
    """``m' = 0.9 m + grad``: the gradient branch runs first, into its register, so the
    last branch may write the momentum straight over ``m``."""
    n = 64
    x, w, m = (N.var(s, (n,)) for s in "xwm")
    grad = 2.0 * (x * w - 1.0) * x
    g = graphc.compile([x, w, m], [], {m: 0.9 * m + grad}, kernels=kernels, check=True)
    (node,) = fused_nodes(g)
    assert registers(node.op["program"]) and g.stats()["updates_into_variables"] == 1
    rng = np.random.default_rng(2)
    feeds = {s: rng.standard_normal(n).astype(np.float32) for s in "xwm"}
    plain = graphc.compile([x, w, m], [], {m: 0.9 * m + grad}, optimise=False)
    for exe in (g, plain):
        exe.assign(m=feeds["m"], w=feeds["w"])
        exe.run(x=feeds["x"])
        exe.run(x=feeds["x"])
    np.testing.assert_array_equal(g.value("m"), plain.value("m"))


def test_what_a_program_with_registers_may_write_over():
    exp, neg, add = Op.make("exp"), Op.make("negative"), Op.make("add")
    # exp(x0) into a register, then the last branch: -x1, plus the register, plus x2
    program = ((exp, (("in", 0),)), (neg, (("in", 1),)), (add, (("acc",), ("reg", 0))),
               (add, (("acc",), ("in", 2))))
    assert last_branch(program) == 1
    # x0 is read only before the output is first written, x1 where it is; x2 later
    assert fused_overwritable(program, [(8,)] * 3, (8,)) == (0, 1)
    # streamed, each chunk reads every input before writing its output
    big = (STREAM_MIN,)
    assert fused_overwritable(program, [big] * 3, big) == (0, 1, 2)


@pytest.mark.parametrize("kernels", KERNELS)
def test_a_reduction_of_meeting_branches(kernels):
    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal((6, 130)).astype(np.float32) for _ in range(2))
    x, y = N.var("a", a.shape), N.var("b", b.shape)
    u, v = N.exp(x) * 0.5, N.abs(y) + 1.0
    total = N.sum(u * u + v * v, axis=1)
    exe = graphc.compile([x, y], total, kernels=kernels, check=True)
    kinds = {n.op.kind for n in exe.graph.order}
    (program,) = [n.op["program"] for n in exe.graph.order if "fused" in n.op.kind]
    assert registers(program)
    want = graphc.compile([x, y], total, optimise=False).run(a=a, b=b)
    got = exe.run(a=a, b=b)
    if kernels == "generated":     # the generated sum adds in its own order
        assert "fused_reduce" in kinds
        np.testing.assert_allclose(got, want, rtol=1e-5)
    else:
        np.testing.assert_array_equal(got, want)


def _bias_then(activation, x, bias):
    y = x + bias
    if activation == "hardswish":
        return y * N.clip(y * (1 / 6) + 0.5, 0.0, 1.0)
    return y * N.sigmoid(y)


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("activation", ["hardswish", "silu"])
def test_a_bias_joins_the_activation_that_reads_it_twice(kernels, activation):
    """``y = x + b`` read twice by ``y * f(y)``: one program, ``y`` its first register
    (no pass of its own), the values the unoptimised graph's: bit for bit, but for the
    generated sigmoid's own rounding (within 8 ulp, :mod:`graphc.engine.vector_sigmoid`)."""
    rng = np.random.default_rng(3)
    image = rng.standard_normal((2, 7, 7, 64)).astype(np.float32)
    bias = rng.standard_normal((1, 1, 1, 64)).astype(np.float32)
    x = N.var("x", image.shape, np.float32)
    b = N.var("b", bias.shape, np.float32)
    exe = graphc.compile([x, b], _bias_then(activation, x, b), kernels=kernels, check=True)
    (node,) = fused_nodes(exe)
    program = node.op["program"]
    assert program[0][0].kind == "add" and 0 in registers(program)
    assert len([s for s in exe.liveness.steps if s.op.kind != "fused"]) == 0
    plain = graphc.compile([x, b], _bias_then(activation, x, b), optimise=False)
    exact = kernels == "numpy" or activation == "hardswish"
    for _ in range(2):
        got, want = exe.run(x=image, b=bias)[0], plain.run(x=image, b=bias)[0]
        if exact:
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=10 * 2.0 ** -23, atol=1e-30)


def test_a_value_read_outside_the_program_stays_its_own_node():
    rng = np.random.default_rng(4)
    image = rng.standard_normal((2, 7, 7, 64)).astype(np.float32)
    x = N.var("x", image.shape, np.float32)
    y = x + 1.0
    exe = graphc.compile([x], [y * N.sigmoid(y), y], kernels="numpy", check=True)
    assert any(s.op.kind == "add" for s in exe.liveness.steps)
    got = exe.run(x=image)
    np.testing.assert_array_equal(got[1], image + np.float32(1))


@pytest.mark.parametrize("kernels", KERNELS)
def test_a_reduction_of_a_program_with_registers(kernels):
    """The generated fused reduction once named its loop bounds ``r0, r1``, as the
    program names its registers: a register then changed the next row's bound."""
    rng = np.random.default_rng(5)
    image = rng.standard_normal((2, 40, 8, 8)).astype(np.float32)
    bias = rng.standard_normal((40, 1, 1)).astype(np.float32)
    other = rng.standard_normal((2, 40, 8, 8)).astype(np.float32)
    x, b, z = (N.var(n, a.shape, np.float32) for n, a in
               (("x", image), ("b", bias), ("z", other)))
    y = x + b
    outputs = [N.mean(y * N.sigmoid(y), axis=(2, 3), keepdims=True),
               N.sum(N.exp(x * 0.1) * N.abs(z), axis=(1, 3))]
    exe = graphc.compile([x, b, z], outputs, kernels=kernels, check=True)
    if kernels == "generated":
        reductions = [s for s in exe.liveness.steps if s.op.kind == "fused_reduce"]
        assert len(reductions) == 2 and all(registers(s.op["program"]) for s in reductions)
    plain = graphc.compile([x, b, z], outputs, optimise=False)
    feeds = dict(x=image, b=bias, z=other)
    for got, want in zip(exe.run(**feeds), plain.run(**feeds)):
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)

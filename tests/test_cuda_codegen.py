"""The CUDA code generator (graphc/engine/cuda_codegen.py), proved on the CPU.

Each generated ``KernelSource`` is wrapped in a C loop (the body CuPy's
ElementwiseKernel would run per element), compiled with gcc, called through
ctypes and compared with graphc's own CPU kernels for the same op: every kind on
special values (signed zeros, infinities, NaN, integer extremes), hand-made fused
graphs, and random elementwise chains that the optimiser fuses. Exact equality
(signed zeros included) for arithmetic, comparisons and selections; rtol 1e-6
(float32 2e-6) where libm and NumPy's SIMD maths may differ by an ulp or two.
Finally all kernels are wrapped as ``__global__`` functions and compiled to PTX
with nvcc. Each part skips when its compiler is missing.
"""
from __future__ import annotations

import ctypes
import functools
import subprocess
from collections import Counter

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import graphc
import graphc.ndarray as N
from graphc.engine.cuda_codegen import (C_EXPRESSIONS, C_TYPES, PRELUDE, KernelSource,
                                        elementwise_kernel, literal, supported)
from graphc.type import Op
from graphc.type.program import operand, registers
from graphc.type.errors import DTypeError
from graphc.engine.strategy import stream_chunk
from graphc.type.kinds import KINDS

from c_kernels import _BUILD, GCC, NVCC, SEEN, _params, _wrap, load, run_kernel
from elementwise_cases import (ELEMENTWISE, INEXACT, _clip, _ints, assert_same, infer_out,
                               kind_cases, kinds_of, reference)

STATS: Counter = Counter()   # events the properties count

needs_gcc = pytest.mark.skipif(GCC is None, reason="gcc is not installed")
# the graphs these tests compile are the CPU's (their nodes' values are computed on the
# host and each generated kernel checked against them)
pytestmark = pytest.mark.cpu_engine
def check_node(op, inputs, shape, want):
    """The generated kernel of ``op`` against the CPU's value ``want``."""
    dtypes = [np.asarray(a).dtype for a in inputs]
    src = elementwise_kernel(op, dtypes, want.dtype)
    got = run_kernel(src, inputs, shape)
    exact = not (kinds_of(op) & INEXACT)
    try:
        assert_same(got, want, exact, str(op))
    except AssertionError:
        if op.kind != "fused" or exact:
            raise
        check_program_stepwise(op, inputs, shape)
        STATS["stepwise"] += 1
    return src


def check_program_stepwise(op, inputs, shape):
    """An inexact program compared instruction by instruction, each on the GPU code's
    own previous accumulator: an ulp of difference from exp, say, may be amplified by a
    later cancellation or jump at floor, yet every instruction must still be right."""
    program = op["program"]
    results = []
    for k, (inner, args) in enumerate(program):
        prefix = Op.make("fused", **{**op.params(), "program": program[:k + 1]})
        got = run_kernel(elementwise_kernel(prefix, [np.asarray(a).dtype for a in inputs],
                                            op["dtype"]), inputs, shape)
        want = reference(inner, [operand(a, inputs, results) for a in args])
        want = np.broadcast_to(want, shape).astype(op["dtype"])
        assert_same(got, want, inner.kind not in INEXACT, f"instruction {k} of {op}")
        results.append(got)


def check_graph(feeds, outputs, updates=None, **options):
    """Every elementwise node of the optimised graph, on its actual input values
    (computed node by node by the CPU kernels); returns those nodes' ops."""
    inputs = _vars(list(outputs) + list(updates or {}) + list((updates or {}).values()))
    feeds = {n.op["name"]: feeds[n.op["name"]] for n in inputs}
    g = graphc.compile(inputs, outputs, updates, **options)
    values = {}
    for node in g.graph.order:
        if node.op.kind == "var":
            values[id(node)] = feeds[node.op["name"]]
        elif node.op.kind == "const":
            values[id(node)] = node.value
        else:
            values[id(node)] = reference(node.op, [values[id(p)] for p in node.parents])
    with np.errstate(all="ignore"):
        got = g.run(**feeds)
    for o, out in zip(g.graph.outputs, got if isinstance(got, list) else [got]):
        np.testing.assert_array_equal(out, values[id(o)])  # the same graph, the same values
    found = []
    for node in g.graph.order:
        if KINDS[node.op.kind].family in ELEMENTWISE:
            check_node(node.op, [values[id(p)] for p in node.parents], node.shape,
                       values[id(node)])
            found.append(node.op)
    return found


def _vars(outputs):
    seen, stack, result = set(), list(outputs), []
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n.op.kind == "var":
            result.append(n)
        stack.extend(n.parents)
    return sorted(result, key=lambda n: n.op["name"])


# kinds without a C expression (gcd needs a loop) run NumPy's kernel
KINDS_TESTED = sorted(k for k, v in C_EXPRESSIONS.items() if k != "fused" and v)


@functools.lru_cache(maxsize=None)
def all_kind_cases():
    """kind -> [(op, inputs, out dtype, source or None when unsupported)], every kind's
    kernels compiled in one gcc call."""
    cases = {}
    for kind in KINDS_TESTED:
        rows = cases[kind] = []
        for op, inputs in kind_cases(kind):
            dtypes = [a.dtype for a in inputs]
            try:
                out = infer_out(op, dtypes)
            except DTypeError:
                continue  # NumPy itself does not define it (negative of bool, ...)
            src = elementwise_kernel(op, dtypes, out) if supported(op, dtypes, out) else None
            rows.append((op, inputs, out, src))
    return cases


def test_every_elementwise_kind_has_an_expression():
    elementwise = {k for k, v in KINDS.items() if v.family in ELEMENTWISE}
    assert elementwise == set(C_EXPRESSIONS)


@needs_gcc
@pytest.mark.parametrize("kind", KINDS_TESTED)
def test_kind_matches_the_cpu_kernel(kind):
    cases = all_kind_cases()
    load([row[3] for rows in cases.values() for row in rows if row[3] is not None])
    tested = 0
    for op, inputs, out, src in cases[kind]:
        dtypes = [a.dtype for a in inputs]
        if src is None:
            with pytest.raises(NotImplementedError, match=f"{kind} on "):
                elementwise_kernel(op, dtypes, out)
            continue
        want = reference(op, inputs)
        assert want.dtype == out
        check_node(op, inputs, want.shape, want)
        tested += 1
    assert tested > 0


# -- fused nodes ---------------------------------------------------------------------------
@needs_gcc
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_graphs(dtype):
    rng = np.random.default_rng(3)
    n = 96
    x, y, z = (N.var(s, (n,), dtype) for s in "xyz")
    feeds = {s: rng.normal(size=n).astype(dtype) for s in "xyz"}
    feeds["x"][:6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-30]
    outputs = [N.tanh(N.exp(x) * y + 1.0),                       # the architecture's example
               N.clip(N.maximum(x - y, 0.0) * 2.5 + z, -1.0, 3.0),
               N.where(x > y, N.sqrt(N.abs(z)) / 3.0, -z * z),
               x - 0.01 / N.sqrt(N.square(y) + 1e-8),            # AdaGrad, fused further
               N.relu(N.floor(x * 4.0) - N.negative(z)),
               N.logical_or(N.logical_not(x < y), z > 1.0)]                # bool programs
    kinds = [op.kind for op in check_graph(feeds, outputs)]
    assert kinds.count("fused") >= 5, kinds


@needs_gcc
def test_fma_and_adagrad_inside_fused_nodes():
    n = 64
    x, y, z = (N.var(s, (n,)) for s in "xyz")
    feeds = {s: np.linspace(-3, 3 + k, n, dtype=np.float32) for k, s in enumerate("xyz")}
    (op,) = check_graph(feeds, [N.tanh(x * y + z)])
    assert [inner.kind for inner, _ in op["program"]] == ["fma", "tanh"]
    # an AdaGrad update: the weight's program includes Owl's fused_adagrad step (with
    # check=True the passes run one at a time; in one combined round fusion takes
    # add -> sqrt before the adagrad rule can match)
    w, v = N.var("w", (n,)), N.var("v", (n,))
    v_new = v + z * z
    fma, update = check_graph({"w": feeds["x"], "v": np.abs(feeds["y"]), "z": feeds["z"]}, [],
                        {w: w - z * (0.01 / N.sqrt(v_new + 1e-7)), v: v_new}, check=True)
    assert fma.kind == "fma" and "fused_adagrad" in kinds_of(update), update
    # and one by hand: the step feeding a multiply, a subtraction and a clip
    step = Op.make("fused_adagrad", lr=0.01, eps=1e-7)
    program = ((step, (("in", 0),)), (Op.make("multiply"), (("in", 1), ("acc",))),
               (Op.make("subtract"), (("in", 2), ("acc",))),
               (_clip(-2.5, 2.5, "float32"), (("acc",),)))
    op = Op.make("fused", program=program, shape=(n,), dtype=np.dtype("float32"), inplace=())
    inputs = [np.abs(feeds["x"]), feeds["y"], feeds["z"]]
    check_node(op, inputs, (n,), reference(op, inputs))
    # a cast and a comparison as first instructions, reading inputs of other dtypes
    i = np.arange(-5, 5, dtype=np.int32)
    for first, dtype in [((Op.make("astype", dtype=np.dtype("float64")), (("in", 0),)),
                          "float64"), ((Op.make("less"), (("in", 0), ("in", 1))), "bool")]:
        then = (Op.make("exp") if dtype == "float64" else Op.make("logical_not"), (("acc",),))
        op = Op.make("fused", program=(first, then), shape=(10,), dtype=np.dtype(dtype),
                     inplace=())
        inputs = [i, np.float32(0.5)]
        check_node(op, inputs, (10,), reference(op, inputs))


@needs_gcc
def test_fused_streamed_and_integer_nodes():
    n = 1 << 16  # large enough that the fused node streams through a scratch on the CPU
    x, y = N.var("x", (n,)), N.var("y", (n,))
    i, j = N.var("i", (7,), "int32"), N.var("j", (7,), "int32")
    feeds = {"x": np.linspace(-4, 4, n, dtype=np.float32), "y": np.full(n, 0.5, np.float32),
             "i": np.array(_ints(np.int32)[::2], np.int32),
             "j": np.array(_ints(np.int32)[1::2], np.int32)}
    ops = check_graph(feeds, [N.sin(N.exp(x) * y) - y,
                              N.maximum(N.negative(i * j + 3), j) - 1])
    assert [op.kind for op in ops] == ["fused", "fused"], ops
    # the engine streams the first on the CPU (its inputs are x, y and a constant)
    assert stream_chunk(ops[0]["shape"], [(n,), (n,), ()], 4), ops


def _ulp_apart(kind, dtype="float32"):
    """Inputs at which ``kind``'s generated kernel (libm) and NumPy differ: which they
    are depends on the CPU (NumPy's SIMD loops) and the libm."""
    x = np.random.default_rng(0).uniform(-20, 20, 4096).astype(dtype)
    op = Op.make(kind)
    got = run_kernel(elementwise_kernel(op, [x.dtype], x.dtype), [x], x.shape)
    return x[(got != reference(op, [x])) & np.isfinite(got)]


@needs_gcc
def test_an_ulp_amplified_by_cancellation_is_checked_step_by_step():
    # where libm and NumPy differ by an ulp at x, f(x) - y with y = NumPy's f(x) turns
    # that ulp into 0 against +-ulp: no relative tolerance holds
    for kind in ("exp", "erf", "tanh", "sin", "log1p"):
        x = _ulp_apart(kind)[:4]
        if len(x) == 4:
            break
    else:
        pytest.skip("NumPy and libm agree on exp, erf, tanh, sin and log1p here")
    before = STATS["stepwise"]
    f = getattr(N, kind)
    (op,) = check_graph({"x": x, "y": reference(Op.make(kind), [x])},
                        [f(N.var("x", (4,))) - N.var("y", (4,))])
    assert op.kind == "fused" and STATS["stepwise"] == before + 1


def test_fused_operation_declares_an_accumulator():
    program = ((Op.make("multiply"), (("in", 0), ("in", 1))),
               (Op.make("add"), (("acc",), ("in", 2))),
               (Op.make("where"), (("in", 3), ("acc",), ("in", 1))))
    src = elementwise_kernel(Op.make("fused", program=program),
                             ["float32", "float32", "int32", "bool"], "float32")
    assert src.in_params == "float32 x0, float32 x1, int32 x2, bool x3"
    assert src.operation.splitlines() == [
        "float acc;", "acc = graphc_mul_f32(x0, x1);", "acc = acc + ((float)x2);",
        "acc = x3 ? acc : x1;", "out = acc;"]


def test_registers_are_declared_where_they_are_kept():
    program = ((Op.make("exp"), (("in", 0),)), (Op.make("negative"), (("in", 1),)),
               (Op.make("add"), (("acc",), ("reg", 0))))
    src = elementwise_kernel(Op.make("fused", program=program), ["float32", "float32"],
                             "float32")
    assert src.operation.splitlines() == [
        "float acc;", "acc = expf(x0);", "float r0 = acc;", "acc = -x1;", "acc = acc + r0;",
        "out = acc;"]


@needs_gcc
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_branches_meeting_in_one_program(dtype):
    rng = np.random.default_rng(8)
    x, y = (N.var(s, (9, 11), dtype) for s in "xy")
    feeds = {s: rng.normal(size=(9, 11)).astype(dtype) for s in "xy"}
    u, v = N.exp(x) * 0.5 - y, N.abs(y) + x
    ops = check_graph(feeds, [N.sqrt(u * u + v * v) * u])
    assert any(op.kind == "fused" and registers(op["program"]) for op in ops), ops


# -- random chains, fused by the default optimiser ----------------------------------------
UNARY = ["negative", "abs", "sign", "exp", "log", "log1p", "expm1", "sqrt", "square",
         "reciprocal", "sin", "cos", "tan", "tanh", "floor", "ceil", "rint", "erf", "sigmoid",
         "relu"]
BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "power",
          "floor_divide", "remainder", "arctan2", "hypot"]
SCALARS = [0.0, -1.0, 0.5, 2.5, 0.1, 3.0, 1e-8]


def _elements(dtype):
    width = 32 if dtype == "float32" else 64
    return st.one_of(st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0]),
                     st.floats(-20, 20, width=width))


@settings(max_examples=25, deadline=None)
@given(st.data())
def _random_chain_property(data):
    dtype = data.draw(st.sampled_from(["float32", "float64"]), label="dtype")
    n = data.draw(st.integers(2, 16), label="size")
    names = [f"x{k}" for k in range(data.draw(st.integers(1, 3), label="inputs"))]
    feeds = {s: data.draw(arrays(dtype, n, elements=_elements(dtype)), label=s) for s in names}
    pool = [N.var(s, (n,), dtype) for s in names]

    def pick():  # mostly the newest value, so chains form
        return pool[-1 - data.draw(st.sampled_from([0, 0, 0, 1, 2])) % len(pool)]

    for _ in range(data.draw(st.integers(1, 6), label="ops")):
        step = data.draw(st.sampled_from(["unary", "unary", "binary", "binary", "scalar",
                                          "where", "clip", "adagrad"]))
        a = pick()
        if step == "unary":
            a = getattr(N, data.draw(st.sampled_from(UNARY)))(a)
        elif step == "binary":
            a = getattr(N, data.draw(st.sampled_from(BINARY)))(a, pick())
        elif step == "scalar":
            s = data.draw(st.sampled_from(SCALARS))
            a = getattr(N, data.draw(st.sampled_from(BINARY)))(
                *((a, s) if data.draw(st.booleans()) else (s, a)))
        elif step == "where":
            a = N.where(a > pick(), a, pick())
        elif step == "clip":
            a = N.clip(a, data.draw(st.sampled_from([None, -1.0, 0.0])), 2.0)
        else:
            a = data.draw(st.sampled_from(SCALARS)) / N.sqrt(a + 1e-8)
        pool.append(a)
    fused = any(op.kind == "fused" for op in check_graph(feeds, [pool[-1]]))
    event("fused" if fused else "not fused")
    STATS["examples"] += 1
    STATS["fused"] += fused


@needs_gcc
def test_random_chains_match_the_cpu():
    STATS.clear()
    _random_chain_property()
    assert STATS["fused"] > 0, STATS  # the property did exercise fused nodes


# -- names, literals, errors -----------------------------------------------------------------
def test_names_are_stable_identifiers():
    a = elementwise_kernel(Op.make("fused_adagrad", lr=0.1, eps=1e-8), ["float32"], "float32")
    b = elementwise_kernel(Op.make("fused_adagrad", lr=0.1, eps=1e-8), ["float32"], "float32")
    c = elementwise_kernel(Op.make("fused_adagrad", lr=0.2, eps=1e-8), ["float32"], "float32")
    assert a == b and a.name != c.name and a.name.isidentifier()
    assert a.operation == "out = 0.10000000149011612f / sqrtf(x0 + 9.99999993922529e-09f);"


@needs_gcc
def test_literals_round_trip_exactly():
    cases = [(v, d) for d in ["float32", "float64"]
             for v in [0.1, 1 / 3, 1e-45, 2.0**-149, 3.4028235e38, 1e300, -0.0, np.inf, -np.inf,
                       np.nan, 5e-324, -2.5]]
    cases += [(v, d) for d in ["int32", "int64"] for v in _ints(np.dtype(d))] + [
        (True, "bool"), (False, "bool")]
    functions = "".join(f"{C_TYPES[d][0]} lit{k}(void) {{ return {literal(v, d)}; }}\n"
                        for k, (v, d) in enumerate(cases))
    path = f"{_BUILD.name}/literals"
    with open(path + ".c", "w") as f:
        f.write("#include <math.h>\n#include <stdbool.h>\n" + functions)
    subprocess.run([GCC, "-O1", "-shared", "-fPIC", "-w", "-o", path + ".so", path + ".c"],
                   check=True)
    lib = ctypes.CDLL(path + ".so")
    restype = {"float32": ctypes.c_float, "float64": ctypes.c_double, "int32": ctypes.c_int,
               "int64": ctypes.c_longlong, "bool": ctypes.c_bool}
    for k, (v, d) in enumerate(cases):
        fn = getattr(lib, f"lit{k}")
        fn.restype = restype[d]
        with np.errstate(all="ignore"):
            want = np.array(v).astype(d)
        np.testing.assert_array_equal(np.array(fn(), d).view(f"u{want.itemsize}"),
                                      want.view(f"u{want.itemsize}") if d != "bool" else want,
                                      err_msg=f"{v!r} as {d}: {literal(v, d)}")


@pytest.mark.parametrize("op, dtypes, out, message", [
    (Op.make("exp"), ["float16"], "float16", "exp on float16"),
    (Op.make("add"), ["float32", "float32"], "float16", "add on float16"),
    (Op.make("floor_divide"), ["int32", "int32"], "int32", "floor_divide on int32"),
    (Op.make("remainder"), ["int64", "int64"], "int64", "remainder on int64"),
    (Op.make("power"), ["int32", "int32"], "int32", "power on int32"),
    (Op.make("exp"), ["int8"], "float16", "exp on int8"),
    (Op.make("matmul"), ["float32", "float32"], "float32", "matmul on float32"),
    (Op.make("sum", axis=None, keepdims=False), ["float32"], "float32", "sum on float32"),
    (Op.make("fused", program=((Op.make("negative"), (("in", 0),)),
                               (Op.make("sqrt"), (("acc",),)))), ["int32"], "int32",
     "sqrt on int32"),
])
def test_unsupported_is_a_clear_error(op, dtypes, out, message):
    with pytest.raises(NotImplementedError, match=message):
        elementwise_kernel(op, dtypes, out)
    assert not supported(op, dtypes, out)


def test_supported_infers_the_result_dtype():
    assert supported(Op.make("divide"), ["int32", "int32"])      # true division, in float64
    assert supported(Op.make("less"), ["float32", "int64"])
    assert not supported(Op.make("exp"), ["bool"])                # NumPy gives float16
    assert not supported(Op.make("negative"), ["bool"])           # NumPy refuses it
    assert not supported(Op.make("reshape", shape=(2,)), ["float32"])


# -- nvcc --------------------------------------------------------------------------------------
def test_nvcc_compiles_every_kernel(tmp_path):
    if NVCC is None:
        pytest.skip("nvcc is not installed")
    sources = dict(SEEN)
    for rows in all_kind_cases().values():  # also when run alone
        sources.update((row[3].name, row[3]) for row in rows if row[3] is not None)
    fma = elementwise_kernel(Op.make("fma"), ["float32"] * 3, "float32")
    sources[fma.name] = fma
    cu, ptx = tmp_path / "kernels.cu", tmp_path / "kernels.ptx"
    # NVRTC (CuPy's compiler) has no <math.h>: the prelude's own INFINITY and NAN serve
    cu.write_text("#undef INFINITY\n#undef NAN\n" + PRELUDE + "\n"
                  + "\n".join(_wrap(s, cuda=True) for s in sources.values()))
    result = subprocess.run([NVCC, "--ptx", "-arch=sm_90", "-o", str(ptx), str(cu)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-4000:]
    text = ptx.read_text()
    assert text.count(".entry") == len(sources)
    # a*b + c stays two roundings (mul.rn, add.rn), as NumPy computes it: no contracted FMA
    body = text[text.index(f".entry {fma.name}"):]
    body = body[:body.index("ret;")]
    assert "mul.rn.f32" in body and "fma.rn" not in body


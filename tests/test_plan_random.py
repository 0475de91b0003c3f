"""Random programs, built three ways: a graphc graph run with both memory plans,
the naive evaluator (no plan, every value in its own array) and plain NumPy.

A program is a list of instructions over numbered values (variables,
constants and op results). Hypothesis draws programs with shared
subexpressions, values used twice by one op (``x * x``), broadcasting against
smaller shapes, reductions, reshapes, transposes, matmuls, concatenations,
slices and ``where``, several outputs (sometimes a variable or a constant) and
update edges (sometimes a simultaneous swap). Every planned run must equal the
naive run exactly and NumPy closely, over several successive runs with new
inputs, and the plans must pass the independent checker.
"""
from __future__ import annotations

import itertools
import math
import operator
import os
import tempfile

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import graphc
import graphc.ndarray as N
from graphc.engine.checker import check_concurrent_plan, check_plan
from graphc.engine.liveness import analyse
from graphc.engine.naive import evaluate_naive
from graphc.engine.planners import make_plan

UNARY = ["tanh", "sin", "cos", "negative", "absolute", "square", "exp"]
BINARY = ["add", "subtract", "multiply", "maximum", "minimum"]
REDUCE = ["sum", "mean", "max", "min", "prod"]
SCALAR_OPS = {"mul": operator.mul, "add": operator.add, "rsub": lambda a, s: s - a,
              "truediv": operator.truediv}
DTYPES = [np.dtype(np.float32), np.dtype(np.float64)]
MAX_SIZE = 256
RUNS = 3
SCHEDULES = ("serial", "parallel", "parallel_reuse")


# -- interpretation: the same instruction list, for graphc.ndarray or NumPy ------------
def apply(M, ins, vals):
    """The value of instruction ``ins`` with namespace ``M`` (``N`` or ``np``)."""
    tag = ins[0]
    if tag == "var":
        raise AssertionError("variables are leaves")
    if tag == "const":
        return N.const(ins[1]) if M is N else ins[1]
    if tag == "unary":
        return getattr(M, ins[1])(vals[ins[2]])
    if tag == "binary":
        return getattr(M, ins[1])(vals[ins[2]], vals[ins[3]])
    if tag == "scalar":
        return SCALAR_OPS[ins[1]](vals[ins[2]], ins[3])
    if tag == "reduce":
        return getattr(M, ins[1])(vals[ins[2]], axis=ins[3], keepdims=ins[4])
    if tag == "reshape":
        return M.reshape(vals[ins[1]], ins[2])
    if tag == "transpose":
        return M.transpose(vals[ins[1]], ins[2])
    if tag == "matmul":
        return vals[ins[1]] @ vals[ins[2]]
    if tag == "concat":
        return M.concatenate([vals[i] for i in ins[1]], axis=ins[2])
    if tag == "slice":
        return vals[ins[1]][ins[2]]
    if tag == "where":
        return M.where(vals[ins[1]] > 0, vals[ins[2]], vals[ins[3]])
    if tag == "astype":
        return vals[ins[1]].astype(ins[2])
    raise AssertionError(tag)


def interpret(M, program, leaves):
    """All values of ``program``; ``leaves`` maps a variable's name to its value."""
    vals = []
    for ins in program["instrs"]:
        if ins[0] == "var":
            vals.append(leaves[ins[1]])
        else:
            value = apply(M, ins, vals)
            vals.append(value if M is N else np.asarray(value))
    return vals


# -- the strategy -------------------------------------------------------------------
def _broadcastable(a, b):
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


def _smaller_shape(draw, shape):
    """A shape that broadcasts against ``shape``: a suffix, some sizes set to 1."""
    k = draw(st.integers(0, len(shape)))
    suffix = shape[len(shape) - k:]
    return tuple(1 if draw(st.booleans()) else d for d in suffix)


def _reshape_targets(shape):
    size = math.prod(shape)
    targets = {(size,), tuple(reversed(shape)), shape + (1,), (1,) + shape,
               tuple(d for d in shape if d != 1)}
    for i in range(len(shape) - 1):
        targets.add(shape[:i] + (shape[i] * shape[i + 1],) + shape[i + 2:])
    if size % 2 == 0 and size:
        targets.add((2, size // 2))
        targets.add((-1, 2))
    return sorted(t for t in targets if t != shape and len(t) <= 4)


def _slice_key(draw, shape):
    key = []
    for d in shape:
        choice = draw(st.sampled_from(["full", "range", "int", "newaxis"]))
        if choice == "full":
            key.append(slice(None))
        elif choice == "int" and d > 0:
            key.append(draw(st.integers(-d, d - 1)))
        elif choice == "newaxis":
            key.extend([None, slice(None)])
        else:
            start = draw(st.none() | st.integers(-d - 1, d + 1))
            stop = draw(st.none() | st.integers(-d - 1, d + 1))
            step = draw(st.sampled_from([None, 1, 2, -1, -2]))
            key.append(slice(start, stop, step))
    if draw(st.booleans()) and key and key[-1] == slice(None):
        key[-1] = Ellipsis
    return tuple(key)


SHAPES = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


@st.composite
def programs(draw, max_ops=14):
    instrs, shapes, dtypes = [], [], []
    names = itertools.count()

    def add(ins):
        # shape and dtype come from NumPy itself, on dummy values
        dummy = [np.zeros(s, d) for s, d in zip(shapes, dtypes)]
        with np.errstate(all="ignore"):
            out = np.asarray(apply(np, ins, dummy)) if ins[0] != "var" else np.zeros(ins[2], ins[3])
        instrs.append(ins)
        shapes.append(out.shape)
        dtypes.append(out.dtype)
        return len(instrs) - 1

    def new_var(shape, dtype=None):
        dtype = dtype if dtype is not None else draw(st.sampled_from(DTYPES))
        return add(("var", f"v{next(names)}", shape, dtype))

    def const(shape, dtype):
        data = draw(st.lists(st.floats(-1, 1, width=32), min_size=math.prod(shape),
                             max_size=math.prod(shape)))
        return add(("const", np.array(data, dtype=dtype).reshape(shape)))

    first = new_var(draw(SHAPES))
    if draw(st.booleans()):           # a second variable of the same shape and dtype
        new_var(shapes[first], dtypes[first])
    for _ in range(draw(st.integers(1, max_ops))):
        pick = st.integers(0, len(instrs) - 1)
        i = draw(pick)
        s, d = shapes[i], dtypes[i]
        kind = draw(st.sampled_from(["unary", "binary", "binary", "self", "scalar", "reduce",
                                     "reshape", "transpose", "matmul", "concat", "slice",
                                     "where", "astype", "var", "small"]))
        if kind == "unary":
            add(("unary", draw(st.sampled_from(UNARY)), i))
        elif kind == "self":             # one node used twice by one op
            add(("binary", draw(st.sampled_from(BINARY)), i, i))
        elif kind == "binary":
            js = [j for j in range(len(instrs)) if _broadcastable(s, shapes[j])
                  and math.prod(np.broadcast_shapes(s, shapes[j])) <= MAX_SIZE]
            j = draw(st.sampled_from(js))
            a, b = (i, j) if draw(st.booleans()) else (j, i)
            add(("binary", draw(st.sampled_from(BINARY)), a, b))
        elif kind == "small":            # broadcast against a smaller shape
            other = (new_var(_smaller_shape(draw, s)) if draw(st.booleans())
                     else const(_smaller_shape(draw, s), draw(st.sampled_from(DTYPES))))
            a, b = (i, other) if draw(st.booleans()) else (other, i)
            add(("binary", draw(st.sampled_from(BINARY)), a, b))
        elif kind == "scalar":
            add(("scalar", draw(st.sampled_from(sorted(SCALAR_OPS))), i,
                 draw(st.sampled_from([0.5, 2.0, -1.5, 3]))))
        elif kind == "reduce":
            name = draw(st.sampled_from(REDUCE))
            axis = draw(st.none() | st.lists(st.integers(-len(s), len(s) - 1), min_size=1,
                                             max_size=len(s), unique_by=lambda a: a % len(s))
                        .map(lambda a: a[0] if len(a) == 1 else tuple(a))) if s else None
            reduced = range(len(s)) if axis is None else np.atleast_1d(axis) % max(len(s), 1)
            if name in ("max", "min") and any(s[a] == 0 for a in reduced):
                name = "sum"               # no identity: NumPy and graphc both refuse
            add(("reduce", name, i, axis, draw(st.booleans())))
        elif kind == "reshape":
            targets = _reshape_targets(s)
            if targets:
                add(("reshape", i, draw(st.sampled_from(targets))))
        elif kind == "transpose" and len(s) >= 2:
            add(("transpose", i, tuple(draw(st.permutations(range(len(s)))))))
        elif kind == "matmul" and s:
            js = [j for j in range(len(instrs)) if shapes[j] and (
                len(shapes[j]) == 1 and shapes[j][0] == s[-1]
                or len(shapes[j]) >= 2 and shapes[j][-2] == s[-1]
                and _broadcastable(s[:-2], shapes[j][:-2]))]
            if js and draw(st.booleans()):
                j = draw(st.sampled_from(js))
            else:                          # a fresh weight that fits
                j = new_var((s[-1], draw(st.integers(1, 4))))
            add(("matmul", i, j))
        elif kind == "concat" and s:
            axis = draw(st.integers(-len(s), len(s) - 1))
            ax = axis % len(s)
            js = [j for j in range(len(instrs)) if len(shapes[j]) == len(s) and all(
                a == b for k, (a, b) in enumerate(zip(shapes[j], s)) if k != ax)]
            others = draw(st.lists(st.sampled_from(js), min_size=1, max_size=2))
            total = sum(shapes[j][ax] for j in [i] + others)
            if total * math.prod(s) // max(s[ax], 1) <= MAX_SIZE:
                add(("concat", tuple([i] + others), axis))
        elif kind == "slice" and s:
            add(("slice", i, _slice_key(draw, s)))
        elif kind == "where":
            js = [j for j in range(len(instrs)) if _broadcastable(s, shapes[j])]
            a, b = draw(st.sampled_from(js)), draw(st.sampled_from(js))
            if _broadcastable(shapes[a], shapes[b]) and math.prod(
                    np.broadcast_shapes(s, shapes[a], shapes[b])) <= MAX_SIZE:
                add(("where", i, a, b))
        elif kind == "astype":
            add(("astype", i, DTYPES[1 - DTYPES.index(d)]))
        elif kind == "var":
            new_var(draw(SHAPES))
    n = len(instrs)
    outputs = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3))
    if draw(st.booleans()):
        outputs.append(n - 1)              # the last value, so most of the program is used
    variables = [k for k, ins in enumerate(instrs) if ins[0] == "var"]
    updates = {}
    for v in variables:
        same = [k for k in range(n) if shapes[k] == shapes[v] and dtypes[k] == dtypes[v]]
        if draw(st.integers(0, 2)) == 0:
            updates[v] = draw(st.sampled_from(same))
    # a simultaneous swap whenever two variables share shape and dtype
    pairs = [(a, b) for a, b in itertools.combinations(variables, 2)
             if shapes[a] == shapes[b] and dtypes[a] == dtypes[b]]
    if pairs and draw(st.booleans()):
        a, b = draw(st.sampled_from(pairs))
        updates[a], updates[b] = b, a
    return {"instrs": instrs, "shapes": shapes, "dtypes": dtypes, "outputs": outputs,
            "updates": updates, "variables": variables}


# -- helpers ------------------------------------------------------------------------
def build_graph(program):
    """(input vars, outputs, updates) as graphc nodes."""
    leaves = {ins[1]: N.var(ins[1], ins[2], ins[3])
              for ins in program["instrs"] if ins[0] == "var"}
    vals = interpret(N, program, leaves)
    inputs = [vals[v] for v in program["variables"]]
    outputs = [vals[o] for o in program["outputs"]]
    updates = {vals[v]: vals[u] for v, u in program["updates"].items()}
    return inputs, outputs, updates


def numpy_step(program, state):
    """(outputs, new state) by plain NumPy from the variables' values ``state``."""
    with np.errstate(all="ignore"):
        vals = interpret(np, program, state)
    outputs = [vals[o].copy() for o in program["outputs"]]
    new_state = dict(state)
    for v, u in program["updates"].items():
        new_state[program["instrs"][v][1]] = vals[u].astype(program["dtypes"][v], copy=True)
    return outputs, new_state


def random_inputs(program, rng, names):
    out = {}
    for v in program["variables"]:
        _, name, shape, dtype = program["instrs"][v]
        if name in names:
            out[name] = rng.uniform(-1, 1, shape).astype(dtype)
    return out


def assert_close_to_numpy(got, want, where):
    assert got.shape == want.shape, f"{where}: shape {got.shape} != NumPy {want.shape}"
    assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != NumPy {want.dtype}"
    rtol = 1e-5 if got.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, equal_nan=True, err_msg=where)


def assert_memory_facts(g):
    s = g.stats()
    check_plan(g.liveness, g.plan)
    if g.schedule == "parallel":
        check_concurrent_plan(g.liveness, g.plan)
        assert s["planned_bytes"] == s["serial_planned_bytes"] + s["parallel_extra_bytes"]
    if g.schedule == "parallel_reuse":      # the serial plan: the engine orders reuse
        assert s["parallel_extra_bytes"] == 0
    assert s["planned_bytes"] >= s["lower_bound_bytes"]
    assert s["lower_bound_bytes"] <= s["lower_bound_no_inplace_bytes"] <= s["naive_bytes"]
    assert s["naive_bytes"] == sum(n.nbytes for n in g.liveness.planned_steps())
    assert s["steps"] + s["elided_steps"] == len(g.liveness.steps)
    # outputs and update values are pinned: nothing computed later shares their bytes
    pinned = [n for n in g.liveness.steps if id(n) in g.liveness.pinned]
    for n in pinned:
        assert g.liveness.last_use[id(n)] == g.liveness.end


# -- the properties -----------------------------------------------------------------
@pytest.mark.cpu_engine   # bit for bit against the naive evaluator, host views: the CPU's
@given(programs(max_ops=20), st.integers(0, 2**32 - 1), st.booleans())
def test_planned_runs_match_naive_and_numpy(program, seed, copy_outputs):
    note(repr(program["instrs"]))
    note(f"outputs {program['outputs']} updates {program['updates']}")
    rng = np.random.default_rng(seed)
    names = [program["instrs"][v][1] for v in program["variables"]]
    state_names = {program["instrs"][v][1] for v in program["updates"]}
    compiled = []
    for plan, schedule in itertools.product(("blocks", "offsets"), SCHEDULES):
        inputs, outputs, updates = build_graph(program)
        g = graphc.compile(inputs, outputs, updates, plan=plan, check=True,
                           copy_outputs=copy_outputs, schedule=schedule, workers=4)
        assert_memory_facts(g)
        compiled.append(g)
    state = random_inputs(program, rng, names)   # the first run feeds every variable
    feeds = dict(state)
    for run in range(RUNS):
        want, new_state = numpy_step(program, state)
        originals = {k: v.copy() for k, v in feeds.items()}
        results = []
        for g in compiled:
            with np.errstate(all="ignore"):
                naive = evaluate_naive(g.graph, state)
                got = g.run(**feeds)
            if not copy_outputs:
                assert all(not r.flags.writeable for r in got)
                got = [r.copy() for r in got]
            results.append(got)
            assert len(got) == len(want) == len(g.graph.outputs)
            for k, (o, w, nv) in enumerate(zip(got, want, naive)):
                where = f"run {run} plan {g.plan.strategy} {g.schedule} output {k}"
                np.testing.assert_array_equal(o, nv, err_msg=f"{where} vs naive")
                assert o.dtype == nv.dtype
                assert_close_to_numpy(o, w, where)
            for name, value in new_state.items():
                assert g.value(name).dtype == value.dtype
            # the naive evaluator's update values are those the graph took
            for (var, _), nv in zip(g.graph.updates, naive[len(g.graph.outputs):]):
                np.testing.assert_array_equal(g.value(var.name), nv)
        for k in range(len(want)):      # all plans and schedules agree bit for bit
            for other in results[1:]:
                np.testing.assert_array_equal(results[0][k], other[k])
        for name, value in new_state.items():
            for other in compiled[1:]:
                np.testing.assert_array_equal(compiled[0].value(name), other.value(name))
            for g in compiled:
                got_value = g.value(name)
                if name in state_names:
                    assert_close_to_numpy(got_value, value, f"state {name} after run {run}")
                else:                   # a plain input keeps what was fed
                    np.testing.assert_array_equal(got_value, value)
        for k, v in feeds.items():      # arrays the caller passed are never written
            np.testing.assert_array_equal(v, originals[k])
        # next run: new values for inputs without updates; state variables carry over
        state = {name: compiled[0].value(name) for name in names}
        feeds = random_inputs(program, rng, [n for n in names if n not in state_names])
        state.update(feeds)


@given(programs(max_ops=10))
def test_planners_and_checker_agree_on_random_liveness(program):
    inputs, outputs, updates = build_graph(program)
    g = graphc.compile(inputs, outputs, updates)
    live = analyse(g.graph)
    for strategy in ("blocks", "offsets"):
        plan = make_plan(live, strategy)
        check_plan(live, plan)
        assert plan.planned_bytes >= live.lower_bound_bytes()
        # every recorded alias is an allowed in-place overwrite at the same place
        for child, parent in plan.aliases.items():
            assert plan.place[child] == plan.place[parent]
            assert parent in {id(p) for p in live.inplace[child]}
    per_step = live.live_bytes_per_step()
    assert len(per_step) == len(live.steps)
    assert max(per_step, default=0) == live.lower_bound_bytes()
    assert live.lower_bound_bytes() <= live.lower_bound_bytes(inplace=False) <= live.naive_bytes()


@given(programs(max_ops=8), st.integers(0, 2**32 - 1))
def test_random_program_survives_save_and_load(program, seed):
    inputs, outputs, updates = build_graph(program)
    g = graphc.compile(inputs, outputs, updates, plan="offsets")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "g.npz")
        g.save(path)
        h = graphc.load(path, plan="offsets")
    rng = np.random.default_rng(seed)
    feeds = random_inputs(program, rng, [program["instrs"][v][1] for v in program["variables"]])
    for run in range(2):
        a, b = g.run(**feeds), h.run(**feeds)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
        for name in feeds:
            np.testing.assert_array_equal(g.value(name), h.value(name))
    sa, sb = g.stats(), h.stats()
    sa.pop("build_seconds"), sb.pop("build_seconds")
    assert sa == sb


def test_swap_update_is_simultaneous_on_both_plans():
    for plan in ("blocks", "offsets"):
        a, b = N.var("a", (3,)), N.var("b", (3,))
        g = graphc.compile([a, b], [a - b], {a: b, b: a}, plan=plan, check=True)
        A, B = np.arange(3, dtype=np.float32), np.full(3, 10, np.float32)
        np.testing.assert_array_equal(g.run(a=A, b=B)[0], A - B)
        np.testing.assert_array_equal(g.value("a"), B)
        np.testing.assert_array_equal(g.value("b"), A)
        np.testing.assert_array_equal(g.run()[0], B - A)
        np.testing.assert_array_equal(g.value("a"), A)
        np.testing.assert_array_equal(g.value("b"), B)


def test_the_strategy_covers_every_instruction():
    """The generator can reach every kind of instruction (guards the strategy)."""
    seen = set()

    @settings(max_examples=300, derandomize=True, database=None)
    @given(programs())
    def collect(program):
        seen.update(ins[0] for ins in program["instrs"])
        if program["updates"]:
            seen.add("update")
        if any(program["updates"].get(u) == v for v, u in program["updates"].items()
               if v != u):
            seen.add("swap")

    collect()
    wanted = {"var", "const", "unary", "binary", "scalar", "reduce", "reshape", "transpose",
              "matmul", "concat", "slice", "where", "astype", "update"}
    assert wanted <= seen, f"never generated: {sorted(wanted - seen)}"


@given(programs(max_ops=20), st.integers(0, 2**32 - 1), st.sampled_from(["blocks", "offsets"]),
       st.sampled_from(SCHEDULES[1:]))
@pytest.mark.cpu_engine   # the CPU thread schedules
def test_parallel_runs_repeat_the_serial_runs_bit_for_bit(program, seed, plan, parallel):
    """Races show up only now and then: many runs in lockstep with the serial
    schedule, some feeding only part of the inputs (incremental runs). Under
    ``parallel_reuse`` only the engine's memory-region variables keep a step from
    overwriting bytes another still reads."""
    names = [program["instrs"][v][1] for v in program["variables"]]
    pair = []
    for schedule in ("serial", parallel):
        inputs, outputs, updates = build_graph(program)
        pair.append(graphc.compile(inputs, outputs, updates, plan=plan, schedule=schedule,
                                   workers=4))
    rng = np.random.default_rng(seed)
    feeds = random_inputs(program, rng, names)
    for run in range(12):
        with np.errstate(all="ignore"):
            serial, parallel = (g.run(**feeds) for g in pair)
        for k, (a, b) in enumerate(zip(serial, parallel)):
            np.testing.assert_array_equal(a, b, err_msg=f"run {run} output {k}")
        for name in names:
            np.testing.assert_array_equal(pair[0].value(name), pair[1].value(name))
        feeds = random_inputs(program, rng, [n for n in names if rng.random() < 0.5])


@given(programs(max_ops=14))
def test_parallel_plans_pass_the_concurrency_checker(program):
    inputs, outputs, updates = build_graph(program)
    g = graphc.compile(inputs, outputs, updates)
    live = analyse(g.graph, concurrent=True)
    serial_live = analyse(g.graph)
    for strategy in ("blocks", "offsets"):
        plan = make_plan(live, strategy)
        check_plan(live, plan)
        check_concurrent_plan(live, plan)
        for child, parent in plan.aliases.items():
            assert plan.place[child] == plan.place[parent]
        # the parallel rule only removes sharing: never fewer bytes than some serial plan
        # can reach, never in-place overwrites the serial order would refuse
        # (a value the serial order computes into its variable may be in place instead)
        assert set(live.external) <= set(serial_live.external)
        assert set(live.inplace) <= set(serial_live.inplace) | set(serial_live.external)
        assert plan.planned_bytes >= live.lower_bound_bytes()


@given(programs(max_ops=14), st.sampled_from(["blocks", "offsets"]))
def test_memory_regions_overlap_exactly_when_bytes_do(program, strategy):
    """The parallel engine orders steps by the regions they touch: two values must
    share a region if and only if their planned bytes overlap."""
    from graphc.engine.schedules import memory_regions

    inputs, outputs, updates = build_graph(program)
    live = analyse(graphc.compile(inputs, outputs, updates).graph)
    plan = make_plan(live, strategy)
    regions = memory_regions(live, plan)
    placed = [n for n in live.steps if id(n) in plan.place and n.nbytes]
    for i, a in enumerate(placed):
        buf_a, off_a = plan.place[id(a)]
        for b in placed[i + 1:]:
            buf_b, off_b = plan.place[id(b)]
            overlap = buf_a == buf_b and off_a < off_b + b.nbytes and off_b < off_a + a.nbytes
            shared = bool(set(regions[id(a)]) & set(regions[id(b)]))
            assert shared == overlap, (a.label(), b.label())

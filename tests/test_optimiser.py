"""The optimiser: every pass on its own, the pipeline on random programs
(optimised == unoptimised, invariants checked after every round, plans checked),
the choice of passes, fast_math, the per-pass report, and the one executor
(``check=True`` runs the default schedule; stages; the kinds passes declare)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, example, given, note, settings
from hypothesis import strategies as st

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc.optimiser import PIPELINE, optimise
from graphc.optimiser.invariants import InvariantError, check_invariants
from graphc.optimiser.passes import STATIC_PASSES, run_stages
from graphc.optimiser.rewriter import STAGES, Pass, Rule, rewrite
from graphc.symbol.traverse import topological_order
from graphc.type.kinds import KINDS
from graphc.optimiser.pattern import Pat
from graphc.type import Op
from graphc.type.errors import ShapeError
from test_plan_random import build_graph, programs, random_inputs

F32 = np.float32
RNG = np.random.default_rng(7)


def arr(*shape, dtype=F32):
    return RNG.uniform(-1, 1, shape).astype(dtype)


def kinds(g):
    return g.stats()["ops"]


def both(inputs, outputs, updates=None, **options):
    """The same graph compiled with and without the optimiser (checked)."""
    return (graphc.compile(inputs, outputs, updates, check=True, **options),
            graphc.compile(inputs, outputs, updates, optimise=False, check=True))


# -- the pipeline on random programs ----------------------------------------------------
@given(programs(max_ops=16), st.integers(0, 2**32 - 1), st.sampled_from(["blocks", "offsets"]))
def test_optimised_random_programs_match_unoptimised(program, seed, plan):
    note(repr(program["instrs"]))
    rng = np.random.default_rng(seed)
    names = [program["instrs"][v][1] for v in program["variables"]]
    inputs, outputs, updates = build_graph(program)
    fast = graphc.compile(inputs, outputs, updates, plan=plan, check=True)
    slow = graphc.compile(inputs, outputs, updates, plan=plan, optimise=False, check=True)
    assert fast.stats()["nodes"] <= slow.stats()["nodes"]
    feeds = random_inputs(program, rng, names)
    for _ in range(2):
        with np.errstate(all="ignore"):
            got, want = fast.run(**feeds), slow.run(**feeds)
        for o, w in zip(got, want):
            assert o.shape == w.shape and o.dtype == w.dtype
            tol = 1e-5 if o.dtype == F32 else 1e-12
            np.testing.assert_allclose(o, w, rtol=tol, atol=tol, equal_nan=True)
        for name in names:
            np.testing.assert_allclose(fast.value(name), slow.value(name), rtol=1e-5,
                                       atol=1e-5, equal_nan=True)


# -- common subexpressions -------------------------------------------------------------
def test_cse_merges_identical_ops_and_equal_small_constants():
    x = N.var("x", (8,))
    y = N.exp(x) * 2.0 + N.exp(x) * 2.0
    g, plain = both([x], y, optimise=["cse"])
    assert kinds(plain)["exp"] == 2 and kinds(plain)["multiply"] == 2
    assert kinds(g)["exp"] == 1 and kinds(g)["multiply"] == 1 and kinds(g)["const"] == 1
    X = arr(8)
    np.testing.assert_array_equal(g.run(x=X), plain.run(x=X))


def test_cse_never_merges_constants_too_large_to_digest_even_equal_ones():
    from graphc.symbol.constants import DIGEST_LIMIT
    size = DIGEST_LIMIT // 4 + 1                  # float32: just over the limit
    weights = arr(size)
    x = N.var("x", (size,))
    y = x * weights + x * weights                 # two constants of equal content
    g, plain = both([x], y, optimise=["cse"])
    assert kinds(plain)["const"] == 2 and kinds(g)["const"] == 2
    assert kinds(g)["multiply"] == 2
    X = arr(size)
    np.testing.assert_array_equal(g.run(x=X), plain.run(x=X))


def test_cse_never_merges_random_draws():
    u = N.random.uniform(size=(16,))
    v = N.random.uniform(size=(16,))
    g = graphc.compile([], [u - v], optimise=["cse"], seed=0)
    assert kinds(g)["random_uniform"] == 2
    assert np.any(g.run()[0] != 0)


# -- constant folding ---------------------------------------------------------------------
@pytest.mark.cpu_engine   # folding computes with the CPU's kernels: their bits
def test_fold_computes_constant_subgraphs_once_with_the_engine_kernels():
    x = N.var("x", (4,))
    c = N.exp(N.const(np.arange(4, dtype=F32))) * 3.0 + 1.0
    g, plain = both([x], x * c, optimise=["fold"])
    assert set(kinds(g)) == {"var", "const", "multiply"}
    X = arr(4)
    np.testing.assert_array_equal(g.run(x=X), plain.run(x=X))


def test_fold_respects_its_size_cap():
    x = N.var("x", (1,))
    big = N.broadcast_to(N.const(np.float32(2.0)), (512, 512))   # 1 MiB from 4 bytes
    g = graphc.compile([x], x * big, optimise=["fold"])
    assert "broadcast_to" in kinds(g)
    small = N.broadcast_to(N.const(np.float32(2.0)), (8,))
    g2 = graphc.compile([x], x * small, optimise=["fold"])
    assert "broadcast_to" not in kinds(g2)


# -- useless ops ------------------------------------------------------------------------------
@pytest.mark.parametrize("build", [
    lambda x: x + (-0.0), lambda x: (-0.0) + x, lambda x: x - 0.0, lambda x: x * 1.0,
    lambda x: 1.0 * x, lambda x: x / 1.0, lambda x: x ** 1.0, lambda x: -(-x),
    lambda x: x.T.T, lambda x: N.transpose(N.transpose(x, (1, 0)), (1, 0)),
    lambda x: x.reshape(-1).reshape(3, 4), lambda x: N.copy(x),
], ids=["add-0", "-0add", "sub0", "mul1", "1mul", "div1", "pow1", "negneg", "TT", "tt",
        "reshape2", "copy"])
def test_useless_ops_disappear_and_results_stay_exact(build):
    x = N.var("x", (3, 4))
    g, plain = both([x], [build(x) * 2.0], optimise=["simplify"])
    assert g.stats()["nodes"] < plain.stats()["nodes"]
    assert set(kinds(g)) == {"var", "const", "multiply"}
    X = arr(3, 4)
    X[0, :3] = [-0.0, np.inf, np.nan]
    np.testing.assert_array_equal(g.run(x=X)[0], plain.run(x=X)[0])
    np.testing.assert_array_equal(np.signbit(g.run(x=X)[0]), np.signbit(plain.run(x=X)[0]))


@pytest.mark.parametrize("build", [
    lambda x: x + 0.0, lambda x: 0.0 + x, lambda x: x + 0, lambda x: x - (-0.0),
], ids=["add0", "0add", "add_int0", "sub-0"])
def test_identities_that_change_signed_zeros_wait_for_fast_math(build):
    """NumPy's ``-0.0 + 0.0`` is ``+0.0``: the rewrite to ``x`` would keep ``-0.0``."""
    x = N.var("x", (4,))
    X = np.array([-0.0, 0.0, -np.inf, np.nan], F32)
    exact = graphc.compile([x], [build(x)], check=True)
    assert {"add", "subtract"} & set(kinds(exact))
    got = exact.run(x=X)[0]
    np.testing.assert_array_equal(np.signbit(got), np.signbit(build(X)))
    assert not np.signbit(got[0])
    fast = graphc.compile([x], [build(x)], fast_math=True, check=True)
    assert set(kinds(fast)) == {"var"}
    assert np.signbit(fast.run(x=X)[0][0])


def test_simplify_keeps_ops_that_change_dtype_or_shape():
    x = N.var("x", (3,), np.int32)
    g = graphc.compile([x], [x + 0.0, x * N.ones((2, 3))], optimise=["simplify"])
    a, b = g.run(x=np.arange(3, dtype=np.int32))
    assert a.dtype == np.float64 and b.shape == (2, 3)


def test_transpose_pairs_compose_into_one():
    x = N.var("x", (2, 3, 4))
    y = N.transpose(N.transpose(x, (1, 2, 0)), (1, 0, 2))
    g, plain = both([x], [y], optimise=["simplify"])
    assert kinds(g)["transpose"] == 1
    X = arr(2, 3, 4)
    np.testing.assert_array_equal(g.run(x=X)[0], plain.run(x=X)[0])


def test_expansions_feeding_a_broadcasting_op_are_dropped():
    x = N.var("x", (4, 5))
    b = N.var("b", (5,))
    c = N.var("c", (4, 1))
    y = (x + N.broadcast_to(b, (4, 5)) + N.tile(c, (1, 5)) * x) * N.repeat(c, 5, axis=1)
    g, plain = both([x, b, c], [y], optimise=["drop_expansions"])
    assert not {"broadcast_to", "tile", "repeat"} & set(kinds(g))
    feeds = dict(x=arr(4, 5), b=arr(5), c=arr(4, 1))
    np.testing.assert_array_equal(g.run(**feeds)[0], plain.run(**feeds)[0])


def test_an_expansion_that_sets_the_shape_is_kept():
    b = N.var("b", (5,))
    c = N.var("c", (4, 1))
    y = N.broadcast_to(b, (4, 5)) * 2.0
    z = N.tile(c, (1, 5)) * N.repeat(c, 5, axis=1)     # one of the two must stay
    g = graphc.compile([b, c], [y, z], optimise=["drop_expansions"])
    assert "broadcast_to" in kinds(g) and {"tile", "repeat"} & set(kinds(g))
    C = arr(4, 1)
    Y, Z = g.run(b=arr(5), c=C)
    assert Y.shape == (4, 5)
    np.testing.assert_array_equal(Z, np.tile(C, (1, 5)) * np.repeat(C, 5, axis=1))


# -- fast math --------------------------------------------------------------------------------
def test_value_changing_rewrites_only_with_fast_math():
    x = N.var("x", (3,))
    ys = [x * 0.0, 0.0 / x, x - x]
    X = np.array([np.inf, np.nan, 1.0], F32)
    exact = graphc.compile([x], ys, check=True)
    with np.errstate(all="ignore"):
        want = [X * F32(0), F32(0) / X, X - X]
        got = exact.run(x=X)
    for g_, w_ in zip(got, want):          # NumPy's answers, NaN included
        np.testing.assert_array_equal(g_, w_)
    assert np.isnan(got[0][0]) and np.isnan(got[2][0])
    fast = graphc.compile([x], ys, fast_math=True, check=True)
    assert not {"multiply", "divide", "subtract"} & set(kinds(fast))
    for got in fast.run(x=X):
        np.testing.assert_array_equal(got, np.zeros(3, F32))


# -- transposes into matmul --------------------------------------------------------------
@pytest.mark.parametrize("build", [lambda a, b: a.T @ b, lambda a, b: a @ b.T,
                                   lambda a, b: a.T @ b.T], ids=["Ta", "Tb", "TaTb"])
def test_transposes_fold_into_matmul(build):
    a, b = N.var("a", (5, 5)), N.var("b", (5, 5))
    g, plain = both([a, b], [build(a, b)], optimise=["matmul_transpose"])
    assert "transpose" not in kinds(g)
    A, B = arr(5, 5), arr(5, 5)
    np.testing.assert_allclose(g.run(a=A, b=B)[0], build(A, B), rtol=1e-6)
    np.testing.assert_allclose(g.run(a=A, b=B)[0], plain.run(a=A, b=B)[0], rtol=1e-6)


def test_batched_transpose_of_last_two_axes_folds():
    a, b = N.var("a", (2, 4, 3)), N.var("b", (2, 4, 5))
    y = N.swapaxes(a, -1, -2) @ b
    g = graphc.compile([a, b], [y], check=True)
    assert "transpose" not in kinds(g)
    A, B = arr(2, 4, 3), arr(2, 4, 5)
    np.testing.assert_allclose(g.run(a=A, b=B)[0], np.swapaxes(A, -1, -2) @ B, rtol=1e-6)


# -- FMA -------------------------------------------------------------------------------------
def test_fma_replaces_a_product_used_once():
    a, b, c = N.var("a", (6,)), N.var("b", (6,)), N.var("c", (6,))
    g, plain = both([a, b, c], [a * b + c], optimise=["fma"])
    assert kinds(g).get("fma") == 1 and "multiply" not in kinds(g)
    feeds = dict(a=arr(6), b=arr(6), c=arr(6))
    np.testing.assert_array_equal(g.run(**feeds)[0], plain.run(**feeds)[0])


def test_fma_leaves_a_shared_product_alone():
    a, b, c = N.var("a", (6,)), N.var("b", (6,)), N.var("c", (6,))
    p = a * b
    g = graphc.compile([a, b, c], [p + c, p * 2.0], optimise=["fma"])
    assert "fma" not in kinds(g)


def test_fma_with_broadcast_addend_and_never_over_the_addend():
    a, b, c = N.var("a", (4, 3)), N.var("b", (4, 3)), N.var("c", (3,))
    y = N.exp(a * b + N.exp(c))       # exp(c) dies at the fma but must not be overwritten
    g, plain = both([a, b, c], [y], optimise=["fma"])
    assert kinds(g).get("fma") == 1
    feeds = dict(a=arr(4, 3), b=arr(4, 3), c=arr(3))
    np.testing.assert_array_equal(g.run(**feeds)[0], plain.run(**feeds)[0])


# -- AdaGrad -------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [1e-8, 1e-6, 0.5])
def test_adagrad_pattern_any_eps(eps):
    v = N.var("v", (10,))
    y = 0.01 / N.sqrt(v + eps)
    g, plain = both([v], [y], optimise=["adagrad"])
    assert set(kinds(g)) == {"var", "fused_adagrad"}
    V = np.abs(arr(10))
    np.testing.assert_allclose(g.run(v=V)[0], plain.run(v=V)[0], rtol=1e-7)


def test_adagrad_keeps_the_division_of_the_graph_as_written():
    """``lr / sqrt(v + eps)`` fused is the same three operations; ``g / sqrt(v + eps)``
    as ``g * (1 / sqrt(v + eps))`` rounds twice, so it is fast_math only."""
    v, grad = N.var("v", (64,)), N.var("g", (64,))
    eps = [F32(1e-7), F32(1e-6), F32(1e-5)]     # three roots: not one shared by CSE
    ys = [grad * (0.01 / N.sqrt(v + eps[0])), grad / N.sqrt(v + eps[1]),
          0.01 * grad / N.sqrt(v + eps[2])]
    g, plain = both([v, grad], ys)
    feeds = dict(v=np.abs(arr(64)), g=arr(64))
    V, G = feeds["v"], feeds["g"]
    want = [G * (F32(0.01) / np.sqrt(V + eps[0])), G / np.sqrt(V + eps[1]),
            F32(0.01) * G / np.sqrt(V + eps[2])]
    for got, slow, numpy in zip(g.run(**feeds), plain.run(**feeds), want):
        np.testing.assert_array_equal(got, slow)
        np.testing.assert_array_equal(got, numpy)
    assert g.stats()["optimiser_changes"].get("adagrad") == 1
    fast = graphc.compile([v, grad], ys, fast_math=True, check=True)
    assert fast.stats()["optimiser_changes"].get("fast_math") == 2
    for got, slow in zip(fast.run(**feeds), plain.run(**feeds)):
        np.testing.assert_allclose(got, slow, rtol=1e-6)


@pytest.mark.parametrize("rule", ["adagrad", "rmsprop"])
@pytest.mark.parametrize("fast_math", [False, True])
def test_the_whole_update_becomes_one_fused_node(rule, fast_math):
    w, grad, v = N.var("w", (32,)), N.var("g", (32,)), N.var("v", (32,))
    if rule == "adagrad":
        v_new = v + grad * grad
    else:
        v_new = 0.9 * v + 0.1 * N.square(grad)
    if fast_math:       # as usually written: a division, fused as a reciprocal
        w_new = w - 0.01 * grad / N.sqrt(v_new + 1e-7)
    else:               # as graphc.neural writes it: the same bits fused or not
        w_new = w - grad * (0.01 / N.sqrt(v_new + 1e-7))
    g, plain = both([w, grad, v], [], {w: w_new, v: v_new}, fast_math=fast_math)
    # the weight update is one node whose program includes Owl's fused AdaGrad step
    w_node = dict((var.name, value) for var, value in g.graph.updates)["w"]
    assert w_node.op.kind == "fused"
    assert "fused_adagrad" in [op.kind for op, _ in w_node.op["program"]]
    compute = [n for n in g.graph.order if n.op.kind not in ("var", "const")]
    assert len(compute) <= 3          # v_new is an update value itself, so it stays apart
    assert g.stats()["nodes"] < plain.stats()["nodes"]
    W, G, V = arr(32), arr(32), np.abs(arr(32))
    for step in (g, plain):
        step.assign(w=W, v=V)
    for _ in range(3):
        G = arr(32)
        g.run(g=G)
        plain.run(g=G)
    if fast_math:
        np.testing.assert_allclose(g.value("w"), plain.value("w"), rtol=1e-6)
    else:
        np.testing.assert_array_equal(g.value("w"), plain.value("w"))
    np.testing.assert_array_equal(g.value("v"), plain.value("v"))


# -- elementwise chains ----------------------------------------------------------------------
def test_an_elementwise_chain_becomes_one_node_in_one_buffer():
    x, y = N.var("x", (1000,)), N.var("y", (1000,))
    out = N.tanh(N.sigmoid(N.exp(x) * y + 1.0) - y)
    g, plain = both([x, y], [out])
    assert {k for k in kinds(g) if k not in ("var", "const")} == {"fused"}
    assert g.stats()["planned_bytes"] == 4000          # the output, nothing else
    assert plain.stats()["naive_bytes"] > 4 * 4000
    feeds = dict(x=arr(1000), y=arr(1000))
    np.testing.assert_array_equal(g.run(**feeds)[0], plain.run(**feeds)[0])


def test_fusion_stops_at_shared_values_shape_changes_and_dtype_changes():
    x = N.var("x", (4, 3))
    shared = N.exp(x)
    small = N.sin(N.var("s", (3,)))
    y = N.tanh(shared + small) + (x > 0).astype(np.float32)
    g, plain = both([x, small.parents[0]], [y, shared])
    feeds = dict(x=arr(4, 3), s=arr(3))
    for a, b in zip(g.run(**feeds), plain.run(**feeds)):
        np.testing.assert_array_equal(a, b)
    assert kinds(g).get("exp") == 1   # shared with an output: not absorbed


def test_a_long_chain_is_split_into_bounded_fused_nodes():
    x = N.var("x", (8,))
    y = x
    for i in range(200):
        y = N.sin(y) * 0.5
    g = graphc.compile([x], y, check=True)
    program_lengths = [len(n.op["program"]) for n in g.graph.order if n.op.kind == "fused"]
    assert sum(program_lengths) == 400 and max(program_lengths) <= 32
    X = arr(8)
    np.testing.assert_array_equal(g.run(x=X), graphc.compile([x], y, optimise=False).run(x=X))


# -- choosing passes, reports, DOT, invariants ------------------------------------------
def test_optimise_false_and_unknown_passes():
    x = N.var("x", (3,))
    g = graphc.compile([x], x * 1.0, optimise=False)
    assert "multiply" in kinds(g) and g.stats()["optimiser_changes"] == {}
    with pytest.raises(ValueError, match="unknown pass.*'nope'"):
        graphc.compile([x], x * 1.0, optimise=["nope"])
    assert PIPELINE[0] == "cse" and "fuse_elementwise" in PIPELINE


def test_stats_and_pass_report_show_before_and_after():
    from graphc.demo import build

    inputs, outputs, updates = build()
    g = graphc.compile(inputs, outputs, updates)
    s = g.stats()
    assert s["nodes"] < s["nodes_unoptimised"] and s["edges"] < s["edges_unoptimised"]
    assert sum(s["optimiser_changes"].values()) > 0
    rows = g.pass_report()
    assert rows[0]["passes"] == "(as written)" and rows[0]["nodes"] == s["nodes_unoptimised"]
    assert rows[-1]["nodes"] == s["nodes"]
    assert rows[-1]["planned_bytes"] == s["planned_bytes"]
    assert all(r["planned_bytes"] >= r["lower_bound_bytes"] for r in rows)


def test_to_dot_shows_the_graph_before_and_after():
    x = N.var("x", (3,))
    g = graphc.compile([x], N.tanh(N.exp(x) + 1.0))
    before, after = g.to_dot(optimised=False), g.to_dot()
    assert "tanh" in before and "exp" in before and "fused" not in before
    assert "fused" in after and "as written" in before and "optimised" in after


def test_invariant_checker_catches_a_wrong_rewrite():
    x = N.var("x", (3,))
    y = N.exp(x)
    wrong = N.exp(N.var("x", (3,)))      # a variable from nowhere
    with pytest.raises(InvariantError, match="new variable"):
        check_invariants([y], [wrong], "bad_pass")
    with pytest.raises(InvariantError, match="changed from"):
        check_invariants([y], [N.sum(x)], "bad_pass")


def test_a_rule_may_not_change_shape_or_dtype():
    x = N.var("x", (3,))
    bad = Pass("bad", [Rule("to_sum", Pat("exp"), lambda b, n: N.sum(n.parents[0]))])
    with pytest.raises(AssertionError, match="to_sum changed"):  # noqa: PT011
        rewrite([N.exp(x)], bad.rewrite_node)


def test_optimise_function_reports_each_pass():
    x = N.var("x", (3,))
    result = optimise([N.exp(x) + N.exp(x) * 1.0], evaluate=E.evaluate, check=True)
    assert result.changes_by_pass()["cse"] >= 1 and result.changes_by_pass()["simplify"] >= 1
    assert all(r.nodes_after <= r.nodes_before for r in result.report)


def test_an_optimised_graph_saves_and_loads_as_written(tmp_path):
    x = N.var("x", (5,))
    g = graphc.compile([x], N.tanh(N.exp(x) * 2.0 + 1.0))
    path = tmp_path / "g.npz"
    g.save(path)
    h = graphc.load(path)
    X = arr(5)
    np.testing.assert_array_equal(g.run(x=X), h.run(x=X))
    assert h.stats()["nodes"] == g.stats()["nodes"]


def _step_kinds(executable):
    return [(n.op.kind, tuple(i.kind for i, _ in n.op["program"]) if n.op.kind == "fused"
             else ()) for n in executable.liveness.steps]


@pytest.mark.parametrize("fast_math", [False, True])
def test_default_pipeline_fuses_adagrad_as_the_checked_one_does(fast_math):
    """The default (one traversal per round) once fused ``v + eps -> sqrt`` before the
    AdaGrad rule saw it; ``check=True`` (then pass by pass) did not: fusion now runs in
    the last stage, and both run the one schedule."""
    w, v, g = (N.var(n, (1000,)) for n in "wvg")
    v2 = v + g * g
    step = 0.01 * g / N.sqrt(v2 + 1e-7) if fast_math else g * (0.01 / N.sqrt(v2 + 1e-7))
    w2 = w - step
    default, checked = (graphc.compile([w, v, g], [w2, v2], check=c, fast_math=fast_math)
                        for c in (False, True))
    assert _step_kinds(default) == _step_kinds(checked)
    assert any("fused_adagrad" in program for _, program in _step_kinds(default))


@given(programs(max_ops=12))
def test_default_and_checked_pipelines_make_the_same_graph(program):
    built = []
    for check in (False, True):
        inputs, outputs, updates = build_graph(program)
        built.append(_step_kinds(graphc.compile(inputs, outputs, updates, check=check)))
    assert built[0] == built[1]


# -- one executor: check=True runs the default schedule; stages; declared kinds ---------------
def _structure(roots):
    """The graph of ``roots`` as comparable data: each node's op, shape, dtype, parents
    (by position in the order) and a constant's bytes."""
    order = topological_order(roots)
    position = {id(n): i for i, n in enumerate(order)}
    return [(repr(n.op), n.shape, str(n.dtype), tuple(position[id(p)] for p in n.parents),
             n.value.tobytes() if n.op.kind == "const" else None) for n in order]


def _report(result):
    return [(r.stage, r.round, r.name, r.changes, r.nodes_before, r.nodes_after,
             r.edges_before, r.edges_after) for r in result.report]


def _assert_same_schedule(roots, **options):
    default = optimise(roots, evaluate=E.evaluate, **options)
    checked = optimise(roots, evaluate=E.evaluate, check=True, **options)
    assert _structure(checked.roots) == _structure(default.roots)
    assert checked.changes_by_pass() == default.changes_by_pass()
    assert _report(checked) == _report(default)
    return default


@pytest.mark.parametrize("fast_math", [False, True])
def test_checked_optimise_runs_the_default_schedule_on_a_conv_training_step(fast_math):
    import graphc.neural as nn

    model = nn.MnistCNN()
    _, loss, updates, _ = nn.training_graph(model, nn.AdaGrad(0.005), (2, 1, 28, 28))
    result = _assert_same_schedule([loss] + [value for _, value in updates.items()],
                                   fast_math=fast_math)
    changed = result.changes_by_pass()
    assert changed["lowering"] > 0 and changed["adagrad"] > 0 and changed["fuse_elementwise"] > 0


@pytest.mark.parametrize("weights", ["var", "const"])
def test_fast_math_makes_only_the_kinds_it_declares(weights):
    """Without lowering (whose kinds are undeclared, so any) in the same rounds, the
    checker holds fast_math to its declaration: the forward-convolution form of an
    input gradient transposes, reshapes (a constant kernel: a view constant) and flips."""
    g = N.var("g", (2, 6, 6, 6))
    rng = np.random.default_rng(3)
    kernels = [rng.standard_normal((6, 4 // groups, 3, 3)).astype(F32) for groups in (1, 2)]
    ws = ([N.var(f"w{i}", k.shape) for i, k in enumerate(kernels)] if weights == "var"
          else [N.const(k) for k in kernels])
    outs = [N.conv2d_backward_input(g, w, (2, 4, 6, 6), padding=1, groups=groups)
            for w, groups in zip(ws, (1, 2))]
    result = optimise(outs, ["cse", "simplify"], fast_math=True, check=True)
    assert result.changes_by_pass()["fast_math"] == 2
    inputs = [g] + (ws if weights == "var" else [])
    feeds = {"g": arr(2, 6, 6, 6), **{f"w{i}": k for i, k in enumerate(kernels)}}
    feeds = {v.name: feeds[v.name] for v in inputs}
    fast = graphc.compile(inputs, outs, optimise=["cse", "simplify"], fast_math=True,
                          check=True)
    for got, want in zip(fast.run(**feeds), graphc.compile(inputs, outs, optimise=False)
                         .run(**feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@given(programs(max_ops=12), st.booleans())
def test_checked_optimise_runs_the_default_schedule_on_random_programs(program, fast_math):
    inputs, outputs, updates = build_graph(program)
    with np.errstate(all="ignore"):
        _assert_same_schedule(list(outputs) + [value for _, value in updates.items()],
                              fast_math=fast_math)


def test_stepwise_is_a_deprecated_alias_of_the_one_schedule():
    x = N.var("x", (8,))
    y = N.tanh(N.exp(x) * 1.0 + N.exp(x))
    default = optimise([y], evaluate=E.evaluate)
    with pytest.warns(DeprecationWarning, match="stepwise"):
        old = optimise([y], evaluate=E.evaluate, stepwise=True)
    assert _structure(old.roots) == _structure(default.roots)
    assert _report(old) == _report(default)


def test_the_report_is_per_round_and_the_stages_run_in_order():
    a, b, c = (N.var(n, (8,)) for n in "abc")
    y = N.tanh(a * b + c)      # fma (rewrite stage), then fused with the tanh (fuse stage)
    result = optimise([y], evaluate=E.evaluate, check=True)
    assert [(r.stage, r.round, r.name, r.changes) for r in result.report] == [
        ("rewrite", 1, "fma", 1), ("fuse", 1, "fuse_elementwise", 1)]
    assert [[r.name for r in group] for group in result.rounds()] == [["fma"],
                                                                    ["fuse_elementwise"]]
    out = result.roots[0]
    assert out.op.kind == "fused" and [i.kind for i, _ in out.op["program"]] == ["fma", "tanh"]
    g = graphc.compile([a, b, c], y, check=True)
    feeds = {"a": arr(8), "b": arr(8), "c": arr(8)}
    np.testing.assert_array_equal(g.run(**feeds),
                                  graphc.compile([a, b, c], y, optimise=False).run(**feeds))


def _exp_to_tanh(produces):
    return Pass("exp_to_tanh", [Rule("exp_to_tanh", Pat("exp", (Pat(name="x"),)),
                                     lambda b, n: N.tanh(b["x"]))], produces=produces)


def _tanh_to_sin(stage):
    return Pass("tanh_to_sin", [Rule("tanh_to_sin", Pat("tanh", (Pat(name="x"),)),
                                     lambda b, n: N.sin(b["x"]))], stage=stage,
                produces=frozenset({"sin"}))


@pytest.mark.parametrize("check", [False, True])
def test_a_later_stage_sees_the_kinds_an_earlier_stage_made(check):
    x = N.var("x", (4,))
    # listed first, but its stage runs second: it sees the tanh the first stage made
    result = run_stages([N.exp(x)], [_tanh_to_sin("fuse"), _exp_to_tanh(frozenset({"tanh"}))],
                        check=check)
    assert result.roots[0].op.kind == "sin" and result.roots[0].parents[0] is x
    assert [(r.stage, r.name) for r in result.report] == [("rewrite", "exp_to_tanh"),
                                                         ("fuse", "tanh_to_sin")]


def test_a_pass_sees_in_the_same_round_the_kinds_another_pass_declares():
    """tanh_to_sin matches no kind present, but exp_to_tanh declares that it makes
    tanh: both take part in the first round, as in a schedule that skips nothing."""
    x = N.var("x", (4,))
    result = run_stages([N.exp(x)], [_tanh_to_sin("rewrite"), _exp_to_tanh(frozenset({"tanh"}))],
                        check=True)
    assert result.roots[0].op.kind == "sin"
    assert [(r.round, r.name) for r in result.report] == [(1, "tanh_to_sin"), (1, "exp_to_tanh")]
    # the declaration is what the executor goes by: made but undeclared, tanh is seen
    # only in the next round (check=True refuses that declaration, see below)
    result = run_stages([N.exp(x)], [_tanh_to_sin("rewrite"), _exp_to_tanh(frozenset())])
    assert result.roots[0].op.kind == "sin"
    assert [(r.round, r.name) for r in result.report] == [(1, "exp_to_tanh"), (2, "tanh_to_sin")]


def test_check_refuses_a_kind_that_no_pass_declares():
    x = N.var("x", (4,))
    with pytest.raises(InvariantError, match=r"rewrite round 1 \(exp_to_tanh 1\): made "
                                             r"\['tanh'\]"):
        run_stages([N.exp(x)], [_exp_to_tanh(frozenset())], check=True)
    # undeclared (None) means "any kind": nothing to refuse
    assert run_stages([N.exp(x)], [_exp_to_tanh(None)], check=True).roots[0].op.kind == "tanh"


def test_check_names_the_node_function_that_changed_a_shape():
    x = N.var("x", (4,))
    bad = Pass("to_sum", function=lambda n, ctx: N.sum(n.parents[0]) if n.op.kind == "exp"
               else None)
    with pytest.raises(InvariantError, match="to_sum: replaced"):
        run_stages([N.exp(x)], [bad], check=True)


def test_a_pass_declares_a_known_stage_and_real_kinds():
    with pytest.raises(ValueError, match="stage 'late' is not one of"):
        Pass("p", stage="late")
    with pytest.raises(ValueError, match="rule 'r' matches 'exp'.*leaves out"):
        Pass("p", [Rule("r", Pat("exp"), lambda b, n: None)], matches=frozenset({"tanh"}))
    for p in STATIC_PASSES.values():
        assert p.stage in STAGES
        assert p.produces is None or p.produces <= KINDS.keys(), p.name
        assert p.matches is None or callable(p.matches) or p.matches <= KINDS.keys(), p.name
    # the pipeline lists the passes stage by stage
    stages = [STAGES.index(STATIC_PASSES[n].stage) for n in PIPELINE if n in STATIC_PASSES]
    assert stages == sorted(stages)
    assert STATIC_PASSES["fuse_elementwise"].stage == "fuse" == STAGES[-2]


def test_a_pass_applies_only_to_the_kinds_it_matches():
    fuse, fma, cse = (STATIC_PASSES[n] for n in ("fuse_elementwise", "fma", "cse"))
    assert fuse.applies_to({"exp", "var"}) and not fuse.applies_to({"matmul", "var"})
    assert fma.applies_to({"add"}) and not fma.applies_to({"multiply"})
    assert cse.applies_to({"var"})      # merging applies to any kind


@pytest.mark.cpu_engine   # the CPU's pass schedule (the device adds fuse_reduce)
def test_pass_report_rows_are_the_rounds_of_the_schedule_that_ran():
    import graphc.neural as nn

    inputs, loss, updates, _ = nn.training_graph(nn.MnistCNN(), nn.AdaGrad(0.005),
                                                 (2, 1, 28, 28))
    g = graphc.compile(inputs, loss, updates, check=True)
    rows, s = g.pass_report(), g.stats()
    assert sum(r["changes"] for r in rows) == sum(s["optimiser_changes"].values())
    assert rows[-1]["nodes"] == s["nodes"] and rows[-1]["planned_bytes"] == s["planned_bytes"]
    for row in rows[1:]:
        assert row["changes"] > 0 and set(row["passes"].split("+")) <= set(PIPELINE)
    assert rows[-1]["passes"] == "fuse_elementwise"


# -- a zero pad folded into the convolution after it ----------------------------------------------
@settings(max_examples=30, deadline=None)
@given(widths=st.lists(st.tuples(st.integers(-1, 2), st.integers(0, 2)), min_size=4,
                       max_size=4),
       value=st.sampled_from([0, 0.0, 0.5]), groups=st.sampled_from([1, 4]),
       stride=st.integers(1, 2), padding=st.integers(0, 1), seed=st.integers(0, 2**16))
@example(widths=[(0, 0), (0, 0), (0, 1), (1, 1)], value=0, groups=4, stride=2, padding=0,
         seed=0)
@example(widths=[(0, 0), (0, 0), (0, 1), (1, 1)], value=0.5, groups=1, stride=1, padding=1,
         seed=1)
@example(widths=[(0, 0), (0, 0), (-1, 1), (1, 1)], value=0, groups=1, stride=1, padding=0,
         seed=2)
def test_zero_pad_of_the_image_folds_into_the_convolution(widths, value, groups, stride,
                                                          padding, seed):
    """conv2d(pad(x)) keeps its bits when the pad becomes the convolution's padding, and
    only zeros on the image axes fold (a pad of the batch or channels, a value, a crop
    stay)."""
    rng = np.random.default_rng(seed)
    # small integers: the GEMM's sums are exact in any order, so bits do not depend on BLAS
    x = rng.integers(-3, 4, (1, 4, 6, 5)).astype(np.float32)
    w = rng.integers(-3, 4, (4, 4 // groups, 3, 2)).astype(np.float32)
    if widths[1][0] or widths[1][1]:         # channels padded: the kernel must match
        w = rng.integers(-3, 4, (4, 4 + sum(widths[1]), 3, 2)).astype(np.float32)
        groups = 1
    widths = tuple(widths)
    try:
        E.conv2d(E.pad(x, widths, constant_values=value), w, stride=stride,
                 padding=padding, groups=groups)
    except (ShapeError, ValueError):
        assume(False)
    xv, wv = N.var("x", x.shape), N.var("w", w.shape)
    y = N.conv2d(N.pad(xv, widths, constant_values=value), wv, stride=stride,
                 padding=padding, groups=groups)
    folded = graphc.compile([xv, wv], [y], kernels="numpy", check=True)
    plain = graphc.compile([xv, wv], [y], kernels="numpy", optimise=False)
    foldable = value == 0 and not any(widths[0] + widths[1]) and min(map(min, widths)) >= 0
    assert ("pad" not in [n.op.kind for n in folded.graph.order]) == foldable
    np.testing.assert_array_equal(folded.run(x=x, w=w)[0], plain.run(x=x, w=w)[0])

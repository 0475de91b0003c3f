"""Kernel workspaces (a strided image's phases, a max-pooling gradient's masks): one
arena per scratch slot, the size of the largest kernel's need, shared by every
kernel of that slot; results are those of kernels with arrays of their own."""
import numpy as np
import pytest

import graphc
import graphc.ndarray as N
from graphc.engine.cpu import RunContext
from graphc.engine.cpu_kernels import build_kernel

pytestmark = pytest.mark.cpu_engine   # the CPU kernels' workspace arenas


def _training_like_graph():
    """Two max-pooling gradients of different sizes and a strided 3x3 convolution's
    im2col (phases), all with workspaces."""
    x = N.var("x", (2, 3, 32, 32))
    w = N.var("w", (4, 3, 3, 3))
    h = N.conv2d(x, w, stride=2, padding=1)                   # 2x4x16x16
    p1 = N.max_pool2d(N.relu(h), 2)                           # 2x4x8x8
    p2 = N.max_pool2d(N.relu(N.conv2d(x, w, padding=1)), 2)   # 2x4x16x16
    loss = N.sum(p1 * p1) + N.sum(p2 * p2)
    gw, gx = N.grad(loss, [w, x])
    return [x, w], [loss, gw, gx]


def _feeds():
    rng = np.random.default_rng(3)
    return {"x": rng.standard_normal((2, 3, 32, 32)).astype(np.float32),
            "w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32)}


def test_the_arena_is_the_largest_need_not_the_sum():
    inputs, outputs = _training_like_graph()
    g = graphc.compile(inputs, outputs, kernels="numpy")
    ctx = g.program.ctx
    assert ctx.workspace_bytes == max(ctx._arena_need) > 0
    # what the kernels asked for, each alone, adds up to more than one arena
    sizes = []
    for n, k in zip(g.liveness.steps, g.program.kernels):
        if k is None:
            continue
        probe = RunContext()
        probe.use_workspaces()
        probe.begin_kernel()
        build_kernel(n.op, [g.program.values[id(p)] for p in n.parents],
                     g.program.values[id(n)], probe)
        sizes.append(probe._arena_need[0])
    assert sum(sizes) > ctx.workspace_bytes == max(sizes)


@pytest.mark.parametrize("schedule", ["serial", "parallel", "parallel_reuse"])
@pytest.mark.parametrize("kernels", ["numpy", "generated"])
def test_results_are_those_of_kernels_with_their_own_arrays(schedule, kernels):
    inputs, outputs = _training_like_graph()
    feeds = _feeds()
    reference = graphc.compile(inputs, outputs, kernels="numpy", optimise=False)
    want = reference.run(**feeds)
    g = graphc.compile(inputs, outputs, kernels=kernels, schedule=schedule, workers=2)
    for _ in range(2):       # the arena is reused run after run
        got = g.run(**feeds)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-4)


def test_a_context_without_arenas_hands_out_arrays_of_their_own():
    ctx = RunContext()
    a, b = ctx.workspace((3, 4), np.float32), ctx.workspace((3, 4), np.float32)
    assert a.shape == (3, 4) and not np.shares_memory(a, b)
    assert ctx.workspace_bytes == 0


@pytest.mark.parametrize("layout", ["batch", "flat"])
def test_a_batch_s_phases_are_split_a_block_of_images_at_a_time(layout, monkeypatch):
    """With room for one image's phases the batch is split image by image into one
    buffer: the columns are those of a whole-batch split, in a workspace of one
    image's phases."""
    from graphc.engine import neural_kernels
    from graphc.type import Op
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 2, 9, 11))
    op = Op.make("im2col", kernel=(3, 3), stride=(2, 2), padding=((1, 1), (1, 0)),
                 dilation=(1, 1), layout=layout)
    out_hw = (5, 5)
    shape = (3, 18, 25) if layout == "batch" else (18, 75)

    def columns():
        ctx = RunContext()
        ctx.use_workspaces()
        ctx.begin_kernel()
        cols = np.full(shape, np.nan)
        for step in neural_kernels.im2col_steps(x, cols, (3, 3), op, out_hw, layout, ctx):
            step()
        return cols, ctx._arena_need[0]

    whole, whole_bytes = columns()
    monkeypatch.setattr(neural_kernels, "PHASE_BYTES", 1)
    blocks, block_bytes = columns()
    np.testing.assert_array_equal(blocks, whole)
    assert not np.isnan(whole).any()
    assert block_bytes < whole_bytes / 2            # one image's phases, not three
    # and the columns are the windows: tap (1, 1) of image 2, channel 1 is x[2, 1, ::2, 1::2]
    taps = whole.reshape(3, 2, 3, 3, 5, 5) if layout == "batch" else \
        whole.reshape(2, 3, 3, 3, 5, 5).transpose(3, 0, 1, 2, 4, 5)
    np.testing.assert_array_equal(taps[2, 1, 1, 1], x[2, 1, ::2, 0::2][:5, :5])

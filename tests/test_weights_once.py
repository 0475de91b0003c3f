"""A compiled model holds its weights once, whichever entry point built it, and
lets the caller's arrays go: an exact account of the NumPy memory reachable from
the compiled object (every array found by walking ``gc.get_referents``, bytes
counted once per address range), against the folded weights, the memory plan and
the input variables.

What else may be reachable is stated: the stride-phase scratch of strided im2col
(outside the plan, at most a copy of a strided convolution's input) and kernel
tables; the tests bound it well below the weights, and separately check that no
reachable array outside the weights' memory holds a copy of a weight.

The Numba section checks that loading cached generated kernels does not start
Numba's compiler (its "refresh" costs ~30 MiB of RSS in a fresh process).
"""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest

import graphc.neural as nn
from graphc.engine import onednn_conv
from graphc.optimiser.fold import relaid
from graphc.symbol.node import Deferred

pytestmark = pytest.mark.cpu_engine   # the CPU program holds a model's weights once

try:
    from numpy.lib.array_utils import byte_bounds
except ImportError:                       # NumPy 1.x
    byte_bounds = np.byte_bounds

SHAPE = (1, 3, 16, 16)
KERNELS = ["numpy", "generated"]


def tiny_resnet():
    """A ResNet with batch norms, strided convolutions and a dense head, whose
    weights outweigh its activations (so a second copy could not hide)."""
    return nn.ResNet((1, 1), classes=10, image_size=SHAPE[2], width=16)


def reachable_arrays(root) -> list:
    """Every NumPy array reachable from ``root`` through ``gc.get_referents``,
    not through modules (a function's globals reach every module's state)."""
    modules = {id(m.__dict__) for m in list(sys.modules.values())
               if getattr(m, "__dict__", None) is not None}
    seen, stack, arrays = set(modules), [root], []
    proxies = (weakref.ProxyType, weakref.CallableProxyType)
    while stack:
        obj = stack.pop()
        # a weak proxy holds nothing alive, and touching a dead one raises (Numba's
        # typing caches keep proxies to dispatchers that other tests made and dropped)
        if id(obj) in seen or type(obj) in proxies or isinstance(obj, type):
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            arrays.append(obj)
        stack.extend(gc.get_referents(obj))
    return arrays


def distinct_bytes(arrays) -> int:
    """The bytes the arrays span, each address counted once."""
    total, current = 0, None
    for lo, hi in sorted(byte_bounds(a) for a in arrays if a.size):
        if current is None or lo > current[1]:
            total += 0 if current is None else current[1] - current[0]
            current = [lo, hi]
        else:
            current[1] = max(current[1], hi)
    return total + (0 if current is None else current[1] - current[0])


def within(array, owners) -> bool:
    lo, hi = byte_bounds(array)
    return any(lo >= a and hi <= b for a, b in owners)


def deferred_bytes(executable) -> int:
    """Bytes of the source graph's constants held as functions of their packed layouts
    (graphc.held_once): the compiled graph holds those weights packed, once."""
    return sum(n.nbytes for n in executable.source.order
               if n.op.kind == "const" and type(n._value) is Deferred)


def packed_arrays(executable) -> list:
    """The compiled graph's constants that lay out a source constant anew."""
    return [n.value for n in executable.graph.order
            if n.op.kind == "const" and relaid(n) is not None]


def account(root, weights, stats, executable=None) -> dict:
    """The reachable bytes split into the weights' memory and the rest, with the
    checks every entry point must pass."""
    executable = root if executable is None else executable
    arrays = reachable_arrays(root)
    spans = [byte_bounds(w) for w in weights]
    held = [a for a in arrays if a.size and within(a, spans)]
    rest = [a for a in arrays if a.size and not within(a, spans)]
    # no copy: an array outside the weights' memory never holds a weight's bits
    by_key = {(w.shape, w.dtype.str, w.tobytes()) for w in weights
              if w.nbytes >= 64 and np.any(w)}
    copies = [a.shape for a in rest if (a.shape, a.dtype.str, a.tobytes()) in by_key]
    assert copies == [], f"copies of weights of shapes {copies} are held"
    return {"weights": distinct_bytes(held), "rest": distinct_bytes(rest),
            "total": distinct_bytes(arrays), "planned": stats["planned_bytes"],
            "inputs": stats["input_bytes"], "const": stats["const_bytes"],
            "scratch": stats["scratch_bytes"], "deferred": deferred_bytes(executable),
            "packed": distinct_bytes(packed_arrays(executable))}


def assert_held_once(numbers, weight_bytes):
    # the weights' memory is held whole and once: as it is, or (convolution kernels
    # on oneDNN) only packed in the layout its primitive reads, the source graph
    # holding the original as a function of the packed array; the optimised graph's
    # constants are most of it (equal zero biases merged into one, batch-norm vectors
    # folded into per-channel constants; the unoptimised graph, kept for reports and
    # checks, still holds each of the others, without a copy)
    assert numbers["weights"] + numbers["deferred"] == weight_bytes
    padding = numbers["packed"] - numbers["deferred"]       # the blocked layouts' own
    assert 0 <= padding <= numbers["deferred"] // 4 + 4096
    assert weight_bytes * 9 // 10 < numbers["const"] <= weight_bytes + padding
    # beyond the plan, the inputs and the kernels' scratch (a strided max pool's rows)
    extras = (numbers["rest"] - numbers["planned"] - numbers["inputs"] - numbers["scratch"]
              - numbers["packed"])
    assert 0 <= extras < numbers["const"] // 4, numbers
    assert numbers["total"] == numbers["weights"] + numbers["rest"]


def constants(executable) -> list:
    """The arrays of the constant nodes of the graph as built (before optimising), but
    those held as functions of packed layouts (:func:`deferred_bytes`)."""
    return [n.value for n in executable.source.order
            if n.op.kind == "const" and type(n._value) is not Deferred]


def _kernels_or_skip(kernels):
    if kernels == "generated":
        from graphc.engine.numba_kernels import available
        if available() is not None:
            pytest.skip(available())
    return kernels


@pytest.mark.parametrize("kernels", KERNELS)
def test_compile_inference_holds_the_folded_weights_once(kernels):
    model = tiny_resnet()
    folded = nn.fold_batchnorm(model, model.init(0))
    exe = nn.compile_inference(model, folded, SHAPE, plan="offsets",
                               kernels=_kernels_or_skip(kernels))
    numbers = account(exe, list(folded.values()), exe.stats())
    assert_held_once(numbers, sum(w.nbytes for w in folded.values()))
    if kernels == "generated" and onednn_conv.wanted() == "":
        assert numbers["deferred"] > numbers["weights"]      # most kernels packed


@pytest.mark.parametrize("fold", [True, False])
def test_compile_inference_lets_the_callers_params_go(fold):
    model = tiny_resnet()
    params = model.init(0)
    x = np.random.default_rng(1).random(SHAPE, dtype=np.float32)
    want = nn.compile_inference(model, params, SHAPE, fold=fold, kernels="numpy").run(x=x)
    watch = [weakref.ref(a) for a in params.values()]
    exe = nn.compile_inference(model, params, SHAPE, fold=fold, kernels="numpy")
    del params
    gc.collect()
    assert [r for r in watch if r() is not None] == []
    np.testing.assert_array_equal(exe.run(x=x), want)
    consts = constants(exe)
    numbers = account(exe, consts, exe.stats())
    assert_held_once(numbers, distinct_bytes(consts) + numbers["deferred"])


def test_fold_batchnorm_gives_the_bits_of_the_float64_product():
    model = tiny_resnet()
    params = model.init(0)
    rng = np.random.default_rng(2)
    for layer in model.conv_bn_layers():    # statistics away from their initial values
        for k in ("weight", "bias", "running_mean", "running_var"):
            name = f"{layer.bn.name}.{k}"
            params[name] = (rng.random(params[name].shape) + 0.5).astype(np.float32)
    folded = nn.fold_batchnorm(model, params)
    for layer in model.conv_bn_layers():
        conv, bn = layer.conv.name, layer.bn.name
        gamma, var = (params[f"{bn}.{k}"].astype(np.float64) for k in ("weight", "running_var"))
        scale = gamma / np.sqrt(var + layer.bn.eps)
        want = (params[f"{conv}.weight"] * scale[:, None, None, None]).astype(np.float32)
        got = folded[f"{conv}.weight"]
        assert got.dtype == np.float32 and not got.flags.writeable and got.flags.owndata
        assert got.tobytes() == want.tobytes()
        assert not np.shares_memory(got, params[f"{conv}.weight"])


def test_model_compile_lets_the_callers_params_go():
    model = tiny_resnet()
    params = model.init(0)
    x = np.random.default_rng(3).random(SHAPE, dtype=np.float32)
    want = nn.compile_inference(model, params, SHAPE, fold=False, kernels="numpy").run(x=x)
    watch = [weakref.ref(a) for a in params.values()]
    model.compile([x], is_train=False, use_graph=True, params=params, kernels="numpy")
    del params
    gc.collect()
    assert [r for r in watch if r() is not None] == []
    np.testing.assert_allclose(model(x), want, rtol=1e-6, atol=1e-6)


# -- ONNX ------------------------------------------------------------------------------------
def _exported(tmp_path, symbolic=False):
    onnx = pytest.importorskip("onnx")
    import graphc.onnx

    model = tiny_resnet()
    params = model.init(0)
    exe = nn.compile_inference(model, params, SHAPE, fold=False, kernels="numpy")
    path = tmp_path / "tiny.onnx"
    graphc.onnx.save(exe, str(path))
    if symbolic:
        proto = onnx.load(str(path))
        proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
        proto.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "N"
        onnx.save(proto, str(path))
    return path, model, params


def test_onnx_static_model_holds_its_weights_once(tmp_path):
    import graphc.onnx

    path, model, params = _exported(tmp_path)
    x = np.random.default_rng(4).random(SHAPE, dtype=np.float32)
    want = nn.compile_inference(model, params, SHAPE, kernels="numpy").run(x=x)
    graph = graphc.onnx.load(str(path))
    assert graph.model is None          # the protobuf's weights are not kept beside the graph
    for _ in range(2):
        np.testing.assert_allclose(graph.run(x=x)[0], want, rtol=1e-4, atol=1e-5)
    consts = constants(graph.executable)
    numbers = account(graph, consts, graph.stats(), graph.executable)
    assert_held_once(numbers, distinct_bytes(consts) + numbers["deferred"])
    folded = nn.fold_batchnorm(model, params)
    padding = numbers["packed"] - numbers["deferred"]
    assert abs(numbers["const"] - padding - sum(w.nbytes for w in folded.values())) < 4096


def test_onnx_symbolic_model_keeps_the_proto_to_compile_new_shapes(tmp_path):
    import graphc.onnx

    path, model, params = _exported(tmp_path, symbolic=True)
    graph = graphc.onnx.load(str(path))
    assert graph.model is not None      # each new batch size compiles from it
    x = np.random.default_rng(5).random((2,) + SHAPE[1:], dtype=np.float32)
    want = nn.compile_inference(model, params, x.shape, kernels="numpy").run(x=x)
    np.testing.assert_allclose(graph.run(x=x)[0], want, rtol=1e-4, atol=1e-5)


# -- the JIT's fixed memory -----------------------------------------------------------------
_NO_REFRESH = textwrap.dedent("""
    import numpy as np, graphc, graphc.ndarray as N
    from graphc.engine import numba_kernels
    assert numba_kernels.initialise() is None
    from numba.core import base
    refreshes = []
    original = base.BaseContext.refresh
    base.BaseContext.refresh = lambda self: (refreshes.append(1), original(self))[1]
    n = 1 << 17
    x, y = N.var("x", (n,), np.float32), N.var("y", (n,), np.float32)
    out = [N.maximum(x * 2.0 + y, 0.5) * y]
    v = np.linspace(-1, 1, n, dtype=np.float32)
    got = graphc.compile([x, y], out, kernels="generated").run(x=v, y=v[::-1].copy())[0]
    want = graphc.compile([x, y], out, kernels="numpy").run(x=v, y=v[::-1].copy())[0]
    assert got.tobytes() == want.tobytes()
    assert len(numba_kernels._modules) == 1
    print(len(refreshes))
""")


def test_cached_generated_kernels_load_without_starting_numbas_compiler(tmp_path):
    """The first process compiles the kernel (and refreshes Numba's compiler); the
    second loads it from the disk cache with the compiler left alone."""
    _kernels_or_skip("generated")
    env = dict(os.environ, GRAPHC_CACHE_DIR=str(tmp_path))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    runs = [subprocess.run([sys.executable, "-c", _NO_REFRESH], env=env, cwd=root,
                           capture_output=True, text=True, timeout=600) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr[-2000:]
    cold, warm = (int(run.stdout.split()[-1]) for run in runs)
    assert cold > 0 and warm == 0

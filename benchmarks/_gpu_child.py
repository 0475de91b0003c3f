"""One engine's measurements for benchmarks/gpu.py, in a fresh process.

``python3 benchmarks/_gpu_child.py ENGINE REPEATS SEED CASE [CASE ...]``, ENGINE
``graphc`` or ``torch``; prints one JSON line per case and variant:

- ``graphc``: ``device="cuda"``, planned as the CPU benchmark plans
  (``_cases.PLAN``, training with ``_cases.TRAIN_OPTIONS``), variants ``launches``
  (one launch per step), ``cuda_graph`` (``compile(capture=True)``) and
  ``cuda_graph_tf32`` (with ``tf32=True``);
- ``torch``: the same architecture and weights (``_torch_models``) on the GPU,
  variants ``eager`` and ``cuda_graph`` (``torch.cuda.CUDAGraph`` around the whole
  inference, or the whole training step: forward, backward, optimiser), in strict
  fp32 (cuDNN's TF32 off), and ``eager_tf32`` (PyTorch's defaults: TF32 convolutions).

Both are fed a batch already in device memory and bring the step's result (logits
or loss) back to the host, as a user reading it does. Timing: two warm-up steps,
then REPEATS steps, each synchronised. Memory: the bytes the engine's allocator
holds at the end, above what it held with the batch on the device (CuPy's pool: the
planned buffers, variables, constants and any library temporaries; PyTorch's caching
allocator's peak reserved bytes, the model's weights moved after the baseline), plus
PyTorch's peak allocated bytes.
"""
from __future__ import annotations

import gc
import json
import os
import sys
import time
import traceback
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from _cases import GPU_CASES  # noqa: E402


def timed(step, repeats, sync):
    for _ in range(2):
        step()
    sync()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t)
    return times


def graphc_case(name, repeats, seed):
    import cupy as cp

    import graphc
    import graphc.neural as nn
    from _cases import PLAN, TRAIN_OPTIONS

    case = GPU_CASES[name]
    pool = cp.get_default_memory_pool()
    sync = cp.cuda.Device().synchronize
    results = []
    for variant, capture, tf32 in (("launches", False, False), ("cuda_graph", True, False),
                                   ("cuda_graph_tf32", True, True)):
        work = case.prepare(seed)
        x = cp.asarray(work["x"])
        gc.collect()
        pool.free_all_blocks()
        base = pool.total_bytes()
        started = time.perf_counter()
        if case.train:
            inputs, loss, updates, state = nn.training_graph(work["model"],
                                                             case.make_optimiser(),
                                                             work["shape"])
            exe = graphc.compile(inputs, loss, updates, seed=0, plan=PLAN, device="cuda",
                                 capture=capture, tf32=tf32, **TRAIN_OPTIONS)
            exe.assign(**work.pop("params"))
            exe.assign(**{var.name: value for var, value in state.items()})
            labels = cp.asarray(work["labels"])
            step = lambda: exe.run(x=x, labels=labels)    # noqa: E731
        else:
            exe = nn.compile_inference(work["model"], work.pop("params"), work["shape"],
                                       plan=PLAN, device="cuda", capture=capture, tf32=tf32)
            step = lambda: exe.run(x=x)                     # noqa: E731
        build = time.perf_counter() - started
        with warnings.catch_warnings(record=True) as caught:   # a capture that fell back
            warnings.simplefilter("always")
            times = timed(step, repeats, sync)
        stats = exe.stats()
        results.append({"case": name, "engine": "graphc", "variant": variant,
                        "times": times, "median": float(np.median(times)),
                        "build_seconds": build, "device_bytes": pool.total_bytes() - base,
                        "planned_bytes": stats["planned_bytes"],
                        "lower_bound_bytes": stats["lower_bound_bytes"],
                        "steps": stats["steps"], "generated_steps": stats["generated_steps"],
                        "captured_graphs": stats.get("captured_graphs", 0),
                        "capture_held_bytes": stats.get("capture_held_bytes", 0),
                        "warnings": [str(w.message)[:2000] for w in caught]})
        del exe, step, work, x
    return results


def torch_case(name, repeats, seed):
    import torch
    from torch.nn import functional as F

    import _torch_models
    from _torch_child import TORCH_OPTIMISERS

    case = GPU_CASES[name]
    sync = torch.cuda.synchronize
    results = []
    for variant in ("eager", "cuda_graph", "eager_tf32"):
        # fp32 as the issue asks: PyTorch's default lets cuDNN's convolutions use TF32,
        # which only the _tf32 variant keeps (against graphc's tf32=True)
        tf32 = variant.endswith("tf32")
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = tf32
        work = case.prepare(seed)
        model = _torch_models.MODELS[case.model]()
        _torch_models.load_graphc_params(model, work.pop("params") if case.train
                                         else work["model"].init(seed))
        x = torch.from_numpy(work["x"]).cuda()
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base_reserved, base_allocated = (torch.cuda.memory_reserved(),
                                         torch.cuda.memory_allocated())
        started = time.perf_counter()
        # the weights count for both engines: graphc uploads its constants and
        # variables while compiling, after its baseline
        model = model.cuda()
        if not case.train:
            model.eval()
            if variant != "cuda_graph":
                def step():
                    with torch.inference_mode():
                        return model(x).cpu()
            else:
                static_x = x.clone()
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.no_grad(), torch.cuda.stream(side):
                    for _ in range(3):
                        model(static_x)
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.no_grad(), torch.cuda.graph(graph):
                    static_out = model(static_x)

                def step():
                    static_x.copy_(x)
                    graph.replay()
                    return static_out.cpu()
        else:
            model.train()
            labels = torch.from_numpy(work["labels"]).cuda()
            optimiser = TORCH_OPTIMISERS[case.optimiser](model.parameters())

            def one():
                optimiser.zero_grad(set_to_none=True)
                loss = F.cross_entropy(model(x), labels)
                loss.backward()
                optimiser.step()
                return loss
            if variant != "cuda_graph":
                step = lambda: one().detach().cpu()        # noqa: E731
            else:
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(3):
                        one()
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                optimiser.zero_grad(set_to_none=True)
                with torch.cuda.graph(graph):
                    static_loss = F.cross_entropy(model(x), labels)
                    static_loss.backward()
                    optimiser.step()

                def step():
                    graph.replay()
                    return static_loss.detach().cpu()
        build = time.perf_counter() - started
        times = timed(step, repeats, sync)
        results.append({"case": name, "engine": "torch", "variant": variant,
                        "times": times, "median": float(np.median(times)),
                        "build_seconds": build, "torch": torch.__version__,
                        "device_bytes": torch.cuda.max_memory_reserved() - base_reserved,
                        "allocated_bytes": torch.cuda.max_memory_allocated() - base_allocated})
        del model, step, work, x
        gc.collect()
    return results


def main():
    engine, repeats, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    run = {"graphc": graphc_case, "torch": torch_case}[engine]
    for name in sys.argv[4:]:
        try:
            for row in run(name, repeats, seed):
                print(json.dumps(row), flush=True)
        except Exception as error:   # one case failing must not lose the others
            print(json.dumps({"case": name, "engine": engine, "error": f"{type(error).__name__}: "
                              f"{error}", "trace": traceback.format_exc()[-3000:]}), flush=True)


if __name__ == "__main__":
    main()

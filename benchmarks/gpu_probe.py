"""What the GPU machine's CuPy offers the device engine, printed as JSON lines:
versions and the card, the generator's ``out=`` draws, a stream capture of an
elementwise kernel and a matrix product replayed, the TF32 switch, and the
peak-bandwidth and matrix-rate ceilings the benchmark's numbers are read against.

Run: ``python3 benchmarks/gpu_probe.py`` (needs CuPy and a GPU).
"""
from __future__ import annotations

import copy
import json
import time
import traceback

import numpy as np


def report(name, fn):
    try:
        value = fn()
        print(json.dumps({"probe": name, "ok": True, "value": value}, default=str), flush=True)
    except Exception as error:
        print(json.dumps({"probe": name, "ok": False, "error": f"{type(error).__name__}: "
                          f"{error}", "trace": traceback.format_exc()[-1500:]}), flush=True)


def main():
    import cupy as cp

    def versions():
        import numba
        props = cp.cuda.runtime.getDeviceProperties(0)
        return {"cupy": cp.__version__, "numpy": np.__version__, "numba": numba.__version__,
                "runtime": cp.cuda.runtime.runtimeGetVersion(),
                "driver": cp.cuda.runtime.driverGetVersion(),
                "name": props["name"].decode(), "sms": props["multiProcessorCount"],
                "memory_gib": props["totalGlobalMem"] / 2**30}
    report("versions", versions)

    def rng_out():
        g = cp.random.default_rng(0)
        a = cp.empty(5, cp.float32)
        g.random(dtype=cp.float32, out=a)
        b = cp.empty(5, cp.float32)
        g.standard_normal(dtype=cp.float32, out=b)
        saved = copy.deepcopy(g)
        first = cp.asnumpy(g.random(3))
        again = cp.asnumpy(saved.random(3))
        return {"random": cp.asnumpy(a).tolist(), "normal": cp.asnumpy(b).tolist(),
                "deepcopy_replays": bool((first == again).all()), "type": type(g).__name__,
                "methods": sorted(m for m in dir(g) if not m.startswith("_"))}
    report("rng_out", rng_out)

    def capture():
        k = cp.ElementwiseKernel("float32 x", "float32 y", "y = x * 2.0f + 1.0f", "probe_k")
        a = cp.asarray(np.random.default_rng(0).standard_normal((256, 256), np.float32))
        b, c = cp.empty_like(a), cp.empty_like(a)
        k(a, b)
        cp.matmul(b, a, out=c)             # warm: compile, cuBLAS handle
        s = cp.cuda.Stream()
        mode = getattr(cp.cuda.runtime, "streamCaptureModeRelaxed", None)
        with s:
            s.begin_capture(mode) if mode is not None else s.begin_capture()
            k(a, b)
            np.matmul(b, a, out=c)
            g = s.end_capture()
        a[...] = cp.asarray(np.random.default_rng(1).standard_normal((256, 256), np.float32))
        g.launch(s)
        s.synchronize()
        want = (cp.asnumpy(a) * 2 + 1) @ cp.asnumpy(a)
        got = cp.asnumpy(c)
        return {"relaxed_mode": mode is not None,
                "rel_error": float(np.linalg.norm(got - want) / np.linalg.norm(want))}
    report("capture", capture)

    def tf32():
        linalg = cp._core._routines_linalg
        names = [n for n in dir(linalg) if "compute" in n.lower() or "TF32" in n]
        return {"names": names, "float32_now": linalg.get_compute_type(np.dtype("float32"))}
    report("tf32", tf32)

    def ceilings():
        n = 1 << 28
        a, b = cp.ones(n, cp.float32), cp.empty(n, cp.float32)
        cp.copyto(b, a)
        cp.cuda.Device().synchronize()
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(10):
            cp.copyto(b, a)
        end.record()
        end.synchronize()
        copy_tb = 10 * 2 * 4 * n / (cp.cuda.get_elapsed_time(start, end) / 1e3) / 1e12
        m = 8192
        x = cp.random.default_rng(0).random((m, m), dtype=cp.float32)
        y = cp.empty_like(x)
        cp.matmul(x, x, out=y)
        start.record()
        for _ in range(5):
            cp.matmul(x, x, out=y)
        end.record()
        end.synchronize()
        tflops = 5 * 2 * m ** 3 / (cp.cuda.get_elapsed_time(start, end) / 1e3) / 1e12
        return {"copy_tb_per_s": copy_tb, "sgemm_tflops": tflops}
    report("ceilings", ceilings)

    def launch_cost():
        k = cp.ElementwiseKernel("float32 x", "float32 y", "y = x + 1.0f", "probe_launch")
        a, b = cp.ones(1024, cp.float32), cp.empty(1024, cp.float32)
        k(a, b)
        cp.cuda.Device().synchronize()
        t = time.perf_counter()
        for _ in range(2000):
            k(a, b)
        cp.cuda.Device().synchronize()
        return {"elementwise_launch_us": (time.perf_counter() - t) / 2000 * 1e6}
    report("launch_cost", launch_cost)


if __name__ == "__main__":
    main()

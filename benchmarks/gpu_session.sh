#!/usr/bin/env bash
# One GPU session's checks in one command (issue 19), logs under $OUT:
#   env.txt        nvidia-smi and the Python packages that matter
#   probe.txt      benchmarks/gpu_probe.py: what this CuPy offers, the card's ceilings
#   gpu_tests.txt  the kernel-generator and device-program tests on real CuPy
#                  (GRAPHC_TEST_GPU=1: tests/c_kernels.py launches on the GPU)
#   suite.txt      the op, NumPy and model tests with every graph on the GPU
#                  (GRAPHC_DEVICE=cuda), in chunks, each with its failures' messages
#   bench.txt, gpu.json, gpu.md   benchmarks/gpu.py
# Usage (repository root): OUT=/tmp/out bash benchmarks/gpu_session.sh
# Time limits (seconds) and the benchmark's arguments come from the environment:
# PROBE_S, GPU_TESTS_S, SUITE_S (0: skip that part), BENCH_S, BENCH_ARGS, SUITE_WORKERS,
# SUITE_CHUNKS (default 6), SUITE_TESTS (the test files; default: tests/test_*.py).
set -u
OUT=${OUT:-/tmp/graphc-gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
{ nvidia-smi; python3 -m pip list 2>/dev/null | grep -i -E \
  "^(cupy|numpy|numba|llvmlite|torch|scipy|ml.dtypes|networkx|threadpoolctl|hypothesis|pytest)"; } \
  > "$OUT/env.txt" 2>&1
[ "${PROBE_S:-90}" != 0 ] && timeout "${PROBE_S:-90}" python3 benchmarks/gpu_probe.py \
  > "$OUT/probe.txt" 2>&1
( GRAPHC_TEST_GPU=1 timeout "${GPU_TESTS_S:-150}" python3 -m pytest -q -n 4 -p no:cacheprovider \
    --tb=short tests/test_cuda_codegen.py tests/test_cuda_window.py tests/test_device_program.py \
    tests/test_device_options.py tests/test_cuda_blas.py > "$OUT/gpu_tests.txt" 2>&1; echo "exit $?" >> "$OUT/gpu_tests.txt" ) &
# the CPU-only families (ONNX import, generated CPU kernels, MPI, doctests) and the
# tests of CPU-program features (marked cpu_engine) stay out
# in SUITE_CHUNKS chunks of test files, each under its share of SUITE_S, so that the
# failure messages of every finished chunk come back even if the time runs out
suite_chunks() {
  local files chunk n=${SUITE_CHUNKS:-6} share
  files=$(ls ${SUITE_TESTS:-tests/test_*.py} | grep -v -E \
    'test_onnx_|test_numba_|test_generated_|test_distributed.py|test_doctests.py')
  share=$(( ${SUITE_S:-200} / n ))
  for k in $(seq 0 $((n - 1))); do
    chunk=$(echo "$files" | awk -v n="$n" -v k="$k" 'NR % n == k')
    echo "== chunk $k: $(echo $chunk | wc -w) files, ${share} s" >> "$OUT/suite.txt"
    GRAPHC_DEVICE=cuda timeout "$share" python3 -m pytest -q -rf -n "${SUITE_WORKERS:-10}" \
      -p no:cacheprovider --tb=line -o addopts="" -m "not cpu_engine" $chunk \
      >> "$OUT/suite.txt" 2>&1
    echo "== chunk $k exit $?" >> "$OUT/suite.txt"
  done
}
[ "${SUITE_S:-200}" != 0 ] && suite_chunks &
wait
timeout "${BENCH_S:-170}" python3 benchmarks/gpu.py --out "$OUT" ${BENCH_ARGS:-} \
  > "$OUT/bench.txt" 2>&1; echo "exit $?" >> "$OUT/bench.txt"
grep -E "passed|failed|exit" "$OUT/gpu_tests.txt" | tail -3
[ -f "$OUT/suite.txt" ] && grep -E "^== chunk .* exit|passed|failed" "$OUT/suite.txt"
tail -25 "$OUT/bench.txt"

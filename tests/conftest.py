"""Shared test settings: hypothesis profiles sized for a 2-core CI machine.

- ``ci`` (the default): derandomized, no example database. Every machine and every
  run tries the same examples, so a fresh checkout passes or fails exactly as CI does.
- ``thorough``: random examples, about 8x as many (``opcheck.examples`` scales with
  ``max_examples``), failures saved in ``.hypothesis/`` and replayed first next time.

Select one with ``HYPOTHESIS_PROFILE=thorough python -m pytest`` (or pytest's
``--hypothesis-profile=thorough``).

Graphs compiled by the tests run on the NumPy kernels, the reference, unless a test
asks for generated ones (tests/test_generated_kernels.py does): thousands of small
graphs must not each wait for a JIT. ``GRAPHC_KERNELS=generated python -m pytest``
runs the whole suite on the generated kernels instead.
"""
import os

os.environ.setdefault("GRAPHC_KERNELS", "numpy")

from hypothesis import HealthCheck, settings

PROFILES = {
    "ci": dict(max_examples=60, derandomize=True, database=None),
    "thorough": dict(max_examples=500, derandomize=False, print_blob=True),
}
for _name, _options in PROFILES.items():
    settings.register_profile(_name, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow], **_options)

# GRAPHC_HYPOTHESIS: the variable's earlier name, still honoured
_chosen = os.environ.get("HYPOTHESIS_PROFILE") or os.environ.get("GRAPHC_HYPOTHESIS") or "ci"
if _chosen not in PROFILES:
    raise ValueError(f"HYPOTHESIS_PROFILE={_chosen!r}: expected one of {', '.join(PROFILES)}")
settings.load_profile(_chosen)

# GRAPHC_TEST_FAKE_CUDA=1 (with GRAPHC_DEVICE=cuda): every graph runs on the device
# program with NumPy standing in for CuPy and gcc compiling the generated kernels
# (tests/test_device_program.py's stand-in), so device failures show without a GPU
if os.environ.get("GRAPHC_TEST_FAKE_CUDA") == "1":
    import graphc.engine.devices as _devices
    from test_device_program import _backend as _fake_backend

    _devices.cuda_backend = _fake_backend


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _cpu_engine_tests_stay_on_the_cpu(request, monkeypatch):
    """Tests marked ``cpu_engine`` are about the CPU program's own features (bound
    inputs, views of every kind, floating-point error reports): they compile for the
    CPU even where ``$GRAPHC_DEVICE`` sends every other graph to the GPU."""
    if request.node.get_closest_marker("cpu_engine") is not None:
        monkeypatch.delenv("GRAPHC_DEVICE", raising=False)

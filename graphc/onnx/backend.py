"""graphc as an ONNX backend (``onnx.backend.base.Backend``), so ONNX's own
conformance suite (``onnx.backend.test.BackendTest``) can run over it.

>>> import onnx, onnx.helper as h, numpy as np
>>> graph = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g",
...     [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
...     [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])])
>>> GraphcBackend.run_model(h.make_model(graph), [np.array([-1, 1], np.float32)])
[array([0., 1.], dtype=float32)]
"""
from __future__ import annotations

import numpy as np
from onnx.backend.base import Backend, BackendRep

from . import read_model
from .errors import OnnxUnsupported
from .loaded import OnnxGraph


class GraphcRep(BackendRep):
    """A prepared model: ``run(inputs)`` takes the inputs in the model's order (or a
    dict by name) and returns the outputs in order."""

    def __init__(self, graph: OnnxGraph):
        self.graph = graph

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            feeds = inputs
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            names = self.graph.input_names
            if len(inputs) != len(names):
                raise ValueError(f"GraphcRep.run: the model has {len(names)} inputs {names}, "
                                 f"got {len(inputs)} arrays")
            feeds = dict(zip(names, inputs))
        return self.graph.run(feeds)


class GraphcBackend(Backend):
    """The ONNX backend interface over graphc's CPU engine."""

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs) -> GraphcRep:
        super().prepare(model, device, **kwargs)
        options = {k: v for k, v in kwargs.items() if k in ("plan", "optimise", "check")}
        return GraphcRep(OnnxGraph(read_model(model), **options))

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper() == "CPU"

    @classmethod
    def is_compatible(cls, model, device: str = "CPU", **kwargs) -> bool:
        """Whether graphc imports every node of ``model`` (operators and attributes)."""
        return unsupported_reason(model) is None


def unsupported_reason(model):
    """Why graphc cannot import ``model`` (the importer's own message), or ``None``."""
    try:
        OnnxGraph(read_model(model))
    except OnnxUnsupported as exc:
        return str(exc)
    return None

"""``OnnxGraph``: an imported ONNX model, compiled once per set of input shapes.

graphc's graphs have static shapes, so a model whose inputs have symbolic
dimensions (a batch size ``N``) is compiled when it first runs with concrete
arrays, and again for each new set of shapes (each compiled graph is cached).
An input whose value a node needs while importing (the axes of a reduction, a
target shape fed as a graph input) becomes a constant: the model is compiled
for each value it is run with.

>>> import onnx, onnx.helper as h, numpy as np
>>> graph = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g",
...     [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N"])],
...     [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N"])])
>>> g = OnnxGraph(h.make_model(graph))
>>> g.run(x=np.array([-1.0, 2.0], np.float32))
[array([0., 2.], dtype=float32)]
"""
from __future__ import annotations

from typing import Mapping, Optional

import numpy as np

from ..type.errors import InputError
from ..type.formats import NARROW_FORMATS, is_narrow
from .errors import NeedsInputValue, OnnxModelError
from .formats import declared_formats
from .importer import declared_shape, graph_inputs, import_graph, missing_shapes
from .limits import ImportLimits, size_text


class OnnxGraph:
    """An ONNX model as graphc graphs: ``run({input_name: array})`` (or keywords,
    where the names are identifiers) returns the ONNX outputs in order (a list).

    ``limits`` bounds what importing may allocate
    (:class:`~graphc.onnx.limits.ImportLimits`; ``graphc.onnx.load`` builds it
    from ``fold_limit_bytes`` and ``value_limit_bytes``).

    ``model`` is the ``ModelProto`` while graphs may still be compiled from it
    (inputs with symbolic dimensions, or values the import needs); a model whose
    every shape is known compiles its one graph at once, and then ``model`` is
    ``None``: the compiled graph holds the weights (as NumPy constants), and the
    protobuf's copy of them is not kept beside it.
    """

    def __init__(self, model, input_shapes: Optional[Mapping[str, tuple]] = None, *,
                 device: str = "cpu", plan: str = "offsets", optimise=True,
                 copy_outputs: bool = True, check: bool = False, fold_batchnorm: bool = True,
                 limits: Optional[ImportLimits] = None):
        if device not in ("cpu",):
            raise ValueError(f"onnx.load: unknown device {device!r}; graphc has the 'cpu' "
                             "engine")
        self.model = model
        self.limits = limits or ImportLimits()
        self.input_names = [v.name for v in graph_inputs(model.graph)]
        self.output_names = [v.name for v in model.graph.output]
        #: inputs and outputs of a narrow type (bfloat16, float8, ...): name -> format
        self._input_formats = declared_formats(graph_inputs(model.graph))
        self._output_formats = declared_formats(model.graph.output)
        if input_shapes is not None and not isinstance(input_shapes, Mapping):
            raise InputError(f"onnx.load: input_shapes must map input names to shapes, got "
                             f"{type(input_shapes).__name__}")
        self._given = {k: _shape_given(k, v) for k, v in (input_shapes or {}).items()}
        self._declared = {v.name: declared_shape(v) for v in graph_inputs(model.graph)}
        unknown = set(self._given) - set(self.input_names)
        if unknown:
            raise InputError(f"onnx.load: input_shapes names {sorted(unknown)}, which are not "
                             f"inputs of the model (its inputs are {self.input_names})")
        self._options = dict(plan=plan, optimise=optimise, copy_outputs=copy_outputs,
                             check=check)
        self._fold_batchnorm = fold_batchnorm
        self._compiled: dict[tuple, object] = {}
        self._last = None
        #: inputs whose values the import needs: compiled in as constants, per value
        self._value_inputs: set[str] = set()
        #: (the one graph, its input shapes) of a model whose every shape is known and
        #: whose feeds and results need no conversion: runs with those shapes go
        #: straight to it (a run's Python follows its kernels, with cold caches)
        self._static = None
        if not missing_shapes(model, self._given):
            static = {n: self._given.get(n) or self._declared[n] for n in self.input_names}
            try:
                self._last = self._compile(static)  # static: compile now, errors now
            except NeedsInputValue as exc:  # compiled at the first run, with the value
                self._value_inputs.add(exc.input_name)
            else:
                # every run uses this graph (its shapes are fixed, no value compiled
                # in): the weights are held once, by it, not also by the protobuf
                self.model = None
                if not self._input_formats and not self._output_formats:
                    self._static = (self._last, {n: tuple(d) for n, d in static.items()})

    def _compile(self, shapes: Mapping[str, tuple], feeds: Optional[Mapping] = None):
        from ..compiler import compile as compile_graph

        while True:
            values = {n: np.asarray(feeds[n]) for n in sorted(self._value_inputs)} if feeds else {}
            key = (tuple(tuple(shapes[n]) if n in shapes else None for n in self.input_names),
                   tuple((n, v.dtype.str, v.shape, v.tobytes()) for n, v in values.items()))
            if key in self._compiled:
                return self._compiled[key]
            try:
                variables, outputs = import_graph(self.model, shapes, self._fold_batchnorm,
                                                  values, self.limits)
            except NeedsInputValue as exc:
                if feeds is None or exc.input_name in self._value_inputs:
                    raise
                self._value_inputs.add(exc.input_name)
                continue
            try:
                compiled = compile_graph(inputs=variables, outputs=outputs, **self._options)
            except MemoryError as exc:
                # each value is within value_limit_bytes, but not all of them together
                most = size_text(self.limits.value_limit_bytes)
                raise OnnxModelError(f"onnx.load: the model's graph does not fit in memory "
                                     f"(each value is at most value_limit_bytes={most}): "
                                     f"{exc}") from exc
            self._compiled[key] = compiled
            return compiled

    def _shape_for(self, name: str, value) -> tuple:
        """The shape input ``name`` compiles with: the given or declared one, with
        only the unknown dimensions taken from ``value``."""
        if name in self._given:
            return self._given[name]
        declared = self._declared[name]
        got = tuple(np.shape(value))
        if declared is None:
            return got
        if len(got) != len(declared) or any(d is not None and d != g
                                             for d, g in zip(declared, got)):
            shown = tuple("?" if d is None else d for d in declared)
            raise InputError(f"onnx run: input {name!r} expects shape {shown} but got shape "
                             f"{got}")
        return got

    @property
    def executable(self):
        """The graphc ``Executable`` compiled last (``None`` before the first run of a
        model with symbolic shapes)."""
        return self._last

    def stats(self) -> dict:
        """The last compiled graph's ``stats()`` (memory plan, node counts)."""
        if self._last is None:
            raise RuntimeError("OnnxGraph.stats: nothing compiled yet; run the model once")
        return self._last.stats()

    def run(self, feeds: Optional[Mapping] = None, /, **kwargs) -> list:
        """Run on ``{input_name: array}`` (a mapping, keywords, or both); returns
        the outputs in the model's order."""
        static = self._static
        if (static is not None and not kwargs and type(feeds) is dict
                and len(feeds) == len(static[1])
                and all(n in feeds and np.shape(feeds[n]) == d for n, d in static[1].items())):
            result = static[0].run(feeds)       # the checks below all pass
            return list(result) if isinstance(result, (list, tuple)) else [result]
        if feeds is not None and not isinstance(feeds, Mapping):
            raise InputError(f"onnx run: pass the inputs as a dict {{input name: array}} "
                             f"(the model's inputs are {self.input_names}), got "
                             f"{type(feeds).__name__}")
        feeds = {**(feeds or {}), **kwargs}
        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise InputError(f"onnx run: missing inputs {missing}; the model's inputs are "
                             f"{self.input_names}")
        extra = sorted(set(feeds) - set(self.input_names))
        if extra:
            raise InputError(f"onnx run: unknown inputs {extra}; the model's inputs are "
                             f"{self.input_names}")
        self._last = self._compile({n: self._shape_for(n, feeds[n]) for n in self.input_names},
                                   feeds)
        result = self._last.run({n: self._computed(n, v) for n, v in feeds.items()
                                 if n not in self._value_inputs})
        result = list(result) if isinstance(result, (list, tuple)) else [result]
        return [self._stored(n, v) for n, v in zip(self.output_names, result)]

    def _computed(self, name: str, value):
        """A feed of a narrow format's ``ml_dtypes`` dtype in its compute dtype (exact)."""
        fmt = self._input_formats.get(name)
        if fmt is not None and is_narrow(getattr(value, "dtype", None)):
            return np.asarray(value).astype(NARROW_FORMATS[fmt].compute_dtype)
        return value

    def _stored(self, name: str, value):
        """An output of a narrow type as its format's ``ml_dtypes`` dtype (exact: the
        graph holds it rounded to the format)."""
        fmt = self._output_formats.get(name)
        return value if fmt is None else value.astype(NARROW_FORMATS[fmt].storage_dtype())

    def __repr__(self) -> str:
        return (f"OnnxGraph(inputs={self.input_names}, outputs={self.output_names}, "
                f"compiled for {len(self._compiled)} shape set(s))")


def _shape_given(name: str, shape) -> tuple:
    """A shape of ``input_shapes`` as a tuple of non-negative ints, or an error
    naming the input."""
    try:
        dims = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise InputError(f"onnx.load: input_shapes[{name!r}] must be a sequence of ints, got "
                         f"{shape!r}") from None
    if any(d < 0 for d in dims):
        raise InputError(f"onnx.load: input_shapes[{name!r}] = {dims} has a negative "
                         "dimension")
    return dims

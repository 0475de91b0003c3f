"""Build a graphc graph from an ONNX ``GraphProto``.

Initializers become NumPy arrays (constants); the graph inputs that have no
initializer become ``N.var`` inputs with the given or declared static shapes;
each node goes through its converter (:mod:`graphc.onnx.convert`). Values that
depend only on constants are computed while importing, within a memory budget
(:mod:`graphc.onnx.limits`), so what reaches the graph is the computation on
the inputs alone; a constant value too large to compute while importing is
computed at run time instead. A value no later node reads is dropped from the
import's table as soon as its last reader is converted.

>>> import onnx, onnx.helper as h, numpy as np
>>> graph = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g",
...     [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
...     [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])])
>>> inputs, outputs = import_graph(h.make_model(graph), {})
>>> [v.name for v in inputs], outputs[0].shape
(['x'], (2,))
"""
from __future__ import annotations

import collections
from typing import Mapping, Optional

import numpy as np

from .context import Namespaces
from .convert import DEFAULT_DOMAINS, convert_node, is_folded_result, message_of
from .errors import OnnxModelError, OnnxUnsupported, describe
from .fold_bn import batchnorm_reader, consumers_of, fold_into_conv, fold_into_matmul
from .formats import rounded, value_formats
from .subgraph import outer_references
from .limits import ImportBudget, ImportLimits
from .tensors import onnx_dtype, to_array
from .typecheck import problem


def model_opset(model) -> int:
    """The default-domain opset version the model was written against (a model of
    other domains only, such as ai.onnx.ml's, gets the newest one onnx knows: it has
    no default-domain node for the version to matter to)."""
    for entry in model.opset_import:
        if entry.domain in DEFAULT_DOMAINS:
            return int(entry.version)
    if not model.opset_import:  # IR 1-2 models carry no opset_import: opset 1
        return 1
    import onnx

    return int(onnx.defs.onnx_opset_version())


def domain_versions(model) -> dict:
    """``{domain: version}`` of the other domains the model imports (``ai.onnx.ml``...)."""
    return {e.domain: int(e.version) for e in model.opset_import
            if e.domain not in DEFAULT_DOMAINS}


def graph_inputs(graph) -> list:
    """The graph's real inputs: declared inputs that have no initializer (IR < 4
    models list every initializer as an input too)."""
    initialized = {t.name for t in graph.initializer}
    return [v for v in graph.input if v.name not in initialized]


def declared_shape(value_info) -> tuple:
    """The declared shape of ``value_info``: ints, or ``None`` for a symbolic or
    unknown dimension; ``None`` for the whole shape if there is none."""
    tensor_type = value_info.type.tensor_type
    if not value_info.type.HasField("tensor_type"):
        raise OnnxUnsupported(f"input {value_info.name!r}: only tensor inputs are supported "
                              f"(got {value_info.type.WhichOneof('value')})")
    if not tensor_type.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim)


def import_graph(model, input_shapes: Mapping[str, tuple],
                 fold_batchnorm: bool = True,
                 input_values: Optional[Mapping[str, np.ndarray]] = None,
                 limits: Optional[ImportLimits] = None) -> tuple[list, list]:
    """The graphc input variables and output values of ``model``'s main graph.

    ``input_shapes`` gives a concrete shape for each input whose declared shape
    is not fully static. ``fold_batchnorm`` folds each inference
    BatchNormalization into the Conv (or constant MatMul) before it
    (:mod:`graphc.onnx.fold_bn`).
    ``input_values`` fixes the value of inputs that nodes need while importing
    (axes, shapes): they become constants, not variables. ``limits`` bounds
    what the import may allocate (:class:`~graphc.onnx.limits.ImportLimits`).
    """
    return _Import(model, limits or ImportLimits()).run(input_shapes, fold_batchnorm,
                                                        input_values or {})


class _Import:
    """The state of one import: the table of values by ONNX name (``env``), the
    budget, and which folded values it holds."""

    def __init__(self, model, limits: ImportLimits):
        self.model, self.opset = model, model_opset(model)
        self.budget = ImportBudget(limits)
        #: value name -> narrow format: such values are held rounded to it
        self.formats = value_formats(model)
        self.namespaces = Namespaces(self.budget, self.formats)
        self.namespaces.domain_versions = domain_versions(model)
        self.namespaces.opset = self.opset
        self.env: dict[str, object] = {}
        self.namespaces.scope = self.env  # what control-flow bodies read by name
        #: name -> bytes of a folded value the budget counts as held
        self.held: dict[str, int] = {}
        #: folded values a graph node reads: the graph keeps them, so they stay held
        self.adopted: set[str] = set()
        #: name -> (node, index) that produced it, for the errors about outputs
        self.producer: dict[str, tuple] = {}
        self.index_of = {id(node): i for i, node in enumerate(model.graph.node)}

    def run(self, input_shapes, fold_batchnorm, input_values):
        graph = self.model.graph
        if len(graph.sparse_initializer):
            raise OnnxUnsupported("sparse initializers are not supported")
        for tensor in graph.initializer:
            self.env[tensor.name] = _read_only(to_array(tensor))
        variables = self._inputs(graph, input_shapes, input_values)
        # how many nodes still read each value; graph outputs are read at the end
        readers = collections.Counter(name for node in graph.node for name in
                                      [*node.input, *outer_references(node)] if name)
        readers.update(v.name for v in graph.output)
        consumers = consumers_of(graph) if fold_batchnorm else {}
        output_names = {v.name for v in graph.output}
        replaced = {}       # id(folded BN) -> the node computing it now, or None
        for index, node in enumerate(graph.node):
            node = replaced.get(id(node), node)
            if node is None:
                continue
            if (fold_batchnorm and node.op_type in _FOLDS_BATCHNORM
                    and node.domain in DEFAULT_DOMAINS):
                folded = self._fold_batchnorm(node, index, consumers, output_names)
                if folded is not None:
                    node, replaced[id(folded[0])] = _FOLDS_BATCHNORM[node.op_type][1](
                        node, *folded, self.env)
            self._convert(node, index)
            for name in [*node.input, *outer_references(node)]:
                if name and name in readers:
                    readers[name] -= 1
                    if readers[name] == 0:
                        self._drop(name)
        return variables, self._outputs(graph)

    def _inputs(self, graph, input_shapes, input_values) -> list:
        variables = []
        for info in graph_inputs(graph):
            declared = declared_shape(info)  # refuses an input that is not a tensor
            dtype = onnx_dtype(info.type.tensor_type.elem_type, f"input {info.name!r}")
            if info.name in input_values:
                # a copy: the caller's array must stay writeable and may change later
                self.env[info.name] = _read_only(np.array(input_values[info.name], dtype,
                                                          copy=True))
                continue
            given = info.name in input_shapes and input_shapes[info.name] is not None
            shape = tuple(input_shapes[info.name]) if given else declared
            if shape is None or any(d is None for d in shape):
                raise OnnxModelError(f"input {info.name!r} has shape {shape} with unknown "
                                     "dimensions; pass its shape (run with an array, or "
                                     "input_shapes={name: shape})")
            source = "declares" if shape == declared else "is given"
            if any(not isinstance(d, (int, np.integer)) or d < 0 for d in shape):
                raise OnnxModelError(f"input {info.name!r} {source} the shape {shape}; "
                                     "dimensions must be non-negative integers")
            self.budget.value(shape, dtype, f"input {info.name!r}")
            var = self.namespaces.graph.var(info.name, tuple(int(d) for d in shape), dtype)
            # a feed in the compute dtype is rounded as a Cast to the format would round it
            self.env[info.name] = self._rounded(info.name, var)
            variables.append(var)
        return variables

    def _fold_batchnorm(self, node, index, consumers, output_names):
        """``fold_into_conv``'s (or ``fold_into_matmul``'s) answer, once the
        BatchNormalization it would absorb has passed the same type checks as a
        node of its own."""
        bn = batchnorm_reader(node, consumers)
        if bn is not None:
            # the BN's input has the node's first input's element type (both are T)
            values = [self.env.get(node.input[0]) if i == 0 else self.env.get(name)
                      for i, name in enumerate(bn.input)]
            if all(v is not None for v in values):
                wrong = problem(bn, self.opset, values)
                if wrong is not None:
                    where = describe(bn, self.index_of.get(id(bn)))
                    raise OnnxModelError(f"{where}: {wrong}")
        try:
            return _FOLDS_BATCHNORM[node.op_type][0](node, consumers, self.env, output_names)
        except Exception as exc:
            raise OnnxModelError(f"{describe(node, index)}: folding the BatchNormalization "
                                 f"after it: {type(exc).__name__}: {message_of(exc)}") from exc

    def _convert(self, node, index) -> None:
        inputs = [self.env.get(name) for name in node.input if name]
        outputs = convert_node(node, index, self.opset, self.env, self.namespaces,
                               self.namespaces.domain_versions)
        if not self.budget.folding:
            self.adopted.update(name for name in node.input if name in self.held)
        for name, value in outputs.items():
            if is_folded_result(node, value, inputs):
                self.held[name] = value.nbytes
                self.budget.hold(value.nbytes)
            value = self._rounded(name, value)
            if isinstance(value, np.ndarray):
                value = _read_only(value)
            self.env[name] = value
            self.producer[name] = (node, index)

    def _rounded(self, name: str, value):
        return rounded(self.namespaces, name, value)

    def _drop(self, name: str) -> None:
        """No node reads ``name`` any more: the import lets it go."""
        self.env.pop(name, None)
        if name in self.held and name not in self.adopted:
            self.budget.release(self.held.pop(name))

    def _outputs(self, graph) -> list:
        outputs = []
        for info in graph.output:
            if info.name not in self.env:
                raise OnnxModelError(f"graph output {info.name!r} is produced by no node")
            value = self.env[info.name]
            declared = info.type.tensor_type.elem_type if info.type.HasField("tensor_type") \
                else 0
            if declared:
                want = onnx_dtype(declared, f"graph output {info.name!r}")
                if want != value.dtype:
                    node, index = self.producer.get(info.name, (None, None))
                    by = f" by {describe(node, index)}" if node is not None else ""
                    raise OnnxModelError(f"graph output {info.name!r} is declared {want}, but "
                                         f"the value computed{by} is {value.dtype}")
            outputs.append(value if not isinstance(value, np.ndarray)
                           else self.namespaces.graph.const(value))
        return outputs


def _conv_with_folded_weights(conv, bn, w, b, env):
    """A copy of ``conv`` reading the folded weights and writing the BN's output, and
    ``None``: the BN is gone."""
    import onnx

    replacement = onnx.NodeProto()
    replacement.CopyFrom(conv)
    names = [f"{bn.output[0]}::folded_w", f"{bn.output[0]}::folded_b"]
    env[names[0]], env[names[1]] = _read_only(w), _read_only(b)
    del replacement.input[:]
    replacement.input.extend([conv.input[0], *names])
    replacement.output[0] = bn.output[0]
    return replacement, None


def _matmul_with_folded_weights(matmul, bn, w, shift, env):
    """A copy of ``matmul`` reading the folded matrix, and the Add that replaces
    ``bn``: its input plus the shift, written to the BN's output."""
    import onnx

    replacement = onnx.NodeProto()
    replacement.CopyFrom(matmul)
    names = [f"{bn.output[0]}::folded_w", f"{bn.output[0]}::shift"]
    env[names[0]], env[names[1]] = _read_only(w), _read_only(shift)
    replacement.input[1] = names[0]
    add = onnx.helper.make_node("Add", [bn.input[0], names[1]], [bn.output[0]],
                                name=bn.name)
    return replacement, add


#: the nodes an inference BatchNormalization after them folds into: op type -> (what
#: folds, the node it becomes and what replaces the BN)
_FOLDS_BATCHNORM = {"Conv": (fold_into_conv, _conv_with_folded_weights),
                    "MatMul": (fold_into_matmul, _matmul_with_folded_weights)}


def _read_only(array: np.ndarray) -> np.ndarray:
    """``array`` contiguous and read-only, so the graph adopts it without a copy."""
    array = np.asarray(array)
    if not array.flags.c_contiguous:
        # ascontiguousarray alone makes a 0-d array 1-d: keep the shape (Size)
        array = np.ascontiguousarray(array).reshape(np.shape(array))
    array.flags.writeable = False
    return array


def missing_shapes(model, given: Optional[Mapping] = None) -> list[str]:
    """Names of inputs whose shape is neither declared statically nor given."""
    given = given or {}
    out = []
    for info in graph_inputs(model.graph):
        shape = declared_shape(info)
        if info.name not in given and (shape is None or any(d is None for d in shape)):
            out.append(info.name)
    return out

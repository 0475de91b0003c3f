"""ONNX export: a graphc graph as an ONNX ``ModelProto`` (``graphc.onnx.save``).

The graph exported is the one as written (``Executable.source``): its op kinds are
the high-level ones (``conv2d``, ``max_pool2d``, ``matmul``, ``reshape``), which map
onto ONNX operators one to one or nearly; the optimiser's lowered forms (``im2col``,
streamed fused programs) have no good ONNX counterpart. Each op kind is exported by
one function of the table :data:`graphc.onnx.export_ops.EXPORTERS`.

- Variables whose value was set by ``Executable.assign`` (parameters), or given by
  ``values=``, become initializers; the others (data fed to ``run``, or none yet)
  are graph inputs; ``keep_inputs`` names variables that stay inputs although they
  have a value. Constants become initializers.
- Shapes are static: every graph input and output is declared with its shape.
- Graphs with updates (training steps) and random draws are refused: ONNX export
  covers deterministic inference graphs.

Example::

    predict = graphc.neural.compile_inference(model, params, (1, 3, 224, 224))
    graphc.onnx.save(predict, "resnet50.onnx")
"""
from __future__ import annotations

from typing import Iterable, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from ..symbol.node import Node
from ..symbol.traverse import topological_order
from ..type.errors import GraphError, InputError
from .errors import OnnxUnsupported

#: The default-domain opset the exported models declare.
OPSET = 18
#: The IR version the exported models declare (opset 18 needs IR 8).
IR_VERSION = 8


class Value(NamedTuple):
    """An ONNX value as the exporters see it: its name, static shape and dtype."""

    name: str
    shape: tuple
    dtype: np.dtype


class ExportContext:
    """What an exporter gets: ways to emit nodes and initializers with fresh names.

    Example::

        y = ctx.op("Relu", [x.name])
        w = ctx.const(np.ones((3, 3), np.float32))
    """

    def __init__(self, opset: int, reserved: Iterable[str]):
        import onnx.helper

        self._helper = onnx.helper
        self.opset = opset
        self.nodes: list = []
        self.initializers: list = []
        self._used = set(reserved)
        self._count = 0
        self._small: dict = {}   # (dtype, shape, bytes) -> name: shared small constants
        self.where = ""          # the graphc node being exported, for error messages

    def fresh(self, hint: str) -> str:
        """A value name not used yet, made from ``hint``."""
        while True:
            self._count += 1
            name = f"{hint}_{self._count}"
            if name not in self._used:
                self._used.add(name)
                return name

    def claim(self, name: str) -> str:
        """Reserve ``name`` exactly (an input, output or initializer name)."""
        if name in self._used:
            raise GraphError(f"onnx export: the name {name!r} is used twice")
        self._used.add(name)
        return name

    def op(self, op_type: str, inputs: Sequence[str], *, out: Optional[str] = None,
           outputs: int = 1, **attrs):
        """Emit one node; returns its output name (a list when ``outputs > 1``).
        ``None`` attributes are left out; an input ``""`` is an omitted optional one."""
        if out is not None:
            names = [out]
        else:
            names = [self.fresh(op_type.lower()) for _ in range(outputs)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(self._helper.make_node(op_type, list(inputs), names,
                                                 name=self.fresh(f"n_{op_type}"), **attrs))
        return names[0] if outputs == 1 else names

    def const(self, array, dtype=None, name: Optional[str] = None) -> str:
        """An initializer holding ``array`` (small ones are shared by value)."""
        from onnx import numpy_helper

        array = np.asarray(array, dtype=dtype)
        key = None
        if array.size <= 64 and name is None:
            key = (array.dtype.str, array.shape, array.tobytes())
            if key in self._small:
                return self._small[key]
        name = self.claim(name) if name is not None else self.fresh("const")
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        self.initializers.append(numpy_helper.from_array(array, name))
        if key is not None:
            self._small[key] = name
        return name

    def ints(self, values) -> str:
        """A 1-D int64 initializer (shapes, axes, pads)."""
        return self.const(np.asarray(list(values), np.int64).reshape(-1))

    def scalar(self, value, dtype) -> str:
        """A 0-d initializer of ``dtype``."""
        return self.const(np.asarray(value, dtype=dtype))

    def cast(self, value: Value, dtype) -> str:
        """``value`` converted to ``dtype`` (its own name when it already has it)."""
        dtype = np.dtype(dtype)
        if value.dtype == dtype:
            return value.name
        return self.op("Cast", [value.name], to=onnx_type(dtype))


def onnx_type(dtype) -> int:
    """The ``TensorProto`` element type of a NumPy dtype.

    Example: ``onnx_type(np.float32) == onnx.TensorProto.FLOAT``
    """
    from onnx import helper

    dtype = np.dtype(dtype)
    try:
        return helper.np_dtype_to_tensor_dtype(dtype)
    except (KeyError, TypeError, ValueError):
        raise OnnxUnsupported(f"onnx export: dtype {dtype} has no ONNX tensor type") from None


# -- what is being exported --------------------------------------------------------------------
class _Source(NamedTuple):
    inputs: list          # the variables, in input order
    outputs: list         # the output nodes
    values: dict          # variable name -> array (those with a value)
    output_names: Optional[list]


def _resolve(graph, inputs, values) -> _Source:
    from ..graph import Graph

    output_names = None
    if hasattr(graph, "executable") and hasattr(graph, "output_names"):   # an OnnxGraph
        exe = graph.executable
        if exe is None:
            raise InputError("onnx export: this OnnxGraph has symbolic input shapes and has not "
                             "been compiled yet; load it with input_shapes= or run it once first")
        output_names = list(graph.output_names)
        graph = exe
    found: dict = {}
    if hasattr(graph, "source") and hasattr(graph, "value"):               # an Executable
        exe, graph = graph, graph.source
        # assigned values are parameters; values fed to run are data and stay inputs
        for name in getattr(exe, "assigned_names", ()):
            found[name] = exe.value(name)
    if isinstance(graph, Graph):
        if inputs is not None:
            raise InputError("onnx export: inputs= is only for exporting output nodes; a "
                             "compiled graph has its own inputs")
        if graph.updates:
            targets = [v.name for v, _ in graph.updates]
            raise OnnxUnsupported(f"onnx export: the graph updates variables {targets} (a "
                                  "training step); ONNX export covers inference graphs only: "
                                  "compile the forward pass without updates")
        source_inputs, outputs = list(graph.inputs), list(graph.outputs)
    elif isinstance(graph, Node) or (isinstance(graph, (list, tuple)) and graph
                                     and all(isinstance(n, Node) for n in graph)):
        outputs = [graph] if isinstance(graph, Node) else list(graph)
        if inputs is None:
            source_inputs = [n for n in topological_order(outputs) if n.op.kind == "var"]
        else:
            source_inputs = [inputs] if isinstance(inputs, Node) else list(inputs)
        Graph(source_inputs, outputs)   # the compile-time checks: inputs are named variables
    else:
        raise InputError(f"onnx export: expected an Executable (graphc.compile), an OnnxGraph, "
                         f"a graphc Graph, or output nodes, got {type(graph).__name__}")
    by_name = {v.name: v for v in source_inputs}
    for name, array in (values or {}).items():
        var = by_name.get(name)
        if var is None:
            raise InputError(f"onnx export: values= names {name!r}, which is not an input of the "
                             f"graph (its inputs are {sorted(by_name)})")
        array = np.asarray(array)
        if array.shape != var.shape:
            raise InputError(f"onnx export: the value of {name!r} has shape {array.shape}, but "
                             f"the variable has shape {var.shape}")
        found[name] = array.astype(var.dtype, copy=False)
    return _Source(source_inputs, outputs, found, output_names)


# -- the driver --------------------------------------------------------------------------------
def to_onnx(graph, inputs=None, *, values: Optional[Mapping[str, np.ndarray]] = None,
            keep_inputs: Iterable[str] = (), output_names: Optional[Sequence[str]] = None,
            opset: int = OPSET, name: str = "graphc", fold: bool = True, check: bool = True):
    """``graph`` as an ONNX ``ModelProto``.

    ``graph`` is an ``Executable`` (its graph as written is exported), an
    ``OnnxGraph``, a ``Graph``, or output nodes (one or a list; ``inputs`` then
    lists the variables in input order, by default those the outputs use, in the
    order they are met). ``values`` gives variables values (they become
    initializers, as do the variables an ``Executable`` was ``assign``-ed);
    ``keep_inputs`` names variables that stay graph inputs although they have
    a value. ``output_names`` names the outputs (default ``output_0``, ... or an
    ``OnnxGraph``'s own). ``fold`` stores values computed from constants only
    as initializers and adds constant biases inside ``Conv``/``Gemm``. ``check``
    runs ``onnx.checker`` with ``full_check``.

    Example::

        x = N.var("x", (2, 3))
        model = to_onnx(N.exp(x) + 1.0, [x])
    """
    import onnx
    from onnx import helper

    from .export_fold import bias_pairs, fold_constants
    from .export_ops import EXPORTERS, REFUSED
    from .export_shape import BIASED

    if opset < OPSET:
        raise OnnxUnsupported(f"onnx export: opset {opset} is older than the opset {OPSET} "
                              "the exporters are written for")
    src = _resolve(graph, inputs, values)
    keep = set(keep_inputs)
    unknown = keep - {v.name for v in src.inputs}
    if unknown:
        raise InputError(f"onnx export: keep_inputs names {sorted(unknown)}, which are not inputs "
                         f"of the graph (its inputs are {[v.name for v in src.inputs]})")
    names = list(output_names) if output_names is not None else (
        src.output_names or [f"output_{i}" for i in range(len(src.outputs))])
    if len(names) != len(src.outputs) or len(set(names)) != len(names):
        raise InputError(f"onnx export: output_names must give {len(src.outputs)} distinct "
                         f"names, got {names}")
    input_names = [v.name for v in src.inputs]
    clash = set(names) & set(input_names)
    if clash:
        raise InputError(f"onnx export: output names {sorted(clash)} are also input names")
    ctx = ExportContext(opset, input_names + names)

    # an output computed by an op writes straight into its output name
    target: dict = {}
    for node, out_name in zip(src.outputs, names):
        if node.op.kind not in ("var", "const") and id(node) not in target:
            target[id(node)] = out_name
    graph_inputs, produced = [], {}
    for var in src.inputs:
        if var.name in src.values and var.name not in keep:
            ctx.initializers.append(onnx.numpy_helper.from_array(
                np.ascontiguousarray(src.values[var.name]), var.name))
        else:
            graph_inputs.append(helper.make_tensor_value_info(var.name, onnx_type(var.dtype),
                                                              var.shape))
        produced[id(var)] = var.name
    order = topological_order(src.outputs)
    if fold:
        folded = fold_constants(order)
        pairs = bias_pairs(order, src.outputs, folded)
    else:
        folded = {id(n): n.value for n in order if n.op.kind == "const"}
        pairs = {}
    absorbed = {id(producer) for producer, _ in pairs.values()}
    shared: dict = {}

    def name_of(node) -> str:
        """The ONNX name of a parent; a folded one becomes an initializer on first use."""
        if id(node) not in produced:
            array = folded[id(node)]
            key = (id(array), node.dtype.str)
            if key not in shared:
                shared[key] = ctx.const(np.asarray(array).astype(node.dtype, copy=False))
            produced[id(node)] = shared[key]
        return produced[id(node)]

    for node in order:
        kind = node.op.kind
        if kind == "var":
            if id(node) not in produced:
                raise GraphError(f"onnx export: variable {node.name!r} is used but is not an "
                                 f"input{_where(node)}")
            continue
        if id(node) in folded or id(node) in absorbed:
            continue
        out = Value(target.get(id(node)) or ctx.fresh(kind), node.shape, node.dtype)
        ctx.where = _describe(node)
        if id(node) in pairs:
            producer, bias = pairs[id(node)]
            ins = [Value(name_of(p), p.shape, p.dtype) for p in producer.parents]
            result = BIASED[producer.op.kind][1](ctx, producer.op, ins, bias, out)
        else:
            fn = EXPORTERS.get(kind)
            if fn is None:
                reason = REFUSED.get(kind, "no ONNX exporter is registered for it")
                raise OnnxUnsupported(f"onnx export: op kind {kind!r} ({ctx.where}) cannot be "
                                      f"exported: {reason}")
            ins = [Value(name_of(p), p.shape, p.dtype) for p in node.parents]
            result = fn(ctx, node.op, ins, out)
        if id(node) in target and result != out.name:
            result = ctx.op("Identity", [result], out=out.name)
        produced[id(node)] = result
    graph_outputs = []
    for node, out_name in zip(src.outputs, names):
        if name_of(node) != out_name:
            ctx.op("Identity", [name_of(node)], out=out_name)
        graph_outputs.append(helper.make_tensor_value_info(out_name, onnx_type(node.dtype),
                                                           node.shape))
    model = helper.make_model(
        helper.make_graph(ctx.nodes, name, graph_inputs, graph_outputs, ctx.initializers),
        opset_imports=[helper.make_opsetid("", opset)], producer_name="graphc",
        # a newer opset (asked for by the caller) needs the IR version that has it
        ir_version=max(IR_VERSION, helper.find_min_ir_version_for(
            [helper.make_opsetid("", opset)])))
    if check:
        onnx.checker.check_model(model, full_check=True)
    return model


def save(graph, path, **options):
    """Write ``graph`` (see :func:`to_onnx` for what it may be and the options) to
    the ONNX file ``path``; returns the ``ModelProto``.

    Example::

        graphc.onnx.save(graphc.compile([x], N.exp(x)), "exp.onnx")
    """
    import onnx

    model = to_onnx(graph, **options)
    onnx.save_model(model, str(path))
    return model


def exported_kinds() -> list[str]:
    """The graphc op kinds the exporter handles, sorted.

    Example: ``"conv2d" in exported_kinds()``
    """
    from .export_ops import EXPORTERS

    return sorted(EXPORTERS)


def _where(node) -> str:
    return f" (created at {node.where})" if getattr(node, "where", None) else ""


def _describe(node) -> str:
    attrs = ", ".join(f"{k}={v!r}" for k, v in node.op.attrs if k not in ("program",))
    shapes = ", ".join(str(p.shape) for p in node.parents)
    text = f"{node.op.kind}({attrs}) of shapes [{shapes}] -> {node.shape} {node.dtype}"
    return text + _where(node)


__all__ = ["to_onnx", "save", "exported_kinds", "ExportContext", "Value", "onnx_type",
           "OPSET", "IR_VERSION"]

"""The nine ``light`` models that ship inside the onnx wheel, optionally with random
weights.

Their weights are ``ConstantOfShape`` nodes that fill every tensor with 0.02,
which makes the softmax uniform whatever the computation. ``light_model(name,
seed=...)`` replaces each such weight with a random initializer scaled by its
role (He-scaled convolution and dense kernels, positive batch-norm scales and
variances), so the logits carry information and a wrong operator shows.

>>> sorted(LIGHT_MODELS)[:3]
['bvlc_alexnet', 'densenet121', 'inception_v1']
>>> m = light_model("squeezenet", seed=0)  # doctest: +SKIP
"""
from __future__ import annotations

import os
from typing import Optional

import numpy as np

LIGHT_MODELS = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
                "shufflenet", "squeezenet", "vgg19", "zfnet512")


def light_model_path(name: str) -> str:
    """The path of light model ``name`` inside the installed onnx package."""
    import onnx

    if name not in LIGHT_MODELS:
        raise ValueError(f"light_model: unknown model {name!r}; expected one of "
                         f"{list(LIGHT_MODELS)}")
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light",
                        f"light_{name}.onnx")


def light_model(name: str, seed: Optional[int] = None):
    """Light model ``name`` as a ``ModelProto``; with ``seed``, every
    ``ConstantOfShape`` weight becomes a random initializer (see the module doc)."""
    import onnx

    model = onnx.load(light_model_path(name))
    if seed is not None:
        randomise_weights(model, np.random.default_rng(seed))
    return model


def randomise_weights(model, rng: np.random.Generator) -> None:
    """Replace, in place, each ``ConstantOfShape`` whose shape is an initializer by
    a random initializer of that shape, scaled by how the value is consumed."""
    import onnx.numpy_helper as nh

    graph = model.graph
    initializers = {t.name: t for t in graph.initializer}
    roles = _roles(graph)
    keep, made = [], []
    for node in graph.node:
        if node.op_type == "ConstantOfShape" and node.input and node.input[0] in initializers:
            shape = tuple(int(d) for d in nh.to_array(initializers[node.input[0]]))
            value = _draw(rng, shape, roles.get(node.output[0], "other"))
            made.append(nh.from_array(value, node.output[0]))
        else:
            keep.append(node)
    del graph.node[:]
    graph.node.extend(keep)
    # the shape tensors the ConstantOfShape nodes read are now unused
    used = {name for node in keep for name in node.input}
    unused = [t for t in graph.initializer if t.name not in used]
    for tensor in unused:
        graph.initializer.remove(tensor)
    dropped = {t.name for t in unused}
    inputs = [v for v in graph.input if v.name not in dropped]
    del graph.input[:]
    graph.input.extend(inputs)
    graph.initializer.extend(made)
    if model.ir_version < 4:  # older IR lists every initializer as a graph input
        import onnx.helper as h

        graph.input.extend(h.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                           for t in made)


def with_logits(model):
    """``model`` with the input of its final Softmax added as a second output (the
    pre-softmax logits); unchanged if the output is not a Softmax."""
    import onnx

    final = model.graph.output[0].name
    for node in model.graph.node:
        if node.op_type == "Softmax" and node.output[0] == final:
            inferred = onnx.shape_inference.infer_shapes(model)
            info = [v for v in inferred.graph.value_info if v.name == node.input[0]]
            model.graph.output.extend(info)
            break
    return model


# (op_type, input position) -> role of the value fed there
_ROLE_OF_INPUT = {("Conv", 1): "kernel", ("Gemm", 1): "dense", ("MatMul", 1): "dense",
                  ("BatchNormalization", 1): "scale", ("BatchNormalization", 4): "variance",
                  ("Mul", 1): "scale"}


def _roles(graph) -> dict:
    roles = {}
    for node in graph.node:
        for position, name in enumerate(node.input):
            role = _ROLE_OF_INPUT.get((node.op_type, position))
            if role is not None:
                roles.setdefault(name, role)
                continue
            # a value reaching Mul/Add through Unsqueeze (DenseNet's scale and shift)
            roles.setdefault(name, "bias")
        if node.op_type == "Unsqueeze" and node.input:
            roles[node.input[0]] = "pending"
    # an Unsqueeze input takes the role of what its output feeds
    for node in graph.node:
        if node.op_type == "Unsqueeze" and node.input:
            roles[node.input[0]] = "scale" if roles.get(node.output[0]) == "scale" else "bias"
    return roles


def _draw(rng, shape, role) -> np.ndarray:
    size = int(np.prod(shape)) if shape else 1
    if role == "kernel" and len(shape) >= 2:
        fan_in = size // shape[0]
        value = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
    elif role == "dense" and len(shape) == 2:
        value = rng.standard_normal(shape) * np.sqrt(1.0 / min(shape))
    elif role == "variance":
        value = rng.uniform(0.5, 1.5, shape)
    elif role == "scale":  # below 1 so residual sums (ResNet, ShuffleNet) stay O(1)
        value = rng.uniform(0.2, 0.5, shape)
    else:
        value = rng.standard_normal(shape) * 0.1
    return value.astype(np.float32)

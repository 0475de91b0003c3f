"""ONNX import and export: ``graphc.onnx.load`` and ``graphc.onnx.save``.

Needs the ``onnx`` package (``pip install graphc[onnx]``).

>>> import graphc.onnx  # doctest: +SKIP
>>> g = graphc.onnx.load("resnet50.onnx")  # doctest: +SKIP
>>> logits, = g.run({"data": image})  # doctest: +SKIP
"""
from __future__ import annotations

from .errors import OnnxError, OnnxModelError, OnnxUnsupported


def _require_onnx():
    try:
        import onnx
    except ImportError:
        raise ImportError("graphc.onnx needs the 'onnx' package: pip install 'graphc[onnx]'") \
            from None
    return onnx


def load(path_or_model, input_shapes=None, *, device: str = "cpu", plan: str = "offsets",
         optimise=True, copy_outputs: bool = True, check: bool = False,
         fold_batchnorm: bool = True, fold_limit_bytes: int = 16 << 20,
         value_limit_bytes: int = 4 << 30):
    """Import an ONNX model (a path, bytes, or a ``ModelProto``) as a compiled
    :class:`~graphc.onnx.loaded.OnnxGraph`.

    ``input_shapes`` gives shapes for inputs with symbolic dimensions; without
    it such a model compiles at its first ``run``. ``fold_batchnorm`` folds each
    inference BatchNormalization into the Conv that feeds it, or into the constant
    matrix of a MatMul that feeds it (through a Flatten keeping the last axis: a
    Linear layer and BatchNorm1d), exact up to rounding: one op fewer per layer.
    The other options are those of :func:`graphc.compile`.

    A model file is untrusted input: a few bytes can ask for terabytes. Values
    that depend only on constants are computed while importing, holding at most
    ``fold_limit_bytes`` (16 MiB) of such values at once; a larger one (a
    ``ConstantOfShape`` of a billion elements) is computed at run time instead,
    and one that only the import can compute (``Range``, ``EyeLike``) makes the
    model refused. No single value of the graph may take more than
    ``value_limit_bytes`` (4 GiB). Both are checked before anything is
    allocated; a model past them, or malformed in any other way, raises
    :class:`OnnxModelError` (or :class:`OnnxUnsupported`) naming the node. Raise
    the limits for a model you trust.

    Example::

        g = graphc.onnx.load("model.onnx")
        (probabilities,) = g.run({"data": np.zeros((1, 3, 224, 224), np.float32)})
        big = graphc.onnx.load("big.onnx", value_limit_bytes=16 << 30)
    """
    from .limits import ImportLimits
    from .loaded import OnnxGraph

    limits = ImportLimits(fold_limit_bytes=fold_limit_bytes,
                          value_limit_bytes=value_limit_bytes)
    model = read_model(path_or_model)
    return OnnxGraph(model, input_shapes, device=device, plan=plan, optimise=optimise,
                     copy_outputs=copy_outputs, check=check, fold_batchnorm=fold_batchnorm,
                     limits=limits)


def read_model(path_or_model):
    """A ``ModelProto`` from a path, bytes or a ``ModelProto``, checked by
    ``onnx.checker`` (a malformed model is an :class:`OnnxModelError`)."""
    onnx = _require_onnx()
    if isinstance(path_or_model, onnx.ModelProto):
        model = path_or_model
    else:
        try:
            if isinstance(path_or_model, (bytes, bytearray)):
                model = onnx.load_model_from_string(bytes(path_or_model))
            else:
                model = onnx.load(str(path_or_model))
        except FileNotFoundError:
            raise
        except Exception as exc:  # protobuf's DecodeError and friends
            raise OnnxModelError(f"onnx.load: {path_or_model!r} is not a readable ONNX "
                                 f"model: {exc}") from None
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        first = str(exc).strip().splitlines()[0]
        raise OnnxModelError(f"onnx.load: the model is not valid ONNX: {first}") from None
    return model


def save(graph, path, **options):
    """Export a graphc graph (an ``Executable`` or an ``OnnxGraph``) as an ONNX
    model file; see :func:`graphc.onnx.export.to_onnx` for the options.

    Example::

        graphc.onnx.save(graphc.compile(inputs=[x], outputs=[y]), "model.onnx")
    """
    from .export import save as _save

    return _save(graph, path, **options)


def supported_operators() -> list[str]:
    """The ONNX operator types graphc imports, sorted."""
    from .registry import CONVERTERS
    from . import ops  # noqa: F401

    return sorted(CONVERTERS)


__all__ = ["load", "save", "read_model", "supported_operators", "OnnxError",
           "OnnxModelError", "OnnxUnsupported"]

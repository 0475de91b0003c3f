"""One definition per op kind: :class:`OpDef`, and :func:`define`, which files its
facts into the table of the layer that owns each.

An op kind is declared once, next to the others of its family (``graphc/ops/<family>.py``),
as JAX declares a primitive with its rules side by side: the facts every layer may read
(:class:`~graphc.type.kinds.OpKind`: arity, family, reference function, in-place policy,
flags), its shape/dtype rule, its CPU kernel builder, its generated-code expression, its
gradient rule, its ONNX exporter and the public names it gets. :func:`define` files each
fact into the table of the layer that owns it, and each layer reads only its own table:

============  ================================================  =============================
fact          table                                             read by
============  ================================================  =============================
kind facts    ``graphc.type.kinds.KINDS``                       every layer
shape         ``graphc.shape.rules.RULES``                      ``infer``
kernel        ``graphc.engine.cpu_kernels.KERNELS``             ``build_kernel``
expr          ``graphc.engine.cuda_codegen.C_EXPRESSIONS``      the generated GPU kernels
numba         ``graphc.engine.numba_codegen.NUMBA_EXPRESSIONS`` the generated CPU kernels
generated     ``graphc.engine.cpu_kernels.GENERATED_KERNELS``   ``kernels="generated"``
grad          ``graphc.algodiff.rules.GRADIENTS`` (or           ``grad``, the tape
              ``NON_DIFFERENTIABLE``)
complex_grad  ``graphc.algodiff.rules.COMPLEX_GRADIENTS``       ``grad`` on complex values
onnx          ``graphc.onnx.export_ops.EXPORTERS`` (or          ``graphc.onnx.save``
              ``REFUSED``)
names         the operator layer's public-name tables           ``graphc.ndarray``, ``eager``
============  ================================================  =============================

This package sits above the engine and below nothing but the top-level modules:
it imports the layers to fill their tables, and no layer imports it (``graphc``'s
``__init__`` imports it first, so the tables are full before anything reads them).

>>> from graphc.ops import DEFINITIONS
>>> d = DEFINITIONS["exp"]
>>> d.family, d.reference, d.names, d.onnx_name
('unary', 'numpy.exp', ('exp',), 'Exp')
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Callable, Mapping, Optional

from ..algodiff import rules as _gradients
from ..engine import cpu_kernels as _kernels
from ..engine import cuda_codegen as _codegen
from ..engine import numba_codegen as _cpu_codegen
from ..onnx import export_ops as _exporters
from ..operator import generated as _names
from ..shape import rules as _shapes
from ..type.kinds import KINDS, OpKind

#: ``grad=`` of a kind that passes no gradient on (piecewise constant, integer-valued,
#: a leaf or a random draw)
NO_GRADIENT = "no gradient"


@dataclass(frozen=True)
class Refused:
    """``onnx=`` of a kind that cannot be exported, and why (said in the error)."""

    reason: str


#: ``onnx=`` of the leaves (``var``, ``const``): the exporter itself makes them graph
#: inputs and initializers
LEAF = Refused("a leaf: exported as a graph input or initializer")


@dataclass(frozen=True)
class OpDef(OpKind):
    """Every fact about one op kind (see the module docstring for who reads what): the
    :class:`~graphc.type.kinds.OpKind` facts (its fields come first), then these.

    ``shape(op, parents) -> (shape, dtype)``; ``kernel(op, ins, out, ctx) -> callable``;
    ``expr``: C expression templates per compute class (``"f"``, ``"i"``, ``"b"``; see
    :mod:`graphc.engine.cuda_codegen`), elementwise kinds only; ``numba``: the same
    expression in Python for the CPU's generated kernels (see
    :mod:`graphc.engine.numba_codegen`); ``generated``: a builder of a generated CPU
    kernel for a kind that is not elementwise, ``(op, ins, out, ctx, parallel) ->
    callable or None`` (see ``GENERATED_KERNELS``); ``grad(ns, op, inputs,
    output, g, needs=None) -> [gradient per input]`` or :data:`NO_GRADIENT`;
    ``complex_grad``: how ``grad`` serves complex values, ``"holomorphic"`` or
    ``"direct"`` (see ``graphc.algodiff.rules.COMPLEX_GRADIENTS``; ``None`` refuses them);
    ``onnx(ctx, op, ins, out) -> name``, the name of a one-to-one ONNX operator
    (``onnx_name``, exported by the family's generic exporter) or :class:`Refused`;
    ``names``: the public functions (``N.<name>``) that build it. ``smooth_on``: an
    interval of one-input values where the op is smooth (finite, differentiable), where
    the generic property tests sample it (``log``'s excludes 0).
    """

    shape: Optional[Callable] = None
    kernel: Optional[Callable] = None
    expr: Optional[Mapping] = None
    numba: Optional[Mapping] = None
    generated: Optional[Callable] = None
    grad: object = None
    complex_grad: Optional[str] = None
    onnx: object = None
    onnx_name: Optional[str] = None
    names: tuple = ()
    smooth_on: tuple = (-2.0, 2.0)

    def kind(self) -> OpKind:
        """The facts the type layer keeps (:class:`~graphc.type.kinds.OpKind`)."""
        shared = {f.name for f in fields(OpKind)}
        return OpKind(**{k: getattr(self, k) for k in shared})


#: kind name -> its definition, in the order defined
DEFINITIONS: dict[str, OpDef] = {}


def define(*definitions: OpDef) -> None:
    """Declare op kinds: file each fact of each definition into its layer's table.

    Example: ``define(unary("cbrt", grad=..., expr=math_expr("cbrt"), onnx=...))``
    """
    for d in definitions:
        if d.name in DEFINITIONS:
            raise ValueError(f"op kind {d.name!r} is defined twice")
        DEFINITIONS[d.name] = d
        KINDS[d.name] = d.kind()
        if d.shape is not None:
            _shapes.RULES[d.name] = d.shape
        if d.kernel is not None:
            _kernels.KERNELS[d.name] = d.kernel
        if d.expr is not None:
            _codegen.C_EXPRESSIONS[d.name] = d.expr
        if d.numba is not None:
            _cpu_codegen.NUMBA_EXPRESSIONS[d.name] = d.numba
        if d.generated is not None:
            _kernels.GENERATED_KERNELS[d.name] = d.generated
        if d.grad == NO_GRADIENT:
            _gradients.NON_DIFFERENTIABLE.add(d.name)
        elif d.grad is not None:
            _gradients.GRADIENTS[d.name] = d.grad
        if d.complex_grad is not None:
            if d.complex_grad not in (_gradients.HOLOMORPHIC, _gradients.DIRECT):
                raise ValueError(f"op kind {d.name!r}: complex_grad must be "
                                 f"{_gradients.HOLOMORPHIC!r} or {_gradients.DIRECT!r}, "
                                 f"got {d.complex_grad!r}")
            _gradients.COMPLEX_GRADIENTS[d.name] = d.complex_grad
        if isinstance(d.onnx, Refused):
            if d.onnx is not LEAF:
                _exporters.REFUSED[d.name] = d.onnx.reason
        elif d.onnx is not None:
            _exporters.EXPORTERS[d.name] = d.onnx
        for public in d.names:
            _names.install(public, d.name, d.family)

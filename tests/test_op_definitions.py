"""Every op kind is defined once (graphc/ops) and its facts reach every table that must
hold them: the type layer's KINDS, the shape rules, the CPU kernels, the generated-code
expressions, the gradient rules, the ONNX exporters and the public names."""
import numpy as np
import pytest
from gradcheck import check_gradient
from opcheck import check_op

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc.shape.dtypes import probe_dtype
from graphc.type.errors import DTypeError
from graphc.algodiff.rules import GRADIENTS, NON_DIFFERENTIABLE
from graphc.engine.cpu_kernels import KERNELS
from graphc.engine.cuda_codegen import C_EXPRESSIONS
from graphc.onnx.export_ops import EXPORTERS, REFUSED
from graphc.operator.generated import (BINARY_NAMES, HANDWRITTEN, REDUCTION_NAMES,
                                       UFUNC_NAMES, UNARY_NAMES)
from graphc.ops import DEFINITIONS, LEAF, NO_GRADIENT, OpDef, Refused, define
from graphc.shape.rules import RULES
from graphc.type.kinds import KINDS, is_elementwise, is_leaf, reference_function

ALL = sorted(DEFINITIONS)


def test_every_kind_has_one_definition():
    assert set(DEFINITIONS) == set(KINDS)
    for name, d in DEFINITIONS.items():
        assert d.name == name and KINDS[name] == d.kind()


@pytest.mark.parametrize("name", ALL)
def test_every_table_holds_the_definitions_facts(name):
    d = DEFINITIONS[name]
    assert RULES[name] is d.shape, "shape rule"
    if is_leaf(name):
        assert name not in KERNELS and d.onnx is LEAF
    else:
        assert KERNELS[name] is d.kernel and callable(d.kernel), "CPU kernel"
    assert (C_EXPRESSIONS.get(name) is d.expr) and (d.expr is not None) == is_elementwise(name), \
        "generated-code expression: every elementwise kind, and only those"
    if d.grad == NO_GRADIENT:
        assert name in NON_DIFFERENTIABLE and name not in GRADIENTS
    else:
        assert GRADIENTS[name] is d.grad and name not in NON_DIFFERENTIABLE, "gradient rule"
    if isinstance(d.onnx, Refused):
        assert name not in EXPORTERS and (d.onnx is LEAF or REFUSED[name] == d.onnx.reason)
    else:
        assert EXPORTERS[name] is d.onnx and name not in REFUSED, "ONNX exporter"


def test_no_table_knows_a_kind_without_a_definition():
    for table in (RULES, KERNELS, C_EXPRESSIONS, GRADIENTS, NON_DIFFERENTIABLE, EXPORTERS,
                  REFUSED):
        assert set(table) <= set(DEFINITIONS)


@pytest.mark.parametrize("name", [n for n in ALL if DEFINITIONS[n].names])
def test_public_names_exist_in_both_namespaces(name):
    for public in DEFINITIONS[name].names:
        owner_n, owner_e = (N.random, E.random) if public.startswith("random.") else (N, E)
        attr = public.split(".")[-1]
        assert callable(getattr(owner_n, attr)) and callable(getattr(owner_e, attr)), public
        assert name in (UNARY_NAMES.get(public), BINARY_NAMES.get(public),
                        REDUCTION_NAMES.get(public)) + HANDWRITTEN.get(public, ())


@pytest.mark.parametrize("public,kind", sorted({**UNARY_NAMES, **BINARY_NAMES}.items()))
def test_generated_elementwise_functions_build_their_kind(public, kind):
    arity = KINDS[kind].arity
    for dtypes in [(np.float64,) * arity, (np.int64,) * arity, (np.float64, np.int64)]:
        try:                 # the first operand dtypes the kind takes (shifts: integers)
            probe_dtype(kind, tuple(np.dtype(d) for d in dtypes[:arity]))
            break
        except (DTypeError, ValueError, TypeError, AttributeError):
            continue
    else:                    # no NumPy reference to ask (relu): floats
        dtypes = (np.float64,) * arity
    node = getattr(N, public)(*[N.var(f"x{i}", (3,), d) for i, d in enumerate(dtypes)])
    assert node.op.kind == kind
    assert UFUNC_NAMES[public] == public


@pytest.mark.parametrize("public,kind", sorted(REDUCTION_NAMES.items()))
def test_generated_reductions_build_their_kind(public, kind):
    assert getattr(N, public)(N.var("x", (2, 3)), axis=1).op.kind == kind


def test_flags_come_from_the_definitions():
    comparisons = {k for k, v in KINDS.items() if v.comparison}
    assert comparisons == {"equal", "not_equal", "less", "less_equal", "greater",
                           "greater_equal"}
    assert {k for k, v in KINDS.items() if v.logical} == {"logical_and", "logical_or",
                                                          "logical_xor", "logical_not"}


def test_a_kind_cannot_be_defined_twice():
    with pytest.raises(ValueError, match="defined twice"):
        define(OpDef("exp", "unary", 1))
    assert KINDS["exp"].reference == "numpy.exp"


def test_a_public_name_no_mixin_writes_is_refused():
    from graphc.operator.generated import install
    with pytest.raises(ValueError, match="no mixin"):
        install("no_such_function", "conv2d", "neural")


@pytest.mark.parametrize("call", [lambda x: N.sum(x, axis=3), lambda x: N.exp(np.array(["a"])),
                                  lambda x: N.add(x, np.array(["a"]))])
def test_generated_functions_locate_their_argument_errors(call):
    with pytest.raises(graphc.GraphcError) as caught:
        call(N.var("x", (2, 3)))
    assert caught.value.location is not None and "test_op_definitions.py" in str(caught.value)


# -- what every generated one-input function gets checked for, from its definition alone ----
#: the generated one-input functions under their kind's own name
GENERATED_UNARY = sorted(k for p, k in UNARY_NAMES.items() if p == k)


def _smooth_values(kind, dtype, seed=0, shape=(3, 4)):
    lo, hi = DEFINITIONS[kind].smooth_on
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)


@pytest.mark.parametrize("kind", [k for k in GENERATED_UNARY if DEFINITIONS[k].reference])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_generated_unary_matches_its_reference(kind, dtype):
    x = _smooth_values(kind, dtype)
    check_op(lambda M, a: getattr(M, kind)(a), reference_function(kind), x)


@pytest.mark.parametrize("kind", [k for k in GENERATED_UNARY
                                  if DEFINITIONS[k].grad not in (None, NO_GRADIENT)])
def test_every_differentiable_unary_matches_finite_differences(kind):
    check_gradient(lambda M, a: getattr(M, kind)(a), _smooth_values(kind, np.float64))


@pytest.mark.parametrize("kind", [k for k in GENERATED_UNARY
                                  if not isinstance(DEFINITIONS[k].onnx, Refused)])
def test_every_exportable_unary_matches_onnxruntime(kind):
    pytest.importorskip("onnxruntime")
    from onnx_reference import onnxruntime_run
    from graphc.onnx.export import to_onnx

    x = N.var("x", (3, 4), np.float32)
    exe = graphc.compile([x], getattr(N, kind)(x))
    X = _smooth_values(kind, np.float32)
    (got,) = onnxruntime_run(to_onnx(exe), {"x": X})
    np.testing.assert_allclose(got, exe.run(x=X), rtol=2e-6, atol=1e-7)

"""Shape and dtype rules of the NCHW neural ops, and the window geometry they
share with the kernels.

All of them take floating-point arrays of one dtype. Attributes arrive
normalised by the operator layer (``stride=(sh, sw)``,
``padding=((top, bottom), (left, right))``, ``dilation=(dh, dw)``, plain ints);
the rules check them again because a graph may also come from a file.

>>> import numpy as np
>>> from graphc.type import Op
>>> class A:
...     def __init__(self, shape): self.shape, self.dtype = shape, np.dtype("float32")
>>> op = Op.make("conv2d", stride=(2, 2), padding=((1, 1), (1, 1)), dilation=(1, 1), groups=1)
>>> conv2d_rule(op, [A((1, 3, 8, 8)), A((16, 3, 3, 3))])
((1, 16, 4, 4), dtype('float32'))
"""
from __future__ import annotations

from ..type.errors import DTypeError, ShapeError
from ..type.op import Op


# -- geometry shared with the kernels ------------------------------------------------
def conv_output_size(size: int, kernel: int, stride: int, pad: tuple, dilation: int) -> int:
    """Output length of a convolution along one axis (``-1`` when the kernel does
    not fit the padded input). Example: ``conv_output_size(5, 3, 2, (1, 1), 1) == 3``"""
    span = (kernel - 1) * dilation + 1
    padded = size + pad[0] + pad[1]
    return (padded - span) // stride + 1 if padded >= span else -1


def pool_output_size(size: int, kernel: int, stride: int, pad: tuple, ceil_mode: bool) -> int:
    """Output length of a pooling along one axis, as PyTorch: with ``ceil_mode`` a last
    partial window is kept unless it would start in the bottom/right padding.
    Example: ``pool_output_size(5, 2, 2, (0, 0), True) == 3``"""
    padded = size + pad[0] + pad[1]
    if padded < kernel:
        return -1
    if not ceil_mode:
        return (padded - kernel) // stride + 1
    out = -(-(padded - kernel) // stride) + 1
    if (out - 1) * stride >= size + pad[0]:
        out -= 1
    return out


def valid_range(out_size: int, size: int, stride: int, offset: int) -> tuple[int, int]:
    """Output indices ``o`` in ``[lo, hi)`` whose input index ``o * stride + offset``
    lies inside ``[0, size)``: the cells of one kernel tap that are not padding.
    Example: ``valid_range(4, 5, 2, -1) == (1, 3)``"""
    lo = max(0, -(offset // stride)) if offset < 0 else 0
    hi = min(out_size, (size - 1 - offset) // stride + 1) if size - 1 - offset >= 0 else 0
    return lo, max(lo, hi)



def first_full_tap(op, in_hw, out_hw) -> int:
    """The row-major index of the first kernel tap of the pooling ``op`` that reads a
    real (not padding) cell for every one of the ``out_hw`` windows over an ``in_hw``
    image, or -1: a pooling kernel may start from that tap's cells instead of
    combining them with an initial value.

    >>> from graphc.type import Op
    >>> op = Op.make("max_pool2d", kernel=(3, 3), stride=(2, 2), padding=((1, 1), (1, 1)),
    ...              ceil_mode=False)
    >>> first_full_tap(op, (8, 8), (4, 4))
    4
    """
    (kh, kw), (sh, sw), ((top, _), (left, _)) = op["kernel"], op["stride"], op["padding"]
    for t in range(kh * kw):
        i, j = divmod(t, kw)
        if (valid_range(out_hw[0], in_hw[0], sh, i - top) == (0, out_hw[0])
                and valid_range(out_hw[1], in_hw[1], sw, j - left) == (0, out_hw[1])):
            return t
    return -1

def same_padding(size: int, kernel: int, stride: int, dilation: int = 1) -> tuple[int, int]:
    """TensorFlow's "same" padding along one axis: ``ceil(size / stride)`` outputs,
    the odd pixel at the end. Example: ``same_padding(224, 7, 2) == (2, 3)``"""
    total = max((-(-size // stride) - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def pointwise(op, kernel) -> bool:
    """Whether a convolution of window ``kernel`` (kh, kw) with ``op``'s stride and
    padding is 1x1, stride 1 and unpadded: a GEMM over the pixels, which needs no
    im2col columns (its dilation is then moot).

    >>> pointwise(Op.make("conv2d", stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(2, 2),
    ...                   groups=1), (1, 1))
    True
    """
    return (tuple(kernel) == (1, 1) and op["stride"] == (1, 1)
            and op["padding"] == ((0, 0), (0, 0)))


# -- checks ------------------------------------------------------------------------------
def float_input(opname, parents):
    """The one floating-point dtype of ``parents``; a :class:`DTypeError` otherwise."""
    dtypes = [p.dtype for p in parents]
    for d in dtypes:
        if d.kind != "f":
            raise DTypeError(f"{opname}: expected floating-point arrays, got dtypes "
                             f"{tuple(str(x) for x in dtypes)}")
    if any(d != dtypes[0] for d in dtypes):
        raise DTypeError(f"{opname}: all arrays must have the same dtype, got "
                         f"{tuple(str(x) for x in dtypes)}")
    return dtypes[0]


def nchw(opname, what, shape) -> tuple:
    """``shape``, checked to be 4-D (N, C, H, W).

    >>> nchw("lrn", "the input", (1, 3, 8, 8))
    (1, 3, 8, 8)
    """
    _rank(opname, what, tuple(shape))
    return tuple(shape)


def _rank(opname, what, shape, ndim=4):
    if len(shape) != ndim:
        raise ShapeError(f"{opname}: {what} must be {ndim}-D (N, C, H, W), got shape {shape}")


def _geometry(opname, op, keys=("stride", "dilation")):
    """The (already normalised) window attributes, checked."""
    for key in keys:
        value = op[key]
        if len(value) != 2 or any(not isinstance(v, int) or v < 1 for v in value):
            raise ShapeError(f"{opname}: {key} must be two positive ints, got {value!r}")
    padding = op["padding"]
    if len(padding) != 2 or any(len(p) != 2 or any(not isinstance(v, int) or v < 0 for v in p)
                                for p in padding):
        raise ShapeError(f"{opname}: padding must be ((top, bottom), (left, right)) of "
                         f"non-negative ints, got {padding!r}")


def conv_output_shape(opname, x_shape, w_shape, op) -> tuple:
    """``(N, O, OH, OW)`` of ``conv2d`` with input ``x_shape``, kernel ``w_shape`` and the
    window attributes of ``op``; a :class:`ShapeError` naming ``opname`` otherwise.
    Example: ``conv_output_shape("conv2d", (1, 3, 8, 8), (4, 3, 3, 3), op)``"""
    _rank(opname, "the input", x_shape)
    if len(w_shape) != 4:
        raise ShapeError(f"{opname}: the kernel must be 4-D (O, C/groups, kh, kw), got shape "
                         f"{w_shape}")
    _geometry(opname, op)
    groups = op["groups"]
    n, c, h, w = x_shape
    o, cg, kh, kw = w_shape
    if not isinstance(groups, int) or groups < 1:
        raise ShapeError(f"{opname}: groups must be a positive int, got {groups!r}")
    if c % groups or o % groups:
        raise ShapeError(f"{opname}: groups={groups} must divide the input channels and the "
                         f"output channels; input shape {x_shape}, kernel shape {w_shape}")
    if c // groups != cg:
        raise ShapeError(f"{opname}: the input of shape {x_shape} has {c} channels, so the "
                         f"kernel's axis 1 must be {c} // groups ({groups}) = {c // groups}; "
                         f"got kernel shape {w_shape}")
    if kh < 1 or kw < 1:
        raise ShapeError(f"{opname}: the kernel window must be at least 1x1, got kernel shape "
                         f"{w_shape}")
    (sh, sw), (dh, dw), (ph, pw) = op["stride"], op["dilation"], op["padding"]
    oh = conv_output_size(h, kh, sh, ph, dh)
    ow = conv_output_size(w, kw, sw, pw, dw)
    if oh < 1 or ow < 1:
        raise ShapeError(f"{opname}: the kernel window {(kh, kw)} (dilation {(dh, dw)}) is "
                         f"larger than the padded input {(h + sum(ph), w + sum(pw))}; input "
                         f"shape {x_shape}, kernel shape {w_shape}, padding {op['padding']}")
    return n, o, oh, ow


def pool_output_shape(opname, x_shape, op) -> tuple:
    """``(N, C, OH, OW)`` of a pooling of ``x_shape`` with the attributes of ``op``;
    every window must hold at least one cell of the input.
    Example: ``pool_output_shape("max_pool2d", (1, 3, 8, 8), op)``"""
    _rank(opname, "the input", x_shape)
    _geometry(opname, op, ("stride", "kernel"))
    n, c, h, w = x_shape
    (kh, kw), (sh, sw), (ph, pw) = op["kernel"], op["stride"], op["padding"]
    ceil_mode = op["ceil_mode"]
    oh = pool_output_size(h, kh, sh, ph, ceil_mode)
    ow = pool_output_size(w, kw, sw, pw, ceil_mode)
    if oh < 1 or ow < 1:
        raise ShapeError(f"{opname}: the window {(kh, kw)} is larger than the padded input "
                         f"{(h + sum(ph), w + sum(pw))}; input shape {x_shape}, padding "
                         f"{op['padding']}")
    if ph[0] >= kh or pw[0] >= kw or (oh - 1) * sh >= h + ph[0] or (ow - 1) * sw >= w + pw[0]:
        raise ShapeError(f"{opname}: padding {op['padding']} leaves a window {(kh, kw)} with "
                         f"no input cell (input shape {x_shape}, stride {(sh, sw)}); padding "
                         "must be smaller than the window")
    return n, c, oh, ow


def _declared_shape(opname, op, what):
    shape = op["shape"]
    if len(shape) != 4 or any(not isinstance(d, int) or d < 0 for d in shape):
        raise ShapeError(f"{opname}: the {what} shape must be 4 non-negative ints, got {shape!r}")
    return tuple(shape)


def _expect(opname, what, actual, expected, detail):
    if tuple(actual) != tuple(expected):
        raise ShapeError(f"{opname}: {what} has shape {tuple(actual)} but {detail} gives "
                         f"{tuple(expected)}")


# -- rules ---------------------------------------------------------------------------------
def conv2d_rule(op, parents):
    x, w = parents
    dtype = float_input("conv2d", parents)
    return conv_output_shape("conv2d", x.shape, w.shape, op), dtype


def conv2d_backward_input_rule(op, parents):
    g, w = parents
    name = "conv2d_backward_input"
    dtype = float_input(name, parents)
    shape = _declared_shape(name, op, "input")
    expected = conv_output_shape(name, shape, w.shape, op)
    _expect(name, "the gradient", g.shape, expected,
            f"conv2d of an input of shape {shape} with a kernel of shape {w.shape}")
    return shape, dtype


def conv2d_backward_kernel_rule(op, parents):
    x, g = parents
    name = "conv2d_backward_kernel"
    dtype = float_input(name, parents)
    shape = _declared_shape(name, op, "kernel")
    expected = conv_output_shape(name, x.shape, shape, op)
    _expect(name, "the gradient", g.shape, expected,
            f"conv2d of an input of shape {x.shape} with a kernel of shape {shape}")
    return shape, dtype


def pool_rule(op, parents):
    dtype = float_input(op.kind, parents)
    return pool_output_shape(op.kind, parents[0].shape, op), dtype


def max_pool2d_backward_rule(op, parents):
    x, y, g = parents
    name = "max_pool2d_backward"
    dtype = float_input(name, parents)
    expected = pool_output_shape(name, x.shape, op)
    detail = f"max_pool2d of an input of shape {x.shape}"
    _expect(name, "the pooled output", y.shape, expected, detail)
    _expect(name, "the gradient", g.shape, expected, detail)
    return x.shape, dtype


def avg_pool2d_backward_rule(op, parents):
    (g,) = parents
    name = "avg_pool2d_backward"
    dtype = float_input(name, parents)
    shape = _declared_shape(name, op, "input")
    _expect(name, "the gradient", g.shape, pool_output_shape(name, shape, op),
            f"avg_pool2d of an input of shape {shape}")
    return shape, dtype


def _lrn_checks(opname, op, x):
    if len(x.shape) < 2:
        raise ShapeError(f"{opname}: the input needs a channel axis 1, got shape {x.shape}")
    size = op["size"]
    if not isinstance(size, int) or size < 1:
        raise ShapeError(f"{opname}: size must be a positive int, got {size!r}")


def lrn_rule(op, parents):
    dtype = float_input("lrn", parents)
    _lrn_checks("lrn", op, parents[0])
    return parents[0].shape, dtype


def lrn_backward_rule(op, parents):
    x, g = parents
    dtype = float_input("lrn_backward", parents)
    _lrn_checks("lrn_backward", op, x)
    _expect("lrn_backward", "the gradient", g.shape, x.shape, "the input")
    return x.shape, dtype


def _kernel_op(op):
    """The conv2d op an im2col/col2im op takes its geometry from (kernel shape aside)."""
    return Op.make("conv2d", stride=op["stride"], padding=op["padding"],
                   dilation=op["dilation"], groups=1)


def columns_shape(opname, x_shape, op) -> tuple:
    """The shape of the columns of ``x_shape``: ``(N, C*kh*kw, OH*OW)`` for
    ``layout="batch"``, ``(C*kh*kw, N*OH*OW)`` for ``layout="flat"``.
    Example: ``columns_shape("im2col", (2, 3, 8, 8), im2col_op)``"""
    if len(x_shape) != 4:
        raise ShapeError(f"{opname}: the input must be 4-D (N, C, H, W), got shape {x_shape}")
    kh, kw = op["kernel"]
    n, _, oh, ow = conv_output_shape(opname, x_shape, (1, x_shape[1], kh, kw), _kernel_op(op))
    k = x_shape[1] * kh * kw
    return (k, n * oh * ow) if op.get("layout") == "flat" else (n, k, oh * ow)


def im2col_rule(op, parents):
    dtype = float_input("im2col", parents)
    return columns_shape("im2col", parents[0].shape, op), dtype


def col2im_rule(op, parents):
    dtype = float_input("col2im", parents)
    shape = _declared_shape("col2im", op, "image")
    _expect("col2im", "the columns", parents[0].shape, columns_shape("col2im", shape, op),
            f"an image of shape {shape} with window {op['kernel']}")
    return shape, dtype


__all__ = ["float_input", "nchw", "pointwise", "conv_output_size", "pool_output_size", "valid_range",
           "same_padding", "conv_output_shape", "pool_output_shape", "columns_shape",
           "conv2d_rule", "conv2d_backward_input_rule", "conv2d_backward_kernel_rule",
           "pool_rule", "max_pool2d_backward_rule", "avg_pool2d_backward_rule", "lrn_rule",
           "lrn_backward_rule", "im2col_rule", "col2im_rule"]

"""Converters of ONNX's recurrent layers ``RNN``, ``GRU`` and ``LSTM``.

The sequence length is static, so each layer unrolls into its time steps: one
matmul projects the whole input sequence onto the gates at once, then each step
adds ``H @ R^T`` and applies the gate activations. Every direction
(``forward``, ``reverse``, ``bidirectional``), ``layout``, custom
``activations`` (with ``activation_alpha``/``activation_beta``), ``clip``,
LSTM's peepholes and ``input_forget``, GRU's ``linear_before_reset`` and
``sequence_lens`` (steps past a sequence's length keep its state and output
zeros, as onnxruntime does) are supported. Being composed of graphc's own
operations, the unrolled layer gets gradients, fusion and memory planning.

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["RNN"]
>>> x, w, r = np.ones((2, 1, 3), np.float32), np.zeros((1, 4, 3), np.float32), \\
...     np.zeros((1, 4, 4), np.float32)
>>> ctx = NodeContext(NodeContext.for_test("RNN", []).node, 22, [x, w, r], {"hidden_size": 4},
...                   spec)
>>> [np.shape(v) for v in spec.fn(ctx)]
[(2, 1, 1, 4), (1, 1, 4)]
"""
from __future__ import annotations

import numpy as np

from ..registry import converter

_COMMON = {"activation_alpha": None, "activation_beta": None, "activations": None,
           "clip": None, "direction": "forward", "hidden_size": None, "layout": 0}


# -- activations ------------------------------------------------------------------------------
def _affine(ns, x, a, b):
    return ns.add(ns.multiply(x, a), b)


def _scaled_tanh(ns, x, a, b):
    return ns.multiply(ns.tanh(ns.multiply(x, b)), a)


def _hard_sigmoid(ns, x, a, b):
    return ns.clip(_affine(ns, x, a, b), 0, 1)


def _leaky_relu(ns, x, a, b):
    return ns.where(ns.greater_equal(x, 0), x, ns.multiply(x, a))


def _thresholded_relu(ns, x, a, b):
    return ns.where(ns.greater(x, a), x, ns.multiply(x, 0))


def _elu(ns, x, a, b):
    return ns.where(ns.greater_equal(x, 0), x, ns.multiply(ns.expm1(x), a))


def _softsign(ns, x, a, b):
    return ns.divide(x, ns.add(ns.abs(x), 1))


def _softplus(ns, x, a, b):
    return ns.log1p(ns.exp(x))


#: name (lower case) -> (fn(ns, x, alpha, beta), default alpha, default beta); a default
#: of None means the function takes no such parameter
ACTIVATIONS = {
    "relu": (lambda ns, x, a, b: ns.relu(x), None, None),
    "tanh": (lambda ns, x, a, b: ns.tanh(x), None, None),
    "sigmoid": (lambda ns, x, a, b: ns.sigmoid(x), None, None),
    "affine": (_affine, 1.0, 0.0),
    "leakyrelu": (_leaky_relu, 0.01, None),
    "thresholdedrelu": (_thresholded_relu, 1.0, None),
    "scaledtanh": (_scaled_tanh, 1.0, 1.0),
    "hardsigmoid": (_hard_sigmoid, 0.2, 0.5),
    "elu": (_elu, 1.0, None),
    "softsign": (_softsign, None, None),
    "softplus": (_softplus, None, None),
}


def _activations(ctx, defaults, directions):
    """One list of ``fn(x)`` per direction; alphas and betas are taken in order by
    the functions that use them (as onnxruntime reads them)."""
    names = ctx.attr("activations")
    names = list(defaults) * directions if names is None else list(names)
    if len(names) != len(defaults) * directions:
        raise ctx.invalid(f"activations {names} must name {len(defaults)} function(s) per "
                          f"direction ({directions} direction(s))")
    alphas = list(ctx.attr("activation_alpha") or [])
    betas = list(ctx.attr("activation_beta") or [])
    ns, dtype = ctx.ns, np.dtype(ctx.dtype(0))
    out = []
    for name in names:
        entry = ACTIVATIONS.get(str(name).lower())
        if entry is None:
            raise ctx.unsupported(f"activation {name!r} is not supported (known: "
                                  f"{sorted(ACTIVATIONS)})")
        fn, alpha, beta = entry
        if alpha is not None and alphas:
            alpha = alphas.pop(0)
        if beta is not None and betas:
            beta = betas.pop(0)
        a = None if alpha is None else dtype.type(alpha)
        b = None if beta is None else dtype.type(beta)
        out.append(lambda x, fn=fn, a=a, b=b: fn(ns, x, a, b))
    per = len(defaults)
    return [out[d * per:(d + 1) * per] for d in range(directions)]


# -- the shared unrolling -----------------------------------------------------------------------
class _Layer:
    """The inputs of one recurrent node, in ``layout=0`` order, split by direction."""

    def __init__(self, ctx, gates: int):
        self.ctx, self.ns = ctx, ctx.ns
        x = ctx.input(0)
        if len(ctx.shape(0)) != 3:
            raise ctx.invalid(f"X must be 3-D, got shape {ctx.shape(0)}")
        self.dtype = np.dtype(ctx.dtype(0))
        self.layout = int(ctx.attr("layout"))
        if self.layout not in (0, 1):
            raise ctx.invalid(f"layout must be 0 or 1, got {self.layout}")
        if self.layout:
            x = self.ns.swapaxes(x, 0, 1)
        self.x = x
        self.steps, self.batch, self.inputs = np.shape(x)
        direction = ctx.attr("direction")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise ctx.invalid(f"direction must be forward, reverse or bidirectional, got "
                              f"{direction!r}")
        self.direction = direction
        self.directions = 2 if direction == "bidirectional" else 1
        w_shape, r_shape = ctx.shape(1), ctx.shape(2)
        hidden = r_shape[-1] if len(r_shape) == 3 else None
        given = ctx.attr("hidden_size")
        if given is not None and hidden != int(given):
            raise ctx.invalid(f"hidden_size {given} does not match R's shape {r_shape}")
        self.hidden = hidden
        d, h = self.directions, hidden
        if w_shape != (d, gates * h, self.inputs) or r_shape != (d, gates * h, h):
            raise ctx.invalid(f"W {w_shape} and R {r_shape} must have shapes "
                              f"{(d, gates * h, self.inputs)} and {(d, gates * h, h)}")
        self.gates = gates
        clip = ctx.attr("clip")
        self.clip = None if clip is None else float(clip)
        self.lengths = self._lengths()

    def optional(self, i, shape, what):
        """Optional input ``i`` checked against ``shape``; ``None`` when omitted."""
        value = self.ctx.input(i, optional=True)
        if value is not None and tuple(np.shape(value)) != tuple(shape):
            raise self.ctx.invalid(f"{what} must have shape {tuple(shape)}, got "
                                   f"{tuple(np.shape(value))}")
        return value

    def initial(self, i, what):
        """An initial state ``(directions, batch, hidden)``, zeros when omitted."""
        d, b, h = self.directions, self.batch, self.hidden
        value = self.optional(i, (b, d, h) if self.layout else (d, b, h), what)
        if value is None:
            return np.zeros((d, b, h), self.dtype)
        return self.ns.swapaxes(value, 0, 1) if self.layout else value

    def _lengths(self):
        """``sequence_lens`` as a ``(batch, 1)`` value, or ``None`` when every sequence
        is known to be full length."""
        lengths = self.optional(4, (self.batch,), "sequence_lens")
        if lengths is None:
            return None
        if isinstance(lengths, np.ndarray):
            if (lengths < 0).any() or (lengths > self.steps).any():
                raise self.ctx.invalid(f"sequence_lens {lengths.tolist()} must lie in "
                                       f"[0, {self.steps}]")
            if (lengths == self.steps).all():
                return None
        return self.ns.reshape(lengths, (self.batch, 1))

    def pre(self, value, bias):
        """A gate's pre-activation, clipped when ``clip`` is given."""
        ns = self.ns
        value = value if bias is None else ns.add(value, bias)
        return value if self.clip is None else ns.clip(value, -self.clip, self.clip)

    def projected(self, w, d):
        """``X @ W[d]^T`` for every step at once: ``(steps, batch, gates * hidden)``."""
        ns = self.ns
        return ns.matmul(self.x, ns.transpose(ns.getitem(w, d), (1, 0)))

    def run(self, step, states):
        """Unroll ``step(d, t, states) -> states`` (the first state is the output H)
        over time for each direction; returns ``(Y, final states...)`` in the node's
        layout."""
        ns = self.ns
        ys, finals = [], []
        for d in range(self.directions):
            backward = self.direction == "reverse" or d == 1
            order = range(self.steps - 1, -1, -1) if backward else range(self.steps)
            current = [ns.getitem(s, d) for s in states]
            outputs = [None] * self.steps
            for t in order:
                new = step(d, t, current)
                if self.lengths is not None:
                    inside = ns.less(t, self.lengths)
                    new = [ns.where(inside, n, c) for n, c in zip(new, current)]
                    outputs[t] = ns.where(inside, new[0], self.dtype.type(0))
                else:
                    outputs[t] = new[0]
                current = new
            if self.steps:
                ys.append(ns.stack(outputs, axis=0))
            else:
                ys.append(np.zeros((0, self.batch, self.hidden), self.dtype))
            finals.append(current)
        y = ns.stack(ys, axis=1)  # (steps, directions, batch, hidden)
        ends = [ns.stack([f[i] for f in finals], axis=0) for i in range(len(states))]
        if self.layout:
            y = ns.transpose(y, (2, 0, 1, 3))
            ends = [ns.swapaxes(e, 0, 1) for e in ends]
        return (y, *ends)


def _bias(layer, gates):
    """``B`` split into the input and recurrent halves' sum per gate, per direction
    (``None`` when omitted): ``[d][g]`` of shape ``(hidden,)``."""
    d, h = layer.directions, layer.hidden
    b = layer.optional(3, (d, 2 * gates * h), "B")
    if b is None:
        return None
    ns = layer.ns
    return [[(ns.getitem(b, (k, slice(g * h, (g + 1) * h))),
              ns.getitem(b, (k, slice((gates + g) * h, (gates + g + 1) * h))))
             for g in range(gates)] for k in range(d)]


def _gate(ns, projected, t, g, h):
    return ns.getitem(projected, (t, slice(None), slice(g * h, (g + 1) * h)))


def _rows(ns, matrix, g, h):
    """Rows ``g*h:(g+1)*h`` of ``matrix`` transposed: the gate's ``R^T``."""
    return ns.transpose(ns.getitem(matrix, (slice(g * h, (g + 1) * h), slice(None))), (1, 0))


@converter("RNN", attrs=_COMMON)
def rnn(ctx):
    layer, ns = _Layer(ctx, 1), ctx.ns
    h = layer.hidden
    fns = _activations(ctx, ["Tanh"], layer.directions)
    biases = _bias(layer, 1)
    w, r = ctx.input(1), ctx.input(2)
    projected = [layer.projected(w, d) for d in range(layer.directions)]
    recurrent = [ns.transpose(ns.getitem(r, d), (1, 0)) for d in range(layer.directions)]

    def step(d, t, states):
        bias = None if biases is None else ns.add(*biases[d][0])
        pre = ns.add(_gate(ns, projected[d], t, 0, h), ns.matmul(states[0], recurrent[d]))
        return [fns[d][0](layer.pre(pre, bias))]

    return layer.run(step, [layer.initial(5, "initial_h")])


@converter("GRU", attrs={**_COMMON, "linear_before_reset": 0})
def gru(ctx):
    layer, ns = _Layer(ctx, 3), ctx.ns
    h = layer.hidden
    fns = _activations(ctx, ["Sigmoid", "Tanh"], layer.directions)
    biases = _bias(layer, 3)
    linear_before_reset = bool(ctx.attr("linear_before_reset"))
    w, r = ctx.input(1), ctx.input(2)
    projected = [layer.projected(w, d) for d in range(layer.directions)]
    rs = [ns.getitem(r, d) for d in range(layer.directions)]
    zr = [ns.transpose(ns.getitem(m, (slice(0, 2 * h), slice(None))), (1, 0)) for m in rs]
    rh = [_rows(ns, m, 2, h) for m in rs]

    def step(d, t, states):
        (state,) = states
        f, g = fns[d]
        b = biases[d] if biases is not None else None
        hidden_zr = ns.matmul(state, zr[d])
        gates = []
        for k in (0, 1):  # z, r
            pre = ns.add(_gate(ns, projected[d], t, k, h),
                         ns.getitem(hidden_zr, (slice(None), slice(k * h, (k + 1) * h))))
            gates.append(f(layer.pre(pre, None if b is None else ns.add(*b[k]))))
        z, reset = gates
        x_h = _gate(ns, projected[d], t, 2, h)
        if linear_before_reset:
            recurrent = ns.matmul(state, rh[d])
            if b is not None:
                recurrent = ns.add(recurrent, b[2][1])
            pre = ns.add(x_h, ns.multiply(reset, recurrent))
            candidate = g(layer.pre(pre, None if b is None else b[2][0]))
        else:
            pre = ns.add(x_h, ns.matmul(ns.multiply(reset, state), rh[d]))
            candidate = g(layer.pre(pre, None if b is None else ns.add(*b[2])))
        # (1 - z) * h~ + z * H, written to keep one rounding per term
        return [ns.add(ns.multiply(ns.subtract(layer.dtype.type(1), z), candidate),
                       ns.multiply(z, state))]

    return layer.run(step, [layer.initial(5, "initial_h")])


@converter("LSTM", attrs={**_COMMON, "input_forget": 0})
def lstm(ctx):
    layer, ns = _Layer(ctx, 4), ctx.ns
    h, d_count = layer.hidden, layer.directions
    fns = _activations(ctx, ["Sigmoid", "Tanh", "Tanh"], d_count)
    biases = _bias(layer, 4)
    peepholes = layer.optional(7, (d_count, 3 * h), "P")
    input_forget = bool(ctx.attr("input_forget"))
    w, r = ctx.input(1), ctx.input(2)
    projected = [layer.projected(w, d) for d in range(d_count)]
    recurrent = [ns.transpose(ns.getitem(r, d), (1, 0)) for d in range(d_count)]

    def peephole(d, k):
        if peepholes is None:
            return None
        return ns.getitem(peepholes, (d, slice(k * h, (k + 1) * h)))

    def step(d, t, states):
        state, cell = states
        f, g, out_fn = fns[d]
        b = biases[d] if biases is not None else None
        hidden = ns.matmul(state, recurrent[d])

        def pre(k, peep=None, c=None):  # gates in W's order: i, o, f, c
            value = ns.add(_gate(ns, projected[d], t, k, h),
                           ns.getitem(hidden, (slice(None), slice(k * h, (k + 1) * h))))
            if peep is not None:
                value = ns.add(value, ns.multiply(peep, c))
            return layer.pre(value, None if b is None else ns.add(*b[k]))

        forget = f(pre(2, peephole(d, 2), cell))
        if input_forget:
            inp = ns.subtract(layer.dtype.type(1), forget)
        else:
            inp = f(pre(0, peephole(d, 0), cell))
        candidate = g(pre(3))
        new_cell = ns.add(ns.multiply(forget, cell), ns.multiply(inp, candidate))
        out = f(pre(1, peephole(d, 1), new_cell))
        return [ns.multiply(out, out_fn(new_cell)), new_cell]

    return layer.run(step, [layer.initial(5, "initial_h"), layer.initial(6, "initial_c")])

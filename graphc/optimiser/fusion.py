"""Rewrites that merge ops into fewer, larger nodes: transposes folded into
matmul, fused multiply-add, Owl's AdaGrad pattern, and general elementwise
chains.

A chain of elementwise ops whose intermediates each have one consumer (and
the chain's shape and dtype) becomes one ``fused`` node: its program, shape
and dtype, nothing about how it runs. Every instruction yields the running
value (the *accumulator*), taking the place of the absorbed parent, so
intermediates need no memory. An instruction may read the accumulator only in
a position where its op may overwrite its input (``where`` only in its last
operand), so a kernel may compute the program in its output buffer. Where
several such branches meet (``gx * gx + gy * gy``), the others run first and
leave their values in registers (:mod:`graphc.type.program`): one pass over
memory for the whole expression.

>>> import graphc.ndarray as N
>>> from graphc.optimiser.rewriter import rewrite
>>> x, y = N.var("x", (4,)), N.var("y", (4,))
>>> out = rewrite([N.tanh(N.exp(x) * y + 1.0)], FUSE_ELEMENTWISE.rewrite_node)[0][0]
>>> out.op.kind, len(out.op["program"])
('fused', 4)
"""
from __future__ import annotations

from ..type.kinds import MIN_INPLACE_SIZE, is_elementwise, may_overwrite
from ..type.op import Op
from .build import make
from .pattern import Pat, Scalar
from .rewriter import Pass, Rule

A, B, C = Pat(name="a"), Pat(name="b"), Pat(name="c")


# -- transposes into matmul ------------------------------------------------------
def _swaps_last_two(n) -> bool:
    axes = n.op["axes"]
    k = len(axes)
    return k >= 2 and axes == tuple(range(k - 2)) + (k - 1, k - 2)


def _fold_transpose(position):
    flag = ("trans_a", "trans_b")[position]

    def build(b, node):
        parents = list(node.parents)
        t = parents[position]
        if t.op.kind != "transpose" or not _swaps_last_two(t):
            return None
        parents[position] = t.parents[0]
        attrs = node.op.params()
        attrs[flag] = not attrs.get(flag, False)
        return make(node, Op.make("matmul", **attrs), parents)
    return build


_T = Pat("transpose", test=_swaps_last_two)
MATMUL_TRANSPOSE = Pass("matmul_transpose", [
    Rule("transpose_a_into_matmul", Pat("matmul", (_T, B)), _fold_transpose(0)),
    Rule("transpose_b_into_matmul", Pat("matmul", (A, _T)), _fold_transpose(1)),
], produces=frozenset({"matmul"}),
   doc="Dot(Transpose(a), b) -> a GEMM flag: no transposed copy")


# -- fused multiply-add ----------------------------------------------------------
def _fma(b, node):
    product = b["product"]
    if product.shape != node.shape or product.dtype != node.dtype or node.size <= 1:
        return None
    return make(node, Op.make("fma"), [b["a"], b["b"], b["c"]])


FMA = Pass("fma", [
    Rule("fma", Pat("add", (Pat("multiply", (A, B), name="product", single_use=True), C),
                    commutative=True), _fma),
], produces=frozenset({"fma"}),
   doc="a*b + c, the product used once -> one node without a temporary")


# -- AdaGrad / RMSprop -------------------------------------------------------------
def _scalar(node) -> float:
    return float(node.value.reshape(-1)[0])


def _inverse_root(b, node, rate):
    """``fused_adagrad`` computes ``rate / sqrt(v + eps)`` in ``v``'s dtype, the
    unfused ops one for one (add, sqrt, divide; the constants in that dtype)."""
    v = b["v"]
    if v.shape != node.shape and "g" not in b or v.dtype != node.dtype:
        return None
    scaled = make(node, Op.make("fused_adagrad", lr=rate, eps=_scalar(b["eps"])), [v])
    if "g" in b:
        if scaled.shape != node.shape and b["g"].shape != node.shape:
            return None
        return make(node, Op.make("multiply"), [b["g"], scaled])
    return scaled if scaled.shape == node.shape else None


def _not_scalar_constant(node) -> bool:
    return node.op.kind != "const" or node.value.size != 1


_ROOT = Pat("sqrt", (Pat("add", (Pat(name="v"), Scalar("eps")), commutative=True,
                         single_use=True),), single_use=True)
ADAGRAD = Pass("adagrad", [
    Rule("adagrad", Pat("divide", (Scalar("lr"), _ROOT)),
         lambda b, n: _inverse_root(b, n, _scalar(b["lr"]))),
], produces=frozenset({"fused_adagrad"}),
   doc="lr / sqrt(v + eps) (any constant lr, eps) -> Fused_Adagrad, as in Owl (the same "
       "three operations in one node; optimisers written g * (lr / sqrt(v + eps)) get it)")

#: ``g / sqrt(v + eps) -> g * (1 / sqrt(v + eps))``: a multiply by a reciprocal rounds
#: twice where the division rounds once (a batch norm's ``(x - mean) / sqrt(var + eps)``
#: then differs from NumPy in the last bit), so these belong to the ``fast_math`` pass
RECIPROCAL_RULES = [
    Rule("adagrad_scaled", Pat("divide", (Pat("multiply", (Pat(name="g"), Scalar("lr")),
                                              commutative=True, single_use=True), _ROOT)),
         lambda b, n: _inverse_root(b, n, _scalar(b["lr"]))),
    Rule("adagrad_unscaled", Pat("divide", (Pat(name="g", test=_not_scalar_constant), _ROOT)),
         lambda b, n: _inverse_root(b, n, 1.0)),
]


# -- elementwise chains ---------------------------------------------------------------
#: longest program of one fused node: a 100,000-op chain becomes many fused
#: nodes rather than one whose program is rebuilt (quadratically) at each step
MAX_PROGRAM = 32


def _elementwise(node) -> bool:
    return is_elementwise(node.op.kind)


def _program_of(node):
    """(instructions, inputs) of an elementwise node: its own program if fused."""
    if node.op.kind == "fused":
        return list(node.op["program"]), list(node.parents)
    args = []
    inputs = []
    for p in node.parents:
        index = next((i for i, q in enumerate(inputs) if q is p), None)
        if index is None:
            index = len(inputs)
            inputs.append(p)
        args.append(("in", index))
    return [(node.op, tuple(args))], inputs


def _absorbable(p, node, ctx) -> bool:
    """Whether ``node`` may take ``p``'s program into its own: an elementwise value of
    its shape and dtype that nothing else reads."""
    return (_elementwise(p) and p.shape == node.shape and p.dtype == node.dtype
            and ctx.uses(p) == sum(q is p for q in node.parents))


def _accumulated(node, ctx):
    """The position of the parent ``node`` computes over (the accumulator), or None."""
    for position, p in enumerate(node.parents):
        if (_absorbable(p, node, ctx) and ctx.uses(p) == 1
                and may_overwrite(node.op, position)):
            return position
    return None


def _length(p) -> int:
    return len(p.op["program"]) if p.op.kind == "fused" else 1


def _placed(part, part_inputs, offset: int, index_of, registers: dict) -> list:
    """``part`` (a program reading ``part_inputs``) placed ``offset`` instructions into
    the fused program: a parent computed into a register there (``registers``: id ->
    instruction) read as that register, any other as the fused node's input
    ``index_of(parent)``, a register of its own shifted by ``offset``."""
    numbers = [None if id(r) in registers else index_of(r) for r in part_inputs]

    def moved(a):
        if a[0] == "in":
            number = numbers[a[1]]
            return ("in", number) if number is not None else \
                ("reg", registers[id(part_inputs[a[1]])])
        return ("reg", a[1] + offset) if a[0] == "reg" else a
    return [(op, tuple(moved(a) for a in args)) for op, args in part]


def _shared(node, absorbed, ctx, room: int) -> list:
    """The elementwise parents of ``absorbed`` (and of ``node``) that only these read,
    more than once between them: an activation reading its input twice, ``x *
    clip(x + 3, 0, 6)`` or ``x * sigmoid(x)``, after a bias ``x = conv + b``. Each is
    computed first, into a register the others read, so the bias joins the
    activation's pass (within ``room`` more instructions)."""
    readers = [node] + absorbed
    shared, seen = [], {id(q) for q in absorbed}
    for q in absorbed:
        for r in q.parents:
            if id(r) in seen:
                continue
            seen.add(id(r))
            reads = sum(p is r for reader in readers for p in reader.parents)
            if (reads > 1 and _elementwise(r) and r.shape == node.shape
                    and r.dtype == node.dtype and ctx.uses(r) == reads
                    and _length(r) <= room):
                shared.append(r)
                room -= _length(r)
    return shared


def _fuse(node, ctx):
    # a fused node never absorbs further parents: its program would need a second buffer
    if not _elementwise(node) or node.op.kind == "fused" or node.size < MIN_INPLACE_SIZE:
        return None   # too small to be worth computing over its parent (type.kinds)
    position = _accumulated(node, ctx)
    if position is not None and _length(node.parents[position]) >= MAX_PROGRAM:
        return None
    # the other branches that meet here run first, each leaving its value in a register
    length = 1 + (_length(node.parents[position]) if position is not None else 0)
    branches = []
    for k, q in enumerate(node.parents):
        if (k != position and all(q is not b for b in branches) and _absorbable(q, node, ctx)
                and length + _length(q) <= MAX_PROGRAM):
            branches.append(q)
            length += _length(q)
    if position is None and not branches:
        return None
    absorbed = branches + ([node.parents[position]] if position is not None else [])
    shared = _shared(node, absorbed, ctx, MAX_PROGRAM - length)
    program, inputs, results = [], [], {}

    def index_of(q):
        found = next((i for i, r in enumerate(inputs) if r is q), None)
        if found is None:
            inputs.append(q)
            found = len(inputs) - 1
        return found

    for q in shared + absorbed:
        part, part_inputs = _program_of(q)
        program += _placed(part, part_inputs, len(program), index_of, results)
        results[id(q)] = len(program) - 1
    args = tuple(("acc",) if k == position else
                 ("reg", results[id(q)]) if id(q) in results else ("in", index_of(q))
                 for k, q in enumerate(node.parents))
    program.append((node.op, args))
    # the program only: how its kernel runs (streamed or not) and what it may write
    # over are the engine's decisions (graphc.engine.strategy)
    op = Op.make("fused", program=tuple(program), shape=node.shape, dtype=node.dtype)
    return make(node, op, inputs)


FUSE_ELEMENTWISE = Pass("fuse_elementwise", function=_fuse, stage="fuse",
                        matches=is_elementwise, produces=frozenset({"fused"}),
                        doc="chains of elementwise ops with single-use intermediates -> one "
                            "node computed in one buffer")

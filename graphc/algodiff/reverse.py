"""Reverse-mode differentiation: walk from the loss back to the variables,
summing each value's gradient over its consumers and applying the rules.

:func:`backward` is written once over a small view of the graph (how to get a
node's parents, and the value a rule should see for a node), so it serves the
lazy graph (:func:`grad`, exported as ``N.grad``) and the eager tape
(:mod:`.tape`) alike. Only values that are floats (real or complex) and lie on
a path from a requested variable to the loss get gradients; the rest is pruned
before any rule runs, and a rule is told which of its inputs want one.

Complex values on the path (an FFT's spectrum, ``eig``'s eigenvalues) carry the
cotangent ``dL/dRe z + i dL/dIm z`` (PyTorch's convention: minus it is the
direction of steepest descent), so a real variable's gradient is its real part
and a complex variable's gradient is exactly what a gradient step needs. Each
kind says how its rule serves complex values (``COMPLEX_GRADIENTS``); a kind that
does not (``maximum`` orders complex numbers in no useful way) is an error
naming the node.

>>> import graphc, graphc.ndarray as N, numpy as np
>>> x = N.var("x", (3,), np.float64)
>>> dx = grad(N.sum(N.square(x)), x)
>>> graphc.compile([x], dx).run(x=np.array([1.0, 2.0, 3.0]))
array([2., 4., 6.])
"""
from __future__ import annotations

from ..operator.lazy import NS
from ..symbol.node import Node
from ..type.errors import DTypeError, GraphcError, GraphError, ShapeError
from .common import carries_gradient, cast_to, is_float, unbroadcast
from .rules import COMPLEX_GRADIENTS, HOLOMORPHIC, rule_for


def _order(root, parents_of):
    """Nodes reachable from ``root``, parents first (iterative post-order DFS)."""
    order, seen = [], {id(root)}
    stack = [(root, iter(parents_of(root)))]
    while stack:
        node, parents = stack[-1]
        for p in parents:
            if id(p) not in seen:
                seen.add(id(p))
                stack.append((p, iter(parents_of(p))))
                break
        else:
            stack.pop()
            order.append(node)
    return order


def _where(node):
    where = getattr(node, "where", None)
    return f" (node {node.label()} made at {where})" if where else ""


def _conform(ns, grad, parent, node):
    """A rule's gradient for ``parent`` with the parent's shape and dtype."""
    if tuple(grad.shape) != tuple(parent.shape):
        try:
            grad = unbroadcast(ns, grad, parent.shape)
        except GraphcError:
            raise GraphError(f"grad: the rule of {node.op.kind} gave a gradient of shape "
                             f"{grad.shape} for an input of shape {parent.shape}") from None
    return cast_to(ns, grad, parent.dtype)


def backward(ns, root, targets, seed, parents_of, value_of):
    """Gradients of ``root`` (seeded with ``seed``, of root's shape) with respect to
    each of ``targets``: a list with ``None`` where ``root`` does not depend on one.

    ``parents_of(node)`` gives a node's parents (anything that is not a node has
    none); ``value_of(node)`` the value the rules compute with.

    Example (graph mode; :func:`grad` does this):
    ``backward(NS, loss, [w], NS.ones((), loss.dtype), lambda n: n.parents, lambda n: n)``
    """
    order = _order(root, parents_of)
    target_ids = {id(t) for t in targets}
    relevant = set()  # float values that depend on a target
    for n in order:
        if carries_gradient(n.dtype) and (id(n) in target_ids
                                          or any(id(p) in relevant for p in parents_of(n))):
            relevant.add(id(n))
    pending = {id(root): [seed]} if id(root) in relevant else {}
    found = {}
    for n in reversed(order):
        parts = pending.pop(id(n), None)
        if not parts:
            continue
        g = parts[0]
        for part in parts[1:]:
            g = ns.add(g, part)
        if id(n) in target_ids:
            found[id(n)] = g
        parents = parents_of(n)
        needs = tuple(id(p) in relevant for p in parents)
        if not any(needs):
            continue
        rule = rule_for(n.op.kind)
        if rule is None:
            continue
        inputs = [value_of(p) for p in parents]
        try:
            grads = _apply_rule(ns, rule, n, inputs, value_of(n), g, needs)
        except GraphcError as exc:
            raise type(exc)(f"{exc}{_where(n)}") from None
        for p, need, gp in zip(parents, needs, grads):
            if need and gp is not None:
                pending.setdefault(id(p), []).append(_conform(ns, gp, p, n))
    return [found.get(id(t)) for t in targets]


def _is_complex(value) -> bool:
    dtype = getattr(value, "dtype", None)
    return dtype is not None and dtype.kind == "c"


def _apply_rule(ns, rule, node, inputs, output, g, needs):
    """``rule`` on a node, served as its kind says where a value is complex."""
    if not (_is_complex(output) or any(_is_complex(x) for x in inputs)):
        return rule(ns, node.op, inputs, output, g, needs)
    mode = COMPLEX_GRADIENTS.get(node.op.kind)
    if mode is None:
        raise GraphError(f"grad: the loss depends on a variable through {node.op.kind} on "
                         f"complex values ({node.label()}), which has no complex derivative "
                         "in graphc; take real parts first (N.real, N.abs) or compose it "
                         "from differentiable functions")
    if mode != HOLOMORPHIC:
        return rule(ns, node.op, inputs, output, g, needs)
    # the rule applies f'(z) to g; the convention's cotangent is conj(f'(z)) g, and a
    # real input keeps the real part, which conjugating leaves unchanged
    grads = rule(ns, node.op, inputs, output, ns.conj(g), needs)
    return [ns.conj(gp) if gp is not None and _is_complex(gp) and _is_complex(x) else gp
            for x, gp in zip(inputs, grads)]


def _lazy_parents(node):
    return node.parents


def _identity(node):
    return node


def grad(loss, wrt, seed=None):
    """The gradient of ``loss`` with respect to ``wrt`` (one node or a list of
    nodes) as new graph nodes, each with its variable's shape and dtype (zeros
    where ``loss`` does not depend on it; ``dL/dRe + i dL/dIm`` for a complex
    variable, as in PyTorch). ``loss`` must be a float scalar,
    unless ``seed`` (an array or node of ``loss``'s shape) gives the gradient
    flowing into it: then the result is the vector-Jacobian product.

    Example::

        loss = N.mean(N.square(x @ w - y))
        dw, dx = N.grad(loss, [w, x])
        step = graphc.compile([x, w, y], loss, updates={w: w - 0.1 * dw})
    """
    single = isinstance(wrt, Node) or hasattr(wrt, "__graphc_value__")
    targets = [wrt] if single else list(wrt) if isinstance(wrt, (list, tuple)) else None
    if targets is not None:   # a graphc.State in a traced function: its current node
        targets = [t.__graphc_value__(NS) if hasattr(t, "__graphc_value__") else t
                   for t in targets]
    if targets is None:
        raise GraphError(f"grad: wrt must be a graph node or a list of nodes, got "
                         f"{type(wrt).__name__}")
    if not isinstance(loss, Node):
        raise GraphError(f"grad: the loss must be a graph node (built with graphc.ndarray), "
                         f"got {type(loss).__name__}")
    for i, t in enumerate(targets):
        if not isinstance(t, Node):
            raise GraphError(f"grad: wrt[{i}] is a {type(t).__name__}, not a graph node; "
                             "pass the N.var (or other node) to differentiate with respect to")
        if not carries_gradient(t.dtype):
            raise DTypeError(f"grad: cannot differentiate with respect to {t.label()} of dtype "
                             f"{t.dtype}: gradients need floating-point (real or complex) "
                             "values")
    seed = check_loss(NS, loss, seed, loss.label())
    grads = backward(NS, loss, targets, seed, _lazy_parents, _identity)
    grads = [NS.zeros(t.shape, t.dtype) if g is None else g for t, g in zip(targets, grads)]
    return grads[0] if single else grads


def value_and_grad(f, argnums=0):
    """A function returning ``(f(*args), gradient)`` as graph nodes: the graph
    twin of ``graphc.eager.value_and_grad``, so code written against a namespace
    differentiates the same way in both modes. ``argnums``: an int (one
    gradient) or a tuple (a tuple of gradients) of positional arguments, which
    must be graph nodes (variables) or ``graphc.State`` objects.

    Example::

        loss, (dw, db) = N.value_and_grad(loss_fn, argnums=(0, 1))(w, b, x)
    """
    if not callable(f):
        raise TypeError(f"value_and_grad: f must be callable, got {f!r}")
    several = isinstance(argnums, tuple)

    def value_and_gradient(*args, **kwargs):
        value = f(*args, **kwargs)
        grads = grad(value, [args[i] for i in (argnums if several else (argnums,))])
        return value, tuple(grads) if several else grads[0]

    value_and_gradient.__name__ = f"value_and_grad({getattr(f, '__name__', 'f')})"
    return value_and_gradient


def check_loss(ns, loss, seed, label):
    """The seed gradient of ``loss`` after checking that it can be differentiated.

    Example: ``check_loss(NS, loss, None, loss.label())`` is ``ones((), loss.dtype)``
    for a float scalar ``loss``, and raises for any other.
    """
    if not is_float(loss.dtype):
        raise DTypeError(f"grad: the loss {label} has dtype {loss.dtype}; only floating-point "
                         "losses can be differentiated")
    if seed is None:
        if tuple(loss.shape) != ():
            raise ShapeError(f"grad: the loss {label} has shape {tuple(loss.shape)}; it must "
                             "be a scalar (reduce it with sum or mean), or pass seed= with the "
                             "gradient of that shape")
        return ns.ones((), loss.dtype)
    seed = ns._lift(seed)
    if tuple(seed.shape) != tuple(loss.shape):
        raise ShapeError(f"grad: seed of shape {tuple(seed.shape)} does not match the loss "
                         f"{label} of shape {tuple(loss.shape)}")
    if not is_float(seed.dtype) and seed.dtype.kind not in "iub":
        raise DTypeError(f"grad: seed must be numeric, got {seed.dtype}")
    return seed if seed.dtype == loss.dtype else ns.astype(seed, loss.dtype)

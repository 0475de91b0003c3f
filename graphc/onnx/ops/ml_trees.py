"""The converter of ``ai.onnx.ml``'s TreeEnsemble: a sum (or average, minimum,
maximum) of decision trees, as matrix products rather than a walk per sample.

The trees are attributes, known while importing, so each root-to-leaf path is
listed then: a path is a conjunction of node tests (``x[f] <= split``, ...,
taken true or false). At run time every node's test is computed for every
sample at once, ``C`` (samples x nodes, 0 or 1); ``C @ (P - Q) + |Q|`` counts the
tests each path has satisfied (``P``, ``Q``: its tests taken true and false), and a
path is taken where that count is its length: exactly one path per tree. The
leaves' weights then reach their targets through one more matrix product (or a
masked minimum or maximum).

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["ai.onnx.ml.TreeEnsemble"]
>>> node = NodeContext.for_test("TreeEnsemble", []).node
>>> attrs = {"tree_roots": [0], "nodes_featureids": [0], "nodes_modes": np.array([0]),
...          "nodes_splits": np.array([1.0]), "nodes_truenodeids": [0],
...          "nodes_trueleafs": [1], "nodes_falsenodeids": [1], "nodes_falseleafs": [1],
...          "leaf_targetids": [0, 0], "leaf_weights": np.array([-1.0, 1.0]),
...          "n_targets": 1}
>>> spec.fn(NodeContext(node, 5, [np.array([[0.5], [2.0]])], attrs, spec))
array([[-1.],
       [ 1.]])
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..registry import REQUIRED, converter
from .ml import DOMAIN

#: nodes_modes -> the comparison of ``x[feature]`` with the split (6: set membership)
_COMPARISONS = {0: "less_equal", 1: "less", 2: "greater_equal", 3: "greater", 4: "equal",
                5: "not_equal"}
_MEMBER = 6
_AGGREGATES = {0: "average", 1: "sum", 2: "min", 3: "max"}
#: the most root-to-leaf paths an ensemble may list (nodes shared between branches
#: multiply them)
_MAX_PATHS = 1 << 20

_NODE_FIELDS = ("nodes_featureids", "nodes_modes", "nodes_splits", "nodes_truenodeids",
                "nodes_trueleafs", "nodes_falsenodeids", "nodes_falseleafs")


@dataclass
class _Ensemble:
    """The trees' attributes as arrays (one entry per interior node or leaf)."""

    feature: np.ndarray
    mode: np.ndarray
    split: np.ndarray
    child: tuple            # (true, false) child ids
    is_leaf: tuple          # (true, false): whether each child is a leaf
    tracks_missing: np.ndarray
    members: dict           # member node -> its set's values
    target: np.ndarray
    weight: np.ndarray
    roots: np.ndarray


def _ints(ctx, name, optional=False):
    value = ctx.attr(name) if not optional or ctx.has_attr(name) else None
    if value is None:
        return None
    array = np.asarray(value)
    if array.ndim != 1 or (array.size and array.dtype.kind not in "iub"):
        raise ctx.invalid(f"attribute {name!r} must be a list of integers")
    return array.astype(np.int64)


def _read(ctx, dtype) -> _Ensemble:
    nodes = {name: np.asarray(ctx.attr(name)).reshape(-1) for name in _NODE_FIELDS}
    for name in _NODE_FIELDS:
        if name != "nodes_splits":
            nodes[name] = _ints(ctx, name)
    count = len(nodes["nodes_featureids"])
    tracks = _ints(ctx, "nodes_missing_value_tracks_true", optional=True)
    tracks = np.zeros(count, np.int64) if tracks is None else tracks
    hitrates = ctx.attr("nodes_hitrates")
    lengths = {name: len(v) for name, v in nodes.items()}
    lengths["nodes_missing_value_tracks_true"] = len(tracks)
    if hitrates is not None:
        lengths["nodes_hitrates"] = np.size(hitrates)
    if len(set(lengths.values())) != 1 or count == 0:
        raise ctx.invalid(f"the nodes_* attributes must list one entry per node, at least "
                          f"one; got lengths {lengths}")
    target, weight = _ints(ctx, "leaf_targetids"), np.asarray(ctx.attr("leaf_weights"))
    if weight.ndim != 1 or len(target) != len(weight) or not len(target):
        raise ctx.invalid(f"leaf_targetids ({len(target)}) and leaf_weights "
                          f"({weight.size}) must list one entry per leaf, at least one")
    leaves = (nodes["nodes_trueleafs"], nodes["nodes_falseleafs"])
    children = (nodes["nodes_truenodeids"], nodes["nodes_falsenodeids"])
    for flags, ids, side in zip(leaves, children, ("true", "false")):
        if not np.isin(flags, (0, 1)).all():
            raise ctx.invalid(f"nodes_{side}leafs must hold 0 or 1")
        bound = np.where(flags == 1, len(target), count)
        if ((ids < 0) | (ids >= bound)).any():
            raise ctx.invalid(f"nodes_{side}nodeids must name nodes (0..{count - 1}) or, "
                              f"where nodes_{side}leafs is 1, leaves (0..{len(target) - 1})")
    mode = nodes["nodes_modes"]
    if not np.isin(mode, list(_COMPARISONS) + [_MEMBER]).all():
        raise ctx.invalid(f"nodes_modes must hold 0 to 6, got {sorted(set(mode.tolist()))}")
    roots = _ints(ctx, "tree_roots")
    if not len(roots) or ((roots < 0) | (roots >= count)).any():
        raise ctx.invalid(f"tree_roots must name nodes (0..{count - 1}), at least one")
    return _Ensemble(nodes["nodes_featureids"], mode, nodes["nodes_splits"].astype(dtype),
                     children, tuple(flag == 1 for flag in leaves), tracks == 1,
                     _members(ctx, mode, dtype), target, weight.astype(np.float64), roots)


def _members(ctx, mode, dtype) -> dict:
    """Each set-membership node's values: ``membership_values`` lists the sets in
    the order of those nodes, each ended by a NaN."""
    wanted = np.flatnonzero(mode == _MEMBER)
    if not ctx.has_attr("membership_values"):
        if len(wanted):
            raise ctx.invalid("set-membership nodes (mode 6) need membership_values")
        return {}
    values = np.asarray(ctx.attr("membership_values"), np.float64).reshape(-1)
    ends = np.flatnonzero(np.isnan(values))
    if len(ends) != len(wanted):
        raise ctx.invalid(f"membership_values holds {len(ends)} NaN-ended sets for "
                          f"{len(wanted)} set-membership nodes")
    starts = np.concatenate([[0], ends[:-1] + 1])
    return {int(n): values[s:e].astype(dtype) for n, s, e in zip(wanted, starts, ends)}


def _paths(ctx, trees: _Ensemble):
    """``(tests, leaves)``: each root-to-leaf path's tests ``[(node, taken_true)]``
    and its leaf."""
    tests, leaves = [], []
    for k, root in enumerate(trees.roots):
        true_id, false_id = trees.child[0][root], trees.child[1][root]
        if trees.is_leaf[0][root] and trees.is_leaf[1][root] and true_id == false_id:
            tests.append([])  # a tree that is one leaf
            leaves.append(int(true_id))
            continue
        stack = [(int(root), [])]
        while stack:
            node, path = stack.pop()
            if any(n == node for n, _ in path):
                raise ctx.invalid(f"the nodes of tree {k} form a cycle through node {node}")
            for side in (1, 0):
                step = path + [(node, side == 0)]
                child = int(trees.child[side][node])
                if trees.is_leaf[side][node]:
                    tests.append(step)
                    leaves.append(child)
                else:
                    stack.append((child, step))
            if len(tests) + len(stack) > _MAX_PATHS:
                raise ctx.unsupported(f"the trees have more than {_MAX_PATHS} root-to-leaf "
                                      "paths (nodes shared between branches)")
    return tests, np.array(leaves)


def _node_tests(ctx, x, trees: _Ensemble):
    """``(samples, nodes)`` float64: 1 where the node's test holds for the sample."""
    ns = ctx.ns
    values = ns.take(x, trees.feature, axis=1)
    columns, order = [], []
    for mode, name in _COMPARISONS.items():
        chosen = np.flatnonzero(trees.mode == mode)
        if len(chosen):
            picked = ns.take(values, chosen, axis=1)
            columns.append(getattr(ns, name)(picked, trees.split[chosen]))
            order.append(chosen)
    if trees.members:
        nodes = sorted(trees.members)
        owner = np.concatenate([np.full(len(trees.members[n]), j) for j, n in enumerate(nodes)])
        wanted = np.concatenate([trees.members[n] for n in nodes])
        features = trees.feature[nodes][owner]
        hits = ns.astype(ns.equal(ns.take(x, features, axis=1), wanted), np.float64)
        assign = (owner[:, None] == np.arange(len(nodes))[None, :]).astype(np.float64)
        columns.append(ns.greater(ns.matmul(hits, assign), 0.0))
        order.append(np.array(nodes))
    tests = ns.concatenate(columns, axis=1) if len(columns) > 1 else columns[0]
    tests = ns.take(tests, np.argsort(np.concatenate(order)), axis=1)
    if trees.tracks_missing.any() and ctx.dtype(0).kind == "f":
        tests = ns.logical_or(tests, ns.logical_and(ns.isnan(values), trees.tracks_missing))
    return ns.astype(tests, np.float64)


def _aggregate(ctx, taken, trees, leaves, n_targets, dtype):
    ns, how = ctx.ns, _AGGREGATES.get(int(ctx.attr("aggregate_function")))
    if how is None:
        raise ctx.invalid(f"aggregate_function must be 0 to 3, got "
                          f"{ctx.attr('aggregate_function')}")
    weight, target = trees.weight[leaves], trees.target[leaves]
    onto = target[:, None] == np.arange(n_targets)[None, :]  # path -> its leaf's target
    if how in ("sum", "average"):
        scale = 1.0 if how == "sum" else 1.0 / len(trees.roots)
        return ns.matmul(ns.astype(taken, np.float64), onto * (weight * scale)[:, None])
    extreme = np.finfo(dtype).max if how == "min" else np.finfo(dtype).min
    reaching = ns.logical_and(ns.expand_dims(taken, 2), onto)
    candidates = ns.where(reaching, weight[:, None], extreme)
    return getattr(ns, how)(candidates, axis=1)


def _post_transform(ctx, y):
    ns, kind = ctx.ns, int(ctx.attr("post_transform"))
    if kind == 0:
        return y
    if kind == 1:
        shifted = ns.exp(ns.subtract(y, ns.max(y, axis=1, keepdims=True)))
        return ns.divide(shifted, ns.sum(shifted, axis=1, keepdims=True))
    if kind == 2:
        return ns.divide(1.0, ns.add(ns.exp(ns.negative(y)), 1.0))
    if kind in (3, 4):
        name = "SOFTMAX_ZERO" if kind == 3 else "PROBIT"
        raise ctx.unsupported(f"post_transform {kind} ({name}) is not supported (only NONE, "
                              "SOFTMAX and LOGISTIC)")
    raise ctx.invalid(f"post_transform must be 0 to 4, got {kind}")


@converter("TreeEnsemble", domain=DOMAIN, min_opset=5, attrs={
    "aggregate_function": 1, "post_transform": 0, "tree_roots": REQUIRED,
    "nodes_featureids": REQUIRED, "nodes_modes": REQUIRED, "nodes_splits": REQUIRED,
    "nodes_truenodeids": REQUIRED, "nodes_trueleafs": REQUIRED,
    "nodes_falsenodeids": REQUIRED, "nodes_falseleafs": REQUIRED,
    "nodes_missing_value_tracks_true": None, "nodes_hitrates": None,
    "leaf_targetids": REQUIRED, "leaf_weights": REQUIRED, "membership_values": None,
    "n_targets": REQUIRED})
def tree_ensemble(ctx):
    """The ensemble's prediction for each row of ``X`` (samples x features): shape
    ``(samples, n_targets)``, in ``X``'s dtype."""
    x, dims, dtype = ctx.input(0), ctx.shape(0), np.dtype(ctx.dtype(0))
    if len(dims) != 2:
        raise ctx.invalid(f"X must be a matrix (samples, features), got shape {dims}")
    if dtype not in (np.float16, np.float32, np.float64):
        raise ctx.invalid(f"X must be float16, float32 or float64, got {dtype}")
    n_targets = int(ctx.attr("n_targets"))
    trees = _read(ctx, dtype)
    if ((trees.feature < 0) | (trees.feature >= dims[1])).any():
        raise ctx.invalid(f"nodes_featureids must name features of X (0..{dims[1] - 1})")
    if n_targets < 1 or ((trees.target < 0) | (trees.target >= n_targets)).any():
        raise ctx.invalid(f"leaf_targetids must name targets (0..{n_targets - 1}) and "
                          "n_targets be positive")
    tests, leaves = _paths(ctx, trees)
    count = len(trees.feature)
    ctx.reserve_import_only((count, len(tests)), np.float64, "TreeEnsemble's paths")
    wanted = np.zeros((count, len(tests)))   # +1: taken true, -1: taken false
    for p, path in enumerate(tests):
        for node, taken_true in path:
            wanted[node, p] = 1.0 if taken_true else -1.0
    ns = ctx.ns
    satisfied = ns.add(ns.matmul(_node_tests(ctx, x, trees), wanted),
                       (wanted < 0).sum(axis=0).astype(np.float64))
    taken = ns.equal(satisfied, np.abs(wanted).sum(axis=0))
    y = _aggregate(ctx, taken, trees, leaves, n_targets, dtype)
    y = _post_transform(ctx, y)
    return y if y.dtype == dtype else ns.astype(y, dtype)

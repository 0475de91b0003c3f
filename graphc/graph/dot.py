"""Graphviz DOT text for a graph. Nodes given the same group by ``groups``
(for example the memory buffer they share) get the same fill colour.

>>> import graphc.ndarray as N
>>> from graphc.graph.graph import Graph
>>> x = N.var("x", (3,))
>>> to_dot(Graph([x], [N.exp(x)])).splitlines()[0]
'digraph graphc {'
"""
from __future__ import annotations

from typing import Mapping, Optional

_PALETTE = ["#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69",
            "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f"]
_LEAF_STYLE = {"var": "#ffffff", "const": "#eeeeee"}


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def to_dot(graph, groups: Optional[Mapping[int, object]] = None, title: str = "") -> str:
    """DOT source: one box per node labelled with its name, op, shape and dtype;
    ``groups`` maps ``id(node)`` to a group key that picks the colour."""
    colour_of: dict[object, str] = {}
    lines = ["digraph graphc {", "  rankdir=TB;", '  node [shape=box, style="filled,rounded",'
             ' fontname="Helvetica", fontsize=10];']
    if title:
        lines.append(f'  label="{_escape(title)}"; labelloc=t;')
    outputs = {id(n) for n in graph.outputs} | {id(v) for _, v in graph.updates}
    # inputs the outputs do not read (an update's target, say) are drawn as well
    in_order = {id(n) for n in graph.order}
    nodes = list(graph.order) + [v for v in graph.inputs if id(v) not in in_order]
    for node in nodes:
        group = groups.get(id(node)) if groups else None
        if node.op.kind in _LEAF_STYLE:
            colour = _LEAF_STYLE[node.op.kind]
        elif group is None:
            colour = "#ffffff"
        else:
            colour = colour_of.setdefault(group, _PALETTE[len(colour_of) % len(_PALETTE)])
        shape = "x".join(map(str, node.shape)) or "scalar"
        parts = [node.label(), f"{node.op.kind} {shape} {node.dtype}"]
        if group is not None:
            parts.append(f"buffer {group}")
        label = "\\n".join(_escape(p) for p in parts)
        border = ", penwidth=2" if id(node) in outputs else ""
        lines.append(f'  n{node.id} [label="{label}", fillcolor="{colour}"{border}];')
    for node in graph.order:
        for p in node.parents:
            lines.append(f"  n{p.id} -> n{node.id};")
    for var, value in graph.updates:
        lines.append(f'  n{value.id} -> n{var.id} [style=dashed, label="update"];')
    lines.append("}")
    return "\n".join(lines) + "\n"

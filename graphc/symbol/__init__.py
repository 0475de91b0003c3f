"""Symbol layer: nodes, traversal, evaluation order and networkx export."""
from .export import to_networkx
from .node import Node, user_location
from .traverse import consumer_counts, edge_count, topological_order

__all__ = ["Node", "user_location", "topological_order", "consumer_counts", "edge_count",
           "to_networkx"]

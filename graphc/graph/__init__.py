"""Graph layer: inputs, outputs and update edges, validation, statistics, DOT
output, and a code-free save format."""
from .dot import to_dot
from .graph import Graph
from .serialize import load, save
from .stats import structure_stats

__all__ = ["Graph", "to_dot", "save", "load", "structure_stats"]

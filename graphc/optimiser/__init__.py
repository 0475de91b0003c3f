"""Optimiser layer: graph rewrites applied between building and planning.

Empty for now: the rewrite passes arrive with the optimiser issue. The layer
exists so that the stack's order (operator < optimiser < graph) is fixed.
"""

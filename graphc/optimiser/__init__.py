"""Optimiser layer: rewrites applied between building and planning.

Rewrites are data (:mod:`.pattern`, :mod:`.rewriter`); passes are named and run
in the order of :data:`PIPELINE` to a fixpoint (:mod:`.passes`).
"""
from .passes import DEFAULT, PIPELINE, OptimiseResult, PassReport, optimise, select_passes

__all__ = ["optimise", "select_passes", "PIPELINE", "DEFAULT", "OptimiseResult", "PassReport"]

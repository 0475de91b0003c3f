"""Reverse-mode automatic differentiation, written once against the array
namespace (Owl's algodiff): the rules emit graph nodes through
``graphc.ndarray`` (``N.grad``) or compute arrays through ``graphc.eager``
(``E.grad``, ``E.value_and_grad``, on a tape).

Layers: imports operator, shape, symbol and type only.
"""
from .reverse import backward, grad
from .rules import GRADIENTS, NON_DIFFERENTIABLE, rule_for

__all__ = ["GRADIENTS", "NON_DIFFERENTIABLE", "rule_for", "backward", "grad"]

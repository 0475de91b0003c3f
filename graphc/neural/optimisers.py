"""Optimisers as update expressions: each rule is written once against a
namespace, so the same formula becomes graph updates (one compiled training
step) or updates NumPy arrays in place (the eager training loop).

``graph_updates(params, grads)`` takes ``name -> var node`` and ``name ->
gradient node`` and returns ``(state, updates)``: the optimiser's own
variables with their initial values, and ``variable -> new value`` for
parameters and state alike, ready for ``graphc.compile(..., updates=...)``.

>>> import numpy as np
>>> opt = SGD(lr=0.5)
>>> p, g = {"w": np.ones(2, np.float32)}, {"w": np.ones(2, np.float32)}
>>> opt.eager_step(p, g, opt.init_eager(p)); p["w"]
array([0.5, 0.5], dtype=float32)
"""
from __future__ import annotations

import numpy as np

from ..operator import NS as _LAZY


class Optimiser:
    """The shared machinery; a subclass sets ``name`` and ``slots`` (per-parameter
    state, initialised to zeros) and implements ``rule``, and may keep global state
    (``global_state``/``advance``, e.g. Adam's step counter)."""

    name = "optimiser"
    slots: tuple = ()

    def global_state(self) -> dict[str, np.ndarray]:
        """Initial values of the state shared by all parameters, by short name."""
        return {}

    def advance(self, ns, state: dict) -> dict:
        """The shared state after one step (computed once per step)."""
        return {}

    def rule(self, ns, p, g, slots: dict, shared: dict):
        """``(new parameter, {slot: new value})`` from parameter ``p``, gradient ``g``,
        its slots and the already advanced shared state."""
        raise NotImplementedError

    # -- names of the state variables ---------------------------------------------------
    def slot_name(self, slot: str, param: str) -> str:
        """The variable name of ``slot`` of parameter ``param``: ``"sgd.velocity:fc.weight"``."""
        return f"{self.name}.{slot}:{param}"

    def global_name(self, key: str) -> str:
        return f"{self.name}.{key}"

    # -- graph mode ---------------------------------------------------------------------
    def graph_updates(self, params: dict, grads: dict, ns=None):
        """``(state, updates)`` for one step: ``state`` maps each new state variable
        (an ``N.var``) to its initial NumPy value, ``updates`` maps every parameter in
        ``grads`` and every state variable to its value after the step.

        Example::

            state, updates = Adam(1e-3).graph_updates({"w": w}, {"w": N.grad(loss, [w])[0]})
            step = graphc.compile([x, w, *state], loss, updates)
            step.assign(**{v.name: a for v, a in state.items()})
        """
        ns = _LAZY if ns is None else ns
        state, updates = {}, {}
        shared = {}
        for key, initial in self.global_state().items():
            var = ns.var(self.global_name(key), initial.shape, initial.dtype)
            state[var], shared[key] = initial, var
        advanced = self.advance(ns, shared)
        for key, var in shared.items():
            updates[var] = advanced[key]
        for name, g in grads.items():
            p = params[name]
            slots = {}
            for slot in self.slots:
                var = ns.var(self.slot_name(slot, name), p.shape, p.dtype)
                state[var], slots[slot] = np.zeros(p.shape, p.dtype), var
            new_p, new_slots = self.rule(ns, p, g, slots, advanced)
            updates[p] = new_p
            for slot, var in slots.items():
                updates[var] = new_slots[slot]
        return state, updates

    # -- eager mode -----------------------------------------------------------------------
    def init_eager(self, params: dict) -> dict[str, np.ndarray]:
        """Fresh state for NumPy ``params`` (name -> array), by variable name.

        Example: ``state = opt.init_eager(params)``
        """
        state = {self.global_name(k): v.copy() for k, v in self.global_state().items()}
        for name, p in params.items():
            for slot in self.slots:
                state[self.slot_name(slot, name)] = np.zeros(np.shape(p), np.asarray(p).dtype)
        return state

    def eager_step(self, params: dict, grads: dict, state: dict, ns=np) -> None:
        """One step on NumPy arrays, in place: every ``params[name]`` with a gradient
        in ``grads`` and the ``state`` from :meth:`init_eager`. ``ns`` computes the
        rule (NumPy by default; ``graphc.eager`` works too).

        Example: ``opt.eager_step(params, grads, state)``
        """
        shared = {k: state[self.global_name(k)] for k in self.global_state()}
        advanced = self.advance(ns, shared)
        for name, g in grads.items():
            slots = {s: state[self.slot_name(s, name)] for s in self.slots}
            new_p, new_slots = self.rule(ns, params[name], g, slots, advanced)
            np.copyto(params[name], new_p, casting="same_kind")
            for s, value in new_slots.items():
                np.copyto(slots[s], value, casting="same_kind")
        for k, value in advanced.items():
            np.copyto(shared[k], value, casting="same_kind")


    # -- on graphc.State objects (either mode) ---------------------------------------------
    def apply(self, ns, params: dict, grads: dict, state: dict) -> None:
        """One step on :class:`graphc.State` objects: ``params`` and ``state`` map names
        to states (``state`` as made from :meth:`init_eager`), ``grads`` names to
        gradients. Every value is read before any is assigned, so the same code is
        an eager step (``ns`` = ``graphc.eager``) or, inside a traced function, the
        graph's update edges (``ns`` = ``graphc.ndarray``).

        Example: ``opt.apply(N, {"w": w_state}, {"w": gw}, slot_states)``
        """
        shared = {k: state[self.global_name(k)].read() for k in self.global_state()}
        advanced = self.advance(ns, shared)
        # the order of graph_updates, so a traced step is the hand-built graph exactly
        new = [(state[self.global_name(k)], value) for k, value in advanced.items()]
        for name, g in grads.items():
            slots = {s: state[self.slot_name(s, name)].read() for s in self.slots}
            new_p, new_slots = self.rule(ns, params[name].read(), g, slots, advanced)
            new.append((params[name], new_p))
            new += [(state[self.slot_name(s, name)], value) for s, value in new_slots.items()]
        for target, value in new:
            target.assign(value)


class SGD(Optimiser):
    """Stochastic gradient descent, with PyTorch's momentum when ``momentum > 0``:
    ``v <- momentum v + g; p <- p - lr v`` (else ``p <- p - lr g``).

    Example: ``SGD(lr=0.01, momentum=0.9)``
    """

    name = "sgd"

    def __init__(self, lr: float = 0.01, momentum: float = 0.0):
        self.lr, self.momentum = float(lr), float(momentum)
        self.slots = ("velocity",) if self.momentum else ()

    def rule(self, ns, p, g, slots, shared):
        if not self.momentum:
            return p - g * self.lr, {}
        v = slots["velocity"] * self.momentum + g
        return p - v * self.lr, {"velocity": v}


class AdaGrad(Optimiser):
    """AdaGrad: ``v <- v + g^2; p <- p - g * (lr / sqrt(v + eps))``, the scale
    written as the optimiser's ``fused_adagrad`` pattern expects.

    Example: ``AdaGrad(lr=0.01, eps=1e-8)``
    """

    name = "adagrad"
    slots = ("sum_sq",)

    def __init__(self, lr: float = 0.01, eps: float = 1e-8):
        self.lr, self.eps = float(lr), float(eps)

    def rule(self, ns, p, g, slots, shared):
        v = slots["sum_sq"] + g * g
        return p - g * (self.lr / ns.sqrt(v + self.eps)), {"sum_sq": v}


class Adam(Optimiser):
    """Adam with bias correction (PyTorch's formula), ``t`` the step counter:
    ``m <- b1 m + (1 - b1) g; v <- b2 v + (1 - b2) g^2;
    p <- p - (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)``.

    Example: ``Adam(lr=1e-3, b1=0.9, b2=0.999, eps=1e-8)``
    """

    name = "adam"
    slots = ("m", "v")

    def __init__(self, lr: float = 1e-3, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8):
        self.lr, self.b1, self.b2, self.eps = float(lr), float(b1), float(b2), float(eps)

    def global_state(self):
        return {"step": np.zeros((), np.float32)}

    def advance(self, ns, state):
        return {"step": state["step"] + 1.0}

    def rule(self, ns, p, g, slots, shared):
        t = shared["step"]
        m = slots["m"] * self.b1 + g * (1.0 - self.b1)
        v = slots["v"] * self.b2 + g * g * (1.0 - self.b2)
        step_size = self.lr / (1.0 - ns.power(self.b1, t))
        root_correction = ns.sqrt(1.0 - ns.power(self.b2, t))
        denominator = ns.sqrt(v) / root_correction + self.eps
        return p - m * step_size / denominator, {"m": m, "v": v}


__all__ = ["Optimiser", "SGD", "AdaGrad", "Adam"]

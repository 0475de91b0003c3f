"""What a compiled graph holds of its inputs: ``assign``, the feeds of a run (copied
in, or bound to the caller's array where the program allows), the old values a
failed run puts back, and ``value`` to read one. The inputs half of
:class:`graphc.compiler.Executable`, kept apart as :mod:`graphc.reports` is.

>>> import numpy as np, graphc, graphc.ndarray as N
>>> w = N.var("w", (2,)); g = graphc.compile([w], [w * 2.0])
>>> g.assign(w=np.ones(2, np.float32)); g.value("w"), g.assigned_names
(array([1., 1.], dtype=float32), ['w'])
"""
from __future__ import annotations

import weakref
from typing import Mapping

import numpy as np

from .engine.interrupts import held_interrupts
from .feeds import checked_feeds
from .type.errors import CommitError, InputError


class Inputs:
    """The inputs of an :class:`~graphc.compiler.Executable` (it holds ``program``,
    the variables by name ``_vars``, the lock and the bookkeeping sets its
    ``__init__`` makes)."""

    def _checked(self, feeds: Mapping, what: str = "run") -> dict[str, np.ndarray]:
        return checked_feeds(self._vars, feeds, what, device=not self.program.host_views)

    def assign(self, **values) -> None:
        """Set variables to copies of ``values``; they keep them until the next
        assign, feed or update. All values are checked first, so a bad one sets
        none. Example: ``step.assign(w=W0)``"""
        checked = self._checked(values, "assign")
        with self._lock, held_interrupts():
            self._store(checked)
            self._assigned.update(checked)
            self._torn.difference_update(checked)
            # the caller usually drops what it assigned (initial weights): the next
            # run gives the heap they leave back to the OS (engine/heap.py)
            self._assigned_bytes += sum(a.nbytes for a in checked.values())

    def _store(self, checked) -> None:
        variables = self.program.variables
        for name, array in checked.items():
            if self._bound.pop(name, None) is not None:
                self.program.bind_input(name, None)
            if array is not variables[name]:   # a State held by this graph gives its own
                self.program.store(variables[name], array)   # host to device, on a device
        self._has_value.update(checked)
        self._changed.update(checked)

    def _bindings(self, checked) -> set[str]:
        """The fed inputs ``run`` reads from the caller's arrays (no copy); an array
        fed again (the last array fed for that input) is worth binding at any size."""
        binds = set()
        for name, array in checked.items():
            if name in self._bindable:
                last = self._last_fed.get(name)
                if self.program.can_bind(name, array, last is not None and last() is array):
                    binds.add(name)
                self._last_fed[name] = weakref.ref(array)
        return binds

    def _feed(self, checked, binds) -> None:
        """Copy the fed inputs in, but bind those in ``binds``: their readers are
        rebuilt on the caller's array, unless it is the array bound already."""
        self._store({name: a for name, a in checked.items() if name not in binds})
        for name in binds:
            array = checked[name]
            if self._bound.get(name) is not array:
                self._bound[name] = array     # first: a failed rebuild is put back
                self.program.bind_input(name, array)
        self._has_value.update(binds)
        self._changed.update(binds)

    def _refuse_torn(self, what: str, names) -> None:
        """Refuse to read any of ``names`` that a failed commit may have
        half-written (see :class:`~graphc.CommitError`)."""
        torn = sorted(self._torn.intersection(names))
        if torn:
            raise CommitError(f"{what}: variables {torn} may be partly updated by a run "
                              "that failed while committing; assign them first")

    def _save_fed(self, checked, binds=frozenset()) -> set[str]:
        """Keep the current value of every fed input that has one in its variable's
        array and will be copied over, so a failed run can put it back
        (``stats()["rollback_bytes"]``: the buffers this holds); an input bound
        now or bound by this run keeps its variable's array as it is. Returns the
        names saved."""
        saved_names = set()
        for name in checked:
            if (name in self._has_value and name not in binds and name not in self._bound
                    and checked[name] is not self.program.variables[name]):
                current = self.program.variables[name]
                saved = self._rollback.get(name)
                if saved is None:
                    saved = self._rollback[name] = self.program.empty_like(current)
                saved[...] = current
                saved_names.add(name)
        return saved_names

    def _restore_fed(self, checked, had_value, assigned, saved=None, bound=None) -> None:
        """Undo :meth:`_feed` of a run that failed: the saved values and the
        bindings from before it."""
        for name in checked:
            if name in (had_value if saved is None else saved):
                self.program.variables[name][...] = self._rollback[name]
            before = (bound or {}).get(name)
            if self._bound.get(name) is not before:
                self.program.bind_input(name, before)
                if before is None:
                    del self._bound[name]
                else:
                    self._bound[name] = before
        self._has_value = had_value
        self._assigned = assigned

    def _held_value(self, name: str) -> np.ndarray:
        """The array holding variable ``name``'s value now, not a copy: the array
        bound to it, else the variable's own, which later runs and updates write
        over (a :class:`graphc.State` held by this graph reads and assigns it
        there; fed back, it is neither copied nor saved). Only where the program's
        arrays are host arrays (``program.host_views``)."""
        with self._lock:
            self._refuse_torn("value", [name])
            if name not in self._has_value:
                raise InputError(f"value: variable {name!r} has no value yet")
            return self._bound.get(name, self.program.variables[name])

    def value(self, name: str) -> np.ndarray:
        """A copy of the current value of variable ``name``. Example: ``step.value("w")``"""
        if name not in self._vars:
            raise InputError(f"value: unknown variable {name!r}; the graph's inputs are "
                             f"{sorted(self._vars)}")
        with self._lock:
            self._refuse_torn("value", [name])
            if name not in self._has_value:
                raise InputError(f"value: variable {name!r} has no value yet; give it to run "
                                 "or assign first")
            if name in self._bound:
                return np.array(self._bound[name], copy=True)
            return self.program.to_host(self.program.variables[name])

"""The op of a constant node, which says when two constants may be merged.

A constant up to :data:`DIGEST_LIMIT` bytes is named by a digest of its content, so
equal constants have equal ops and common-subexpression elimination merges them.
A larger one is not hashed (hashing large weights costs more than merging them
could save): its op carries ``distinct=True`` and a serial number, so it equals no
other constant's op, and the optimiser never merges it.

>>> import numpy as np
>>> small = const_op(np.zeros(3, np.float32))
>>> small == const_op(np.zeros(3, np.float32)), mergeable(small)
(True, True)
>>> large = const_op(np.zeros(1 << 15, np.float32))      # 128 KiB
>>> large == const_op(np.zeros(1 << 15, np.float32)), mergeable(large)
(False, False)
"""
from __future__ import annotations

import hashlib
import itertools

import numpy as np

from ..type.op import Op

#: constants up to this many bytes are identified by content (so equal ones can merge)
DIGEST_LIMIT = 1 << 16
#: the attributes a const op has, as a saved graph stores them (``distinct`` is
#: never stored: a loaded constant's op is made again from its array)
SAVED_ATTRIBUTES = ("digest", "dtype", "shape")

_serials = itertools.count()


def const_op(array: np.ndarray) -> Op:
    """The op of a constant node holding ``array``.

    Example: ``Node.leaf(const_op(array), value=array)`` (``array`` read-only).
    """
    if array.nbytes <= DIGEST_LIMIT:
        digest = hashlib.blake2b(array.tobytes(), digest_size=12).hexdigest()
        return Op.make("const", shape=array.shape, dtype=array.dtype, digest=digest)
    # the serial keeps it unequal to every other constant's op; files written before
    # the flag existed name such constants "unique-<n>" too
    return Op.make("const", shape=array.shape, dtype=array.dtype,
                   digest=f"unique-{next(_serials)}", distinct=True)


def immutable(array: np.ndarray) -> bool:
    """Whether ``array``'s contents can no longer change: it is read-only and so is
    every array it views, down to an owner that is read-only or to ``bytes``
    (such an array can be a constant's value without a copy).

    >>> frozen = np.zeros(4)
    >>> frozen.flags.writeable = False
    >>> immutable(frozen[1:]), immutable(np.zeros(4))
    (True, False)
    """
    while isinstance(array, np.ndarray):
        if array.flags.writeable:
            return False
        if array.base is None:
            return True
        array = array.base
    return isinstance(array, bytes)


def mergeable(op: Op) -> bool:
    """Whether a const node of ``op`` may be merged with an equal one (its op is
    equal exactly when the content is).

    >>> mergeable(const_op(np.ones(2)))
    True
    """
    return not op.get("distinct", False)


def saved_attributes(op: Op) -> tuple:
    """A const op's attributes as a saved graph stores them: ``(name, value)`` pairs.

    >>> [name for name, _ in saved_attributes(const_op(np.ones(2)))]
    ['digest', 'dtype', 'shape']
    """
    return tuple((name, value) for name, value in op.attrs if name in SAVED_ATTRIBUTES)

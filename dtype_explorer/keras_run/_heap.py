"""The user's process's heap, out of the collector's way while an audit runs there.

Keras, its backends and a notebook hold hundreds of thousands of objects (413,000 with
TensorFlow, 655,000 with torch, more in a kernel with several). Keras runs a full cycle
collection itself whenever a layer deletes a variable (``Layer.__delattr__``: every layer a
quantization replaces) and in ``clear_session``; each walked all of them, a tenth to a third of
a second: a quantized audit of a two-Dense model took 0.45 s, 0.06 s with the heap out of the
way.

:func:`heap_frozen` collects the young generations (their garbage is not frozen with the
rest), moves the objects alive then out of the collector's passes (``gc.freeze``) and back
when the block ends (``gc.unfreeze``); what the block makes is collected as ever (the
variables a quantized copy drops among it), and what was alive before is collected after, if it
became garbage. It is the audit's, whose block runs the user's model and the tool's copies of
it; never around the user's own code (``dx.trace``), where a ``gc.collect()`` must free what it
frees untraced. A process that froze its heap for good (:func:`freeze_for_good`: the tool's
workers after their imports; the test session) or turned the collector off is left as it is.
A ``gc.freeze()`` made by another thread while the block runs is undone with it.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

#: Whether this process froze its heap for good (:func:`freeze_for_good`).
_FOR_GOOD = False


def freeze_for_good() -> None:
    """Freeze what this process holds now for as long as it lives (a worker after importing
    its backend): its collections never walk it again. :func:`heap_frozen` then does nothing
    here, without counting the frozen objects (``gc.get_freeze_count`` walks them all).

    >>> freeze_for_good  # doctest: +ELLIPSIS
    <function freeze_for_good at ...>
    """
    global _FOR_GOOD
    gc.freeze()
    _FOR_GOOD = True


@contextlib.contextmanager
def heap_frozen() -> Iterator[None]:
    """The objects alive now left out of the collector's passes for the block, put back
    after it; nothing done where the process froze its heap (for good, or itself) or
    collects none.

    Returns:
        A context manager.

    >>> before = gc.get_freeze_count()
    >>> with heap_frozen():
    ...     gc.get_freeze_count() > 0
    True
    >>> gc.get_freeze_count() <= before   # as before (frozen objects may have been freed)
    True
    """
    if _FOR_GOOD or not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    gc.collect(1)  # the young garbage first: frozen, it would wait for a rare full pass
    try:
        gc.freeze()
        yield
    finally:
        gc.unfreeze()  # nothing was frozen before: safe whatever interrupted the block

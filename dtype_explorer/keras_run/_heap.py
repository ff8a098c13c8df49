"""The user's process's heap, out of the collector's way while the tool works in it.

Keras, its backends and a notebook hold hundreds of thousands of objects (435,000 with jax,
655,000 with torch, more in a kernel with several). The cycle collector's full passes walk all
of them: a tenth of a second to a third of one each. The tool's work in the user's process
meets them twice:

* a trace keeps every step until it ends, so full passes come due during it (about one in
  thirty traces of issue 37's loop: 20 % of its mean time on jax);
* Keras runs a full collection itself whenever a layer deletes a variable
  (``Layer.__delattr__``: every layer a quantization replaces) and in ``clear_session``: a
  quantized audit of a two-Dense model took 0.40 s, 0.06 s with the heap out of the way.

:func:`heap_frozen` moves the objects alive when it starts out of the collector's passes
(``gc.freeze``) and back when it ends (``gc.unfreeze``); what the block makes is collected as
ever, and what was alive before is collected after, if it became garbage. A process that froze
objects itself (the tool's workers do, after their imports; so does the test session) or turned
the collector off is left as it is.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def heap_frozen() -> Iterator[None]:
    """The objects alive now left out of the collector's passes for the block, put back
    after it; nothing done where the process froze some itself or collects none.

    Returns:
        A context manager.

    >>> before = gc.get_freeze_count()
    >>> with heap_frozen():
    ...     gc.get_freeze_count() > 0
    True
    >>> gc.get_freeze_count() <= before   # as before (frozen objects may have been freed)
    True
    """
    if gc.get_freeze_count() or not gc.isenabled():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()

"""How long the op trace's wrappers stay in place: between traces in a worker
(:func:`keep_installed`), or for a block that opens traces (:func:`in_place`: a probe in the
user's process). Each ``op_trace`` counts itself in and out; the wrappers are put in place at
the first count and the originals put back after the last, unless kept. A wrapper outside a
trace is a passthrough (the thread's trace is ``None``: the op is called as it is).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from dtype_explorer.keras_run.trace._op_trace import install, resident, uninstall

__all__ = ["in_place", "keep_installed"]


@contextmanager
def in_place() -> Iterator[None]:
    """The wrappers in place for the length of the block, then as they were: what the block
    patches of Keras's functions meanwhile (a probe's random draws, recorded) is patched over
    the wrappers, as in a worker that keeps them, and put back before them. Patched first
    and bound after, the trace found Keras's modules changed, so it looked for every binding
    again (~10 ms) at each probe in the user's process, and kept the patches as what it wraps.

    Returns:
        A context manager; the originals are put back when it closes (unless kept installed
        or a trace is open), also when the block raises.

    >>> import keras
    >>> with in_place():
    ...     hasattr(keras.ops.add, "__wrapped__"), float(keras.ops.add(1.0, 2.0))
    (True, 3.0)
    >>> hasattr(keras.ops.add, "__wrapped__")
    False
    """
    install()
    try:
        yield
    finally:
        uninstall()


def keep_installed(on: bool = True) -> None:
    """Keep the op trace's wrappers in place between traces (``on``), or put the originals
    back now and after each trace again (``False``, the default of a process).

    A worker keeps them: opening a trace then costs a check instead of re-binding ~1,700 names
    and the operators of the tensor classes, and a wrapper outside a trace is a passthrough
    (the thread's trace is ``None``: the op is called as it is). In the user's own kernel
    they are never left in place: the kernel's ``keras.ops`` stay Keras's own objects.

    Args:
        on: keep them (the wrappers are put in place now), or not.

    >>> import keras
    >>> keep_installed()
    >>> keras.ops.add.__wrapped__.__module__, float(keras.ops.add(1.0, 2.0))
    ('keras.src.ops.numpy', 3.0)
    >>> keep_installed(False)
    >>> hasattr(keras.ops.add, "__wrapped__")
    False
    """
    resident(on)

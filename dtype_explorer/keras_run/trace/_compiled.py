"""The op trace where a backend compiles the user's code: ``torch.compile`` (Dynamo) traces
the Python of a function it compiles, the trace's wrappers included. While it does, a wrapper
is the op alone (:func:`compiler_tracing`), and what was compiled while a trace was open is
counted from Dynamo's own count (:func:`frames_compiled`), for the note that says its ops ran
in the compiled graph. ``jax.jit`` and ``tf.function`` hand the wrappers abstract tensors,
which the trace records without values; nothing here is theirs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

__all__ = ["compiler_tracing", "frames_compiled"]


def compiler_tracing(backend: str) -> Callable[[], bool] | None:
    """On torch, ``torch.compiler.is_compiling``: while Dynamo traces a function the user
    compiled (``torch.compile``), a wrapper is the op alone, so Dynamo inlines Keras's op as
    it does untraced (it had traced the recorder itself: two dozen warnings naming this
    package, values read from fake tensors). What the compiled code runs is not seen, as
    with ``jax.jit`` and ``tf.function``; ``dx.trace(eager=True)`` runs it op by op.
    ``None`` on every other backend."""
    if backend != "torch":
        return None
    import torch

    return torch.compiler.is_compiling


def frames_compiled() -> int:
    """How many frames ``torch.compile`` (Dynamo) has compiled in this process so far: its
    own count, ``counters["frames"]["total"]``; 0 where Dynamo was never imported (nothing
    was compiled), so opening a trace imports nothing."""
    utils = sys.modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", None)
    try:
        return int(counters["frames"]["total"]) if counters is not None else 0
    except (KeyError, TypeError, ValueError):
        return 0

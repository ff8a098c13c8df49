"""Compiled functions run op by op for a traced run (``dx.trace(eager=True)``,
``%%dtype_trace --eager``): the backend's own switch, set for the block and put back after.

A function a backend has compiled runs as one call: ``jax.jit`` and ``tf.function`` run the
graph they traced the first time, so the second call runs no Python and no Keras op the trace
could see; the first call's ops get tracers or graph tensors, with dtypes but no values. Keras
compiles its ``predict`` and ``fit`` steps so, and keras-hub its ``generate()`` (its sampler's
``while_loop`` too). Each backend has a switch that runs them eagerly instead, every op with
its values:

- **tensorflow**: ``tf.config.run_functions_eagerly(True)`` (a ``tf.function`` runs its
  Python; ``tf.while_loop`` runs as a Python loop);
- **jax**: ``jax.disable_jit()`` (``jax.jit`` calls the function; ``lax.scan``,
  ``while_loop`` and ``cond`` run op by op);
- **torch**: ``torch.compiler.set_stance("force_eager")`` (``torch.compile`` runs the function
  as written);
- **numpy**, **openvino**: Keras runs their ops eagerly already (openvino's ``predict``
  compiles a graph with ``ov.compile_model``, which no switch opens).

What runs eagerly computes with the same dtypes (Keras's rules are the same), but not always
the same numbers: XLA may fuse ops and keep intermediates wider. The trace result says that
compiled functions ran eagerly (``CodeEnvironment.eager``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class _Open(threading.local):
    """How many ``compiled_run_eagerly(True, ...)`` blocks are open on this thread (the one
    whose trace asks)."""

    blocks = 0


_OPEN = _Open()


def running_eagerly() -> bool:
    """Whether a :func:`compiled_run_eagerly` block with ``eager`` is open on this thread."""
    return _OPEN.blocks > 0


@contextlib.contextmanager
def compiled_run_eagerly(eager: bool, backend: str) -> Iterator[None]:
    """With ``eager``, ``backend``'s compiled functions run op by op inside the block (its own
    switch, put back after, also when the block raises), and :func:`running_eagerly` says so
    meanwhile; without it, nothing is touched.

    Args:
        eager: whether to switch compilation off.
        backend: the backend this process runs (``keras.backend.backend()``).

    >>> import jax
    >>> with compiled_run_eagerly(True, "jax"):
    ...     print(jax.config.jax_disable_jit, running_eagerly())
    True True
    >>> jax.config.jax_disable_jit, running_eagerly()
    (False, False)
    """
    if not eager:
        yield
        return
    _OPEN.blocks += 1
    try:
        with _switched(backend):
            yield
    finally:
        _OPEN.blocks -= 1


@contextlib.contextmanager
def _switched(backend: str) -> Iterator[None]:
    """``backend``'s own switch set for the block (numpy and openvino have none)."""
    if backend not in ("tensorflow", "jax", "torch"):
        yield
        return
    if backend == "tensorflow":
        import tensorflow as tf

        before = tf.config.functions_run_eagerly()
        tf.config.run_functions_eagerly(True)
        try:
            yield
        finally:
            tf.config.run_functions_eagerly(before)
    elif backend == "jax":
        import jax

        with jax.disable_jit():
            yield
    else:
        import torch

        with torch.compiler.set_stance("force_eager"):
            yield

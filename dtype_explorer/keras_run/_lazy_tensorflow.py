"""TensorFlow left unimported where Keras asks for it only to tell a TensorFlow object.

Keras's ``serialize_keras_object`` asks ``tf.available`` (``keras.src.utils.module_utils``'s
lazy ``tensorflow``) of every object it writes, to tell a ``tf.TensorShape``, ``tf.DType`` or
``tf.TypeSpec``; asking imports TensorFlow where it is installed. So on jax, torch, NumPy and
OpenVINO the first ``get_config()``, ``.keras`` archive or config an audit or a probe of a
user's instance writes imported all of TensorFlow into the user's process: 1.5 s and some
hundred MB, for an answer that cannot be yes (no object is a TensorFlow object in a process
that never imported TensorFlow).

:func:`tensorflow_if_imported` gives ``serialization_lib`` a stand-in for the block, whose
``available`` is Keras's own answer where TensorFlow is imported already and ``False`` where it
is not; every other attribute is read from Keras's lazy module. The answer is the same either
way, for every thread that serializes meanwhile; Keras's other users of the lazy module (the
lookup layers, ``set_random_seed``) are left as they are.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["tensorflow_if_imported"]


class _ImportedOnly:
    """Keras's lazy ``tensorflow`` module, ``available`` only where TensorFlow is imported."""

    def __init__(self, lazy: Any) -> None:
        self._lazy = lazy

    @property
    def available(self) -> bool:
        return "tensorflow" in sys.modules and bool(self._lazy.available)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lazy, name)

    def __repr__(self) -> str:
        return f"{self._lazy!r} (available where imported)"


#: The modules of Keras that ask ``tf.available`` only to tell a TensorFlow object they write:
#: ``serialize_keras_object``'s (every config, every ``.keras`` archive).
WRITERS = ("keras.src.saving.serialization_lib",)
#: The legacy ``.h5`` format's JSON helpers, which ask it as they write and as they read: only
#: around a file the tool writes and reads back itself (its reading of a file written where
#: TensorFlow was imported would differ).
LEGACY_H5 = ("keras.src.legacy.saving.json_utils",)


@contextlib.contextmanager
def tensorflow_if_imported(modules: tuple[str, ...] = WRITERS) -> Iterator[None]:
    """Each of ``modules``' ``tf`` made the stand-in for the block, unless it is already (a
    nested block) or is not Keras's lazy module (another Keras, or someone else's): then that
    one is left as it is. Each is put back after, unless someone re-bound it meanwhile.

    Args:
        modules: the Keras modules whose ``tf`` is replaced (:data:`WRITERS`, and
            :data:`LEGACY_H5` around the tool's own ``.h5`` round trip).

    Returns:
        A context manager.

    >>> import keras
    >>> from keras.src.saving import serialization_lib
    >>> with tensorflow_if_imported():
    ...     print(type(serialization_lib.tf).__name__, keras.layers.Dense(2).get_config()["units"])
    _ImportedOnly 2
    >>> type(serialization_lib.tf).__name__
    'LazyModule'
    """
    replaced: list[tuple[Any, Any, _ImportedOnly]] = []
    try:  # replaced inside the try: a failure (or Ctrl-C) half-way puts back what was
        _replace(modules, replaced)
        yield
    finally:
        for module, lazy, stand_in in replaced:
            if module.tf is stand_in:
                module.tf = lazy


def _replace(modules: tuple[str, ...], replaced: list) -> None:
    """Each of ``modules``' lazy ``tf`` replaced by a stand-in, appended to ``replaced`` as it
    is (``(module, lazy, stand_in)``)."""
    try:
        from keras.src.utils.module_utils import LazyModule
    except ImportError:  # a Keras without it: nothing to leave out
        return
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        lazy = getattr(module, "tf", None)
        if isinstance(lazy, LazyModule):
            stand_in = _ImportedOnly(lazy)
            module.tf = stand_in
            replaced.append((module, lazy, stand_in))

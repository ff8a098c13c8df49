"""Keras's global dtype settings, put back as they were after a probe or an audit."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def preserved_keras_state() -> Iterator[None]:
    """Restore ``floatx`` and the global dtype policy (even an unset one) on exit."""
    import keras
    from keras.src.backend.common import global_state

    floatx = keras.config.floatx()
    policy = global_state.get_global_attribute("dtype_policy", None)
    try:
        yield
    finally:
        keras.config.set_floatx(floatx)
        global_state.set_global_attribute("dtype_policy", policy)

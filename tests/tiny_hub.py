"""The tiny keras-hub GPT-2 the tests build from a config (no download): 2 blocks of 2 heads,
hidden size 16, a 50-token vocabulary, under the policy asked (the global policy put back).
keras-hub is part of the test environment: without it the caller's test fails, never skips."""

from __future__ import annotations

from typing import Any

import pytest

#: The config every tiny GPT-2 of the tests shares (a caller may change any of it).
TINY_GPT2 = {
    "vocabulary_size": 50,
    "num_layers": 2,
    "num_heads": 2,
    "hidden_dim": 16,
    "intermediate_dim": 32,
    "max_sequence_length": 16,
}


def tiny_gpt2(policy: str = "float32", **config: Any) -> Any:
    """A ``GPT2Backbone`` of :data:`TINY_GPT2` (updated by ``config``) built under ``policy``."""
    import keras

    try:
        import keras_hub
    except ImportError as error:  # the hub extra is part of the test environment: no skip
        pytest.fail(f"keras-hub is needed (pip install 'dtype-explorer[hub]'): {error}")

    keras.config.set_dtype_policy(policy)
    try:
        return keras_hub.models.GPT2Backbone(**{**TINY_GPT2, **config})
    finally:
        keras.config.set_dtype_policy("float32")

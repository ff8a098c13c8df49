"""The dtype a variable reads as inside a layer's autocast scope (``trace.variable_dtypes``)
is Keras's own ``variable.value`` dtype there, for every scope, dtype held and ``autocast``
flag, in whatever order they come (``_call_trace._read_dtype`` keeps Keras's answer per what
its autocast reads); a variable or scope whose class reads another way is asked each time."""

from __future__ import annotations

import itertools

import keras
import numpy as np
from keras.src.backend.common.variables import AutocastScope

from dtype_explorer.keras_run.trace import _call_trace, variable_dtypes


def _variables() -> list[keras.Variable]:
    return [
        keras.Variable(
            np.ones(3, dtype),
            dtype=dtype,
            autocast=autocast,
            trainable=dtype != "int32",  # (torch: only a float tensor takes a gradient)
            name=f"{dtype}_{autocast}",
        )
        for dtype, autocast in itertools.product(("float32", "float64", "int32"), (True, False))
    ]


def test_every_read_is_the_dtype_keras_reads_it_in_each_scope_in_any_order():
    variables = _variables()
    scopes = [None, "float16", "bfloat16", "float32", "float64"]
    for order in (scopes, scopes[::-1]):  # an answer kept for one scope never serves another
        for scope, variable in itertools.product(order, variables):
            with AutocastScope(scope):
                raw = keras.backend.standardize_dtype(variable.value.dtype)
                read = variable_dtypes(variable).read
            assert read == raw, (scope, variable.name, read, raw)
    with AutocastScope("float16"):  # and a scope left is no scope
        pass
    for variable in variables:
        raw = keras.backend.standardize_dtype(variable.value.dtype)
        assert variable_dtypes(variable).read == raw


class _Halved(keras.Variable):
    """A variable whose class reads another way than Keras's own autocast."""

    def _maybe_autocast(self, value):
        return keras.ops.cast(value, "float16")


class _Scope(AutocastScope):
    """A scope whose class casts another way than Keras's own."""

    def maybe_cast(self, value):
        return keras.ops.cast(value, "bfloat16")


def test_a_class_that_reads_its_own_way_is_asked_each_time():
    halved = _Halved(np.ones(3, "float32"), name="halved")
    plain = keras.Variable(np.ones(3, "float32"), name="plain")
    assert variable_dtypes(halved).read == "float16"  # no scope: its own read still casts
    with AutocastScope("float16"):
        assert variable_dtypes(plain).read == "float16"
        assert _call_trace._autocast_key(plain, "float32") is not None
    with _Scope("float16"):
        assert variable_dtypes(plain).read == "bfloat16"  # not float16's answer kept above
        assert _call_trace._autocast_key(plain, "float32") is None
    assert _call_trace._autocast_key(halved, "float32") is None
    own = keras.Variable(np.ones(3, "float32"), name="own")  # an instance's own read
    own._maybe_autocast = lambda value: keras.ops.cast(value, "bfloat16")
    with AutocastScope("float16"):
        assert variable_dtypes(own).read == "bfloat16"  # not float16's answer kept above
        assert variable_dtypes(plain).read == "float16"  # nor its answer kept for others


def test_a_float64_read_follows_the_setting_of_the_moment():
    """Whether a read in float64 is float64 follows settings a process may change (jax's
    ``jax_enable_x64``): such a read is made each time, never served from what was kept."""
    variable = keras.Variable(np.ones(3, "float32"), name="w")
    jax = None
    if keras.backend.backend() == "jax":
        import jax
    before = jax.config.jax_enable_x64 if jax else None
    try:
        for x64 in [False, True, False] if jax else [None]:
            if jax:
                jax.config.update("jax_enable_x64", x64)
            with AutocastScope("float64"):
                raw = keras.backend.standardize_dtype(variable.value.dtype)
                assert variable_dtypes(variable).read == raw, (x64, raw)
    finally:
        if jax:
            jax.config.update("jax_enable_x64", before)

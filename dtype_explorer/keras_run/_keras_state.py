"""Keras's global settings: put back after a probe or an audit, taken in turns by threads, and
watched in a worker for anything a user's layer changed.

Keras keeps its configuration per process (``floatx``, the global dtype policy, ``epsilon``,
``image_data_format``, safe mode, ...), and so do its backends (``jax_enable_x64``, torch's
default dtype, TensorFlow's NumPy behaviour). Three things guard it:

* :func:`preserved_keras_state` restores floatx and the global policy after a probe or an
  audit, and holds :data:`KERAS_STATE_LOCK` meanwhile: in-process probes and audits in several
  threads take turns instead of seeing each other's floatx and policy.
* :func:`global_settings` reads every process-wide setting of Keras and of the backends this
  process imported that can change an answer; :func:`restore_settings` puts back a reading.
  A worker compares them around every probe (``runtime._worker``).

>>> before = global_settings()                     # doctest: +SKIP
>>> import keras; keras.config.set_epsilon(1e-3)    # doctest: +SKIP
>>> restore_settings(before)                        # doctest: +SKIP
['keras.epsilon']
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

#: Held by every in-process probe and audit while it changes Keras's global state (reentrant:
#: a probe's reference run nests inside it).
KERAS_STATE_LOCK = threading.RLock()


@contextlib.contextmanager
def preserved_keras_state(seeds: bool = True) -> Iterator[None]:
    """Hold :data:`KERAS_STATE_LOCK`, and restore ``floatx``, the global dtype policy (even
    an unset one) and, with ``seeds``, the random streams (:func:`global_seed_kept`) on exit.

    Args:
        seeds: put the random streams back too: the tool's own work (a probe, an audit), not
            the user's code run under the tool's settings (``dx.trace(policy=...)``), whose
            draws are the user's as they would be without the tool.
    """
    import keras
    from keras.src.backend.common import global_state

    kept = global_seed_kept() if seeds else contextlib.nullcontext()
    with KERAS_STATE_LOCK, kept:
        floatx = keras.config.floatx()
        policy = global_state.get_global_attribute("dtype_policy", None)
        try:
            yield
        finally:
            keras.config.set_floatx(floatx)
            global_state.set_global_attribute("dtype_policy", policy)


@contextlib.contextmanager
def global_seed_kept() -> Iterator[None]:
    """Put back the random streams the tool's own work draws from, as they were: Keras's
    global seed generator (what every unseeded draw takes its seed from: a random op, a
    dropout), Python's ``random`` (each initializer made with no seed takes its seed from it:
    every layer a load, a clone or a quantization builds), and torch's global generator
    where torch is imported (an unseeded dropout, a fit step on torch). Where no seed
    generator existed yet (Keras makes it at the first draw), none is left: the user's next
    draw would otherwise take the second seed of the stream, not the first. NumPy's global
    stream is not read: no probe or audit mode drew from it on any backend (measured), and
    reading and setting it cost 70 us, more than a small probe's answer can spare.

    The generator's state is put back only where it changed (on jax a changed state is a
    new array; tensorflow and torch change it in place, and are compared): an assign costs
    50-80 us there, more than the rest together.
    """
    from keras.src.backend.common import global_state

    generator = global_state.get_global_attribute("global_seed_generator")
    held = None if generator is None else _held(generator.state)
    python_state = random.getstate()
    torch = sys.modules.get("torch")  # Keras's torch backend draws from torch's own stream
    torch_state = torch.get_rng_state() if torch is not None else None
    try:
        yield
    finally:
        global_state.set_global_attribute("global_seed_generator", generator)
        if generator is not None:
            _put_back(generator.state, held)
        random.setstate(python_state)
        if torch_state is not None:
            torch.set_rng_state(torch_state)


def _held(variable: Any) -> Any:
    """``variable``'s value as it is now: the array itself where the backend never changes
    one in place (jax, NumPy, OpenVINO), else a NumPy copy (tensorflow, torch)."""
    import keras

    value = variable.value
    if keras.backend.backend() in ("tensorflow", "torch"):
        return np.array(keras.ops.convert_to_numpy(value))
    return value


def _put_back(variable: Any, held: Any) -> None:
    """``variable`` given ``held`` back, where its value is no longer it."""
    import keras

    now = variable.value
    if isinstance(held, np.ndarray):
        if np.array_equal(np.asarray(keras.ops.convert_to_numpy(now)), held):
            return
    elif now is held:
        return
    variable.assign(held)


@dataclasses.dataclass(frozen=True)
class _Setting:
    """One process-wide setting: how to read it and how to put a reading back (``None``: it
    cannot be put back, the process must be replaced)."""

    name: str
    get: Callable[[], Any]
    put: Callable[[Any], None] | None


def global_settings() -> dict[str, Any]:
    """Every process-wide setting of Keras and of the backend libraries this process imported
    that can change a probe's answer, by name (``keras.floatx``, ``jax.jax_enable_x64``,
    ``torch.default_dtype``, ...). Compare two readings with :func:`changed_settings`."""
    found = {setting.name: setting.get() for setting in _settings(jax_flags=False)}
    if "jax" in sys.modules:  # every flag from one reading of jax's config (a dict per read)
        with contextlib.suppress(Exception):
            found.update(_jax_readings())
    return found


def describe_settings() -> dict[str, str]:
    """:func:`global_settings` as text (what a reading prints), to send or compare elsewhere."""
    return {name: _text(value) for name, value in global_settings().items()}


def changed_settings(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The names of the settings whose value differs between two readings (a setting that only
    appeared, because a library was imported since, is not a change)."""
    return sorted(n for n in before.keys() & after.keys() if not _same(before[n], after[n]))


#: Values whose equality is their text's (``_text``): compared without printing them.
_PLAIN = (bool, int, str, type(None))


def _same(before: Any, after: Any) -> bool:
    """Whether two readings of a setting are the same (as :func:`_text` compares them)."""
    if before is after or (
        type(before) in _PLAIN and type(after) is type(before) and before == after
    ):
        return True
    return _text(before) == _text(after)


def restore_settings(before: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Put back every setting that differs from the reading ``before``.

    Returns:
        ``(restored, unrestorable)``: the names put back, and those that could not be (a
        changed backend, a setter that failed or did not take): a process with any of those
        must not answer again.
    """
    now = global_settings()
    changed = changed_settings(before, now)
    if not changed:
        return [], []
    by_name = {setting.name: setting for setting in _settings()}
    restored, failed = [], []
    for name in changed:
        setting = by_name.get(name)
        try:
            if setting is None or setting.put is None:
                raise LookupError(name)
            setting.put(before[name])
        except Exception:
            failed.append(name)
            continue
        restored.append(name)
    still = set(changed_settings(before, global_settings()))
    return [n for n in restored if n not in still], sorted(set(failed) | still)


def _text(value: Any) -> str:
    """A setting's value for comparing (policies and dtypes compare by what they print)."""
    if hasattr(value, "name") and type(value).__name__.endswith("DTypePolicy"):
        return f"{type(value).__name__}({value.name})"
    return repr(value)


#: Keras's global attributes that are settings (the others are scopes and counters that
#: change with every call).
_KERAS_ATTRIBUTES = (
    "dtype_policy",
    "safe_mode_saving",
    "flash_attention",
    "traceback_filtering",
    "nnx_enabled",
    "distribution",
    "global_random_seed",
    "use_legacy_config",
)


def _settings(*, jax_flags: bool = True) -> list[_Setting]:
    """Every setting, how to read and put it back; ``jax_flags=False``: without jax's flags
    (:func:`global_settings` reads them all at once: :func:`_jax_readings`)."""
    import keras
    from keras.src.backend.common import global_state

    def attribute(name: str) -> _Setting:
        return _Setting(
            f"keras.{name}",
            lambda: global_state.get_global_attribute(name, None),
            lambda value: global_state.set_global_attribute(name, value),
        )

    found = [
        _Setting("keras.backend", keras.config.backend, None),
        _Setting("keras.floatx", keras.config.floatx, keras.config.set_floatx),
        _Setting("keras.epsilon", keras.config.epsilon, keras.config.set_epsilon),
        _Setting(
            "keras.image_data_format",
            keras.config.image_data_format,
            keras.config.set_image_data_format,
        ),
        *(attribute(name) for name in _KERAS_ATTRIBUTES),
    ]
    for library, settings in (
        ("jax", _jax_settings if jax_flags else list),
        ("torch", _torch_settings),
        ("tensorflow", _tensorflow_settings),
    ):
        if library in sys.modules:  # a library not imported has its defaults
            with contextlib.suppress(Exception):  # a version without one of these getters
                found += settings()
    found.append(_Setting("numpy.errstate", np.geterr, lambda v: np.seterr(**v)))
    return found


def _jax_settings() -> list[_Setting]:
    import jax

    values = jax.config.values  # every flag, read once (a new dict on each access)

    def flag(name: str) -> _Setting:
        return _Setting(
            f"jax.{name}", lambda: values.get(name), lambda value: jax.config.update(name, value)
        )

    return [flag(name) for name in sorted(values)]


def _jax_readings() -> dict[str, Any]:
    """Every jax flag's value, named as :func:`_jax_settings` names them."""
    import jax

    return {f"jax.{name}": value for name, value in jax.config.values.items()}


def _torch_settings() -> list[_Setting]:
    import torch

    found = [
        _Setting("torch.default_dtype", torch.get_default_dtype, torch.set_default_dtype),
        _Setting(
            "torch.float32_matmul_precision",
            _torch_matmul_precision,
            torch.set_float32_matmul_precision,
        ),
        _Setting(
            "torch.deterministic_algorithms",
            torch.are_deterministic_algorithms_enabled,
            torch.use_deterministic_algorithms,
        ),
        _Setting(
            "torch.cuda_matmul_allow_tf32",
            lambda: torch.backends.cuda.matmul.allow_tf32,
            lambda v: setattr(torch.backends.cuda.matmul, "allow_tf32", v),
        ),
        _Setting(
            "torch.cudnn_allow_tf32",
            lambda: torch.backends.cudnn.allow_tf32,
            lambda v: setattr(torch.backends.cudnn, "allow_tf32", v),
        ),
    ]
    if hasattr(torch, "get_default_device"):
        found.append(
            _Setting("torch.default_device", torch.get_default_device, torch.set_default_device)
        )
    return found


def _torch_matmul_precision() -> str:
    """``torch.get_float32_matmul_precision()``; torch refuses it after a mix of its legacy
    (``allow_tf32``) and new (``fp32_precision``) APIs: then the new API's reading."""
    import torch

    try:
        return torch.get_float32_matmul_precision()
    except RuntimeError:
        return f"fp32_precision={torch.backends.cuda.matmul.fp32_precision}"


def _tensorflow_settings() -> list[_Setting]:
    import tensorflow as tf
    from tensorflow.python.framework import config as tf_config
    from tensorflow.python.framework import ops
    from tensorflow.python.ops.numpy_ops import np_dtypes

    return [
        _Setting(
            "tensorflow.dtype_conversion_mode",
            ops.get_dtype_conversion_mode,
            lambda mode: ops.set_dtype_conversion_mode(mode.name.lower()),
        ),
        _Setting(
            "tensorflow.prefer_float32", np_dtypes.is_prefer_float32, np_dtypes.set_prefer_float32
        ),
        _Setting(
            "tensorflow.allow_float64", np_dtypes.is_allow_float64, np_dtypes.set_allow_float64
        ),
        _Setting(
            "tensorflow.tensor_float_32",
            tf.config.experimental.tensor_float_32_execution_enabled,
            tf.config.experimental.enable_tensor_float_32_execution,
        ),
        _Setting(
            "tensorflow.xla_auto_jit",
            tf.config.optimizer.get_jit,
            lambda value: tf.config.optimizer.set_jit(value or False),
        ),
        _Setting(
            "tensorflow.functions_run_eagerly",
            tf.config.functions_run_eagerly,
            tf.config.run_functions_eagerly,
        ),
        _Setting(
            "tensorflow.op_determinism",
            tf_config.is_op_determinism_enabled,
            lambda on: (
                tf_config.enable_op_determinism() if on else tf_config.disable_op_determinism()
            ),
        ),
    ]

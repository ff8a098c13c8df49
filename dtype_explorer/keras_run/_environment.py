"""The settings that change a probe's numbers without changing Keras's dtype rules: the float32
matmul precision in effect (TF32 or full float32), TensorFlow's XLA auto-jit, XLA's own flags
where jax or TensorFlow compile with XLA (``XLA_FLAGS``: fast math, the code generator's
optimisation level), and the kind of device. They are read once the backend is imported, for
the active backend only (:func:`read_environment`, into ``ProbeResult.environment``), and
``precision=`` sets them for one probe and puts them back (:func:`precision_set`).

On a GPU these are what part answers: jax and TensorFlow multiply float32 matrices in TF32 on
Ampere and later by default, torch does not; TensorFlow compiles with XLA where auto-jit is on.
On the CPU they are readable (and settable) too, and change nothing; except OpenVINO's, whose
CPU plugin infers in bfloat16 by default on a CPU with native bf16: Keras's eager openvino ops
ask it for f32, its ``model.predict`` compiles with the default (read, not set).

>>> check_precision("tf32"), check_precision(None)
('tf32', None)
>>> check_precision("fp32")
Traceback (most recent call last):
...
dtype_explorer.errors.InvalidSpecError: unknown precision 'fp32'; ...
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

from dtype_explorer.errors import unknown
from dtype_explorer.records import PRECISIONS

#: What each precision sets, per backend (``None``: the backend's own default).
#: jax: ``jax_default_matmul_precision``; torch: ``torch.set_float32_matmul_precision`` (which
#: sets ``torch.backends.cuda.matmul.allow_tf32`` with it) and ``torch.backends.cudnn.allow_tf32``
#: (convolutions); tensorflow: ``tf.config.experimental.enable_tensor_float_32_execution``.
JAX_PRECISION = {"highest": "highest", "tf32": "tensorfloat32", "default": None}
TORCH_PRECISION = {"highest": "highest", "tf32": "high", "default": "highest"}
TORCH_CUDNN_TF32 = {"highest": False, "tf32": True, "default": True}
TF_TF32 = {"highest": False, "tf32": True, "default": True}


def check_precision(precision: Any) -> str | None:
    """``precision`` if it is one of ``records.PRECISIONS`` (or ``None``: leave the settings).

    Raises:
        InvalidSpecError: naming what was received, what is valid and the closest match.
    """
    if precision is None or (isinstance(precision, str) and precision in PRECISIONS):
        return precision
    raise unknown("precision", precision, PRECISIONS)


def read_environment(backend: str) -> dict[str, str]:
    """The device kind and the number-changing settings of ``backend``, as text; a setting
    that cannot be read says so (``"unreadable: RuntimeError: ..."``) rather than failing."""
    found = {"device": _guarded(lambda: _DEVICE_KIND.get(backend, _cpu)())}
    for name, read in _READERS.get(backend, {}).items():
        found[name] = _guarded(read)
    if backend == "tensorflow" and "TF_XLA_FLAGS" in os.environ:
        found["TF_XLA_FLAGS"] = os.environ["TF_XLA_FLAGS"]
    if backend in ("jax", "tensorflow") and os.environ.get("XLA_FLAGS"):
        found["XLA_FLAGS"] = os.environ["XLA_FLAGS"]
    return found


def _guarded(read: Callable[[], Any]) -> str:
    try:
        return str(read())
    except Exception as exc:  # a library version without this getter, a mixed torch API
        return f"unreadable: {type(exc).__name__}: {str(exc)[:80]}"


@contextlib.contextmanager
def precision_set(precision: str | None, backend: str) -> Iterator[None]:
    """Set the float32 matmul precision of ``backend`` for the block, and put back what it was
    (``None``: nothing is touched). The numpy backend has no such setting (NumPy multiplies in
    float32): nothing to set."""
    setter = _SETTERS.get(backend) if precision is not None else None
    if setter is None:
        yield
        return
    put_back = setter(precision)
    try:
        yield
    finally:
        put_back()


# ------------------------------------------------------------------------------ per backend


def _jax_set(precision: str) -> Callable[[], None]:
    import jax

    before = jax.config.values.get("jax_default_matmul_precision")
    jax.config.update("jax_default_matmul_precision", JAX_PRECISION[precision])
    return lambda: jax.config.update("jax_default_matmul_precision", before)


def _torch_set(precision: str) -> Callable[[], None]:
    import torch

    before = torch.get_float32_matmul_precision()
    cudnn = torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision(TORCH_PRECISION[precision])
    torch.backends.cudnn.allow_tf32 = TORCH_CUDNN_TF32[precision]

    def put_back() -> None:
        torch.set_float32_matmul_precision(before)
        torch.backends.cudnn.allow_tf32 = cudnn

    return put_back


def _tf_set(precision: str) -> Callable[[], None]:
    import tensorflow as tf

    before = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(TF_TF32[precision])
    return lambda: tf.config.experimental.enable_tensor_float_32_execution(before)


_SETTERS: dict[str, Callable[[str], Callable[[], None]]] = {
    "jax": _jax_set,
    "torch": _torch_set,
    "tensorflow": _tf_set,
}


def _jax_precision() -> str:
    import jax

    value = jax.config.values.get("jax_default_matmul_precision")
    return "default" if value is None else str(value)


def _torch(attribute: str) -> Callable[[], Any]:
    def read() -> Any:
        import torch

        value: Any = torch
        for part in attribute.split("."):
            value = getattr(value, part)
        return value() if callable(value) else value

    return read


def _tf_jit() -> str:
    import tensorflow as tf

    return str(tf.config.optimizer.get_jit() or "off")


def _tf_tf32() -> bool:
    import tensorflow as tf

    return tf.config.experimental.tensor_float_32_execution_enabled()


def _openvino_precision() -> str:
    """The inference precision OpenVINO's CPU plugin picks by default (bf16 on CPUs with
    native bf16): Keras's eager ops compile with ``f32`` asked, its ``predict`` with this."""
    import openvino as ov
    from openvino.properties import hint

    found = ov.Core().get_property("CPU", hint.inference_precision)  # <Type: 'bfloat16'>
    return str(found).removeprefix("<Type: ").strip("'>")


_READERS: dict[str, dict[str, Callable[[], Any]]] = {
    "jax": {"jax_default_matmul_precision": _jax_precision},
    "torch": {
        "torch.float32_matmul_precision": _torch("get_float32_matmul_precision"),
        "torch.backends.cuda.matmul.allow_tf32": _torch("backends.cuda.matmul.allow_tf32"),
        "torch.backends.cudnn.allow_tf32": _torch("backends.cudnn.allow_tf32"),
    },
    "tensorflow": {"tf.tensor_float_32_execution": _tf_tf32, "tf.xla_auto_jit": _tf_jit},
    "openvino": {"openvino.cpu_inference_precision_default": _openvino_precision},
}


def _cpu() -> str:
    return "CPU"


def gpu_text(model: str, capability: Any) -> str:
    """``GPU NVIDIA H200 (compute capability 9.0)``; ``capability`` as ``(9, 0)`` or ``"9.0"``.

    >>> gpu_text("NVIDIA H200", (9, 0))
    'GPU NVIDIA H200 (compute capability 9.0)'
    """
    if isinstance(capability, tuple | list):
        capability = ".".join(str(part) for part in capability)
    return f"GPU {model} (compute capability {capability})" if capability else f"GPU {model}"


def _jax_device() -> str:
    import jax

    device = jax.devices()[0]
    if device.platform == "cpu":
        return "CPU"
    return gpu_text(device.device_kind, getattr(device, "compute_capability", None))


def _torch_device() -> str:
    import torch
    from keras.src.backend.torch.core import get_device

    device = str(get_device())
    if not device.startswith("cuda"):
        return "CPU" if device == "cpu" else device.upper()
    index = torch.cuda.current_device()
    return gpu_text(torch.cuda.get_device_name(index), torch.cuda.get_device_capability(index))


def _tf_device() -> str:
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus or not tf.config.list_logical_devices("GPU"):
        return "CPU"
    details = tf.config.experimental.get_device_details(gpus[0])
    return gpu_text(details.get("device_name", "unknown"), details.get("compute_capability"))


_DEVICE_KIND: dict[str, Callable[[], str]] = {
    "jax": _jax_device,
    "torch": _torch_device,
    "tensorflow": _tf_device,
    "numpy": _cpu,
    "openvino": _cpu,
}

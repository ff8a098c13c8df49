"""How the backends' workers share one GPU: each backend's default worker computes on the GPU
where there is one, and no worker takes all of its memory up front, so two workers of one
backend (and the other backends' workers) fit beside each other.

:func:`share_gpu` sets this in a worker before its backend imports (``runtime._worker.init``);
:func:`gpu_sharing` reads it back there, with what the backend itself says once imported
(TensorFlow's memory growth per GPU, torch's allocator), for tests and for a user who asks.

>>> sorted(SHARED)[:2]
['TF_CPP_MIN_LOG_LEVEL', 'TF_FORCE_GPU_ALLOW_GROWTH']
"""

from __future__ import annotations

import os
import sys
from typing import Any

#: Set in every worker: jax (also imported by Keras on the other backends) allocates as it
#: needs instead of 75% of the GPU at start; TensorFlow grows its memory (also set per GPU once
#: it imports, ``runtime._worker``); TensorFlow's C++ log stays quiet.
SHARED = {
    "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
    "TF_FORCE_GPU_ALLOW_GROWTH": "true",
    "TF_CPP_MIN_LOG_LEVEL": "3",
}
#: Set unless the user set them: torch's caching allocator (its default) with expandable
#: segments, so a worker's freed blocks do not fragment the memory the others need.
SHARED_DEFAULTS = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
#: The variables :func:`gpu_sharing` reads back.
READ_BACK = (*SHARED, *SHARED_DEFAULTS, "JAX_PLATFORMS")


def share_gpu(backend: str) -> None:
    """Set the GPU-sharing variables for a worker of ``backend``, before anything imports a
    backend. Only the jax worker lets jax see the GPU (Keras imports jax on every backend);
    torch and TensorFlow workers use it through their own library."""
    os.environ.update(SHARED)
    for name, value in SHARED_DEFAULTS.items():
        os.environ.setdefault(name, value)
    if backend != "jax":
        os.environ["JAX_PLATFORMS"] = "cpu"


def gpu_sharing() -> dict[str, Any]:
    """In a worker: the sharing variables as its backend saw them, and what the imported
    libraries report (``tensorflow.memory_growth``: one value per GPU; ``torch.allocator``:
    ``"native"`` is the caching allocator, ``None`` without CUDA; ``jax.platform``)."""
    found: dict[str, Any] = {name: os.environ.get(name) for name in READ_BACK}
    if "tensorflow" in sys.modules:
        import tensorflow as tf

        found["tensorflow.memory_growth"] = [
            tf.config.experimental.get_memory_growth(gpu)
            for gpu in tf.config.list_physical_devices("GPU")
        ]
    if "torch" in sys.modules:
        import torch

        found["torch.cuda"] = torch.cuda.is_available()
        # "native" is the caching allocator; a CPU-only build has none to report
        found["torch.allocator"] = (
            torch.cuda.get_allocator_backend() if torch.cuda.is_available() else None
        )
    if "jax" in sys.modules:
        import jax

        found["jax.platform"] = jax.devices()[0].platform
    return found

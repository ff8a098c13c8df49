"""Run in the fresh Colab-like environment (tests/frontends/test_colab_venv.py): what the
lessons' Colab cell does after its ``pip install``, on a runtime whose kernel has imported
``google.colab`` (faked here: Colab is not what the package explains), then a probe of Dense in
the worker of the backend it gave the kernel, beside bare Keras in the kernel. Prints one JSON
object. Not collected by pytest."""

from __future__ import annotations

import json
import sys
import types
from importlib import metadata

import numpy as np

sys.modules["google.colab"] = types.ModuleType("google.colab")

import dtype_explorer as dx  # noqa: E402

done = dx.colab.setup()
# The fake stood for Colab's kernel while the cell ran; jax imports google.colab.output where it
# sees google.colab (its debugger), which only Colab has.
del sys.modules["google.colab"]
installed = sorted(d.metadata["Name"].lower() for d in metadata.distributions())

import keras  # noqa: E402  (after setup: the backend it chose)

x = np.arange(6, dtype="uint8").reshape(2, 3)
raw = keras.backend.standardize_dtype(keras.layers.Dense(2)(x).dtype)
answer = dx.probe("Dense", "uint8", backend=done.kernel_backend, kwargs={"units": 2}, values=[x])
every = dx.probe("Dense", "uint8", backend="all", kwargs={"units": 2}, values=[x])
dx.shutdown()
print(
    json.dumps(
        {
            "setup": {
                "keras": done.keras,
                "backends": list(done.backends),
                "kernel_backend": done.kernel_backend,
                "changed": dict(done.changed),
            },
            "installed": installed,
            "keras": keras.__version__,
            "kernel_backend": keras.backend.backend(),
            "probe": {
                "status": answer.status,
                "keras": answer.versions["keras"],
                "output": answer.output_dtype,
                "raw": raw,
            },
            "every": [r.backend for r in (every if isinstance(every, dx.ProbeSet) else [every])],
        }
    )
)

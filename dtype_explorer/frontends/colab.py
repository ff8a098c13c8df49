"""Google Colab: what a lesson's first cell does there, and only there.

On Colab (``"google.colab" in sys.modules``) the cell installs dtype-explorer with pip, which
leaves Colab's Keras as it is (any Keras 3 from ``keras_release.LOWEST`` on satisfies the
package), then calls :func:`setup`: the workers are limited to the backends this runtime has
(``$DTYPE_EXPLORER_BACKENDS``, unless it is set already), and where Keras's own default
backend (``KERAS_BACKEND``, else ``keras.json``, else tensorflow) is not installed, the kernel
takes the first one that is. Lesson 7b, written for the Keras 2 kernel, calls
``setup(keras2=True)``: Colab runs one kernel, so this one becomes it (the ``tf_keras`` engine
made for Colab's TensorFlow, put first on ``sys.path``, ``TF_USE_LEGACY_KERAS=1``: what the
registered kernel's launcher does, ``engines.enter_kernel``). Colab's custom widget manager
needs nothing here: anywidget enables it when the explorer is made. Anywhere else (Binder,
JupyterLab, the lessons' runs under nbval and nbclient) the cell does nothing and
:func:`setup` changes nothing.

The cell, first in every lesson::

    import sys  # On Colab only: install dtype-explorer beside Colab's Keras, use its backends.
    if "google.colab" in sys.modules:
        %pip install --quiet dtype-explorer
        import dtype_explorer
        dtype_explorer.colab.setup()

>>> setup() is None  # not on Colab: nothing changed
True
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from dtype_explorer import keras_release
from dtype_explorer.runtime import engines, pool
from dtype_explorer.versions import keras_config_path

#: The module Colab's kernel has imported before any cell runs.
COLAB_MODULE = "google.colab"
#: Keras's backend when neither ``KERAS_BACKEND`` nor ``keras.json`` names one.
KERAS_DEFAULT_BACKEND = "tensorflow"


@dataclass(frozen=True)
class ColabSetup:
    """What :func:`setup` found and set on Colab.

    Attributes:
        keras: the Keras release the kernel will import (``"unknown"`` where no dist-info says).
        backends: the backends the workers may use (``$DTYPE_EXPLORER_BACKENDS``).
        kernel_backend: the backend this kernel's Keras will use.
        changed: the environment variables :func:`setup` set, with their values.
        engine: the Keras 2 engine this kernel entered (``setup(keras2=True)``), else ``None``.
    """

    keras: str
    backends: tuple[str, ...]
    kernel_backend: str
    changed: tuple[tuple[str, str], ...] = ()
    engine: str | None = None

    def __str__(self) -> str:
        set_here = ", ".join(f"{name}={value}" for name, value in self.changed) or "nothing"
        keras2 = f", tf.keras is Keras 2 ({self.engine})" if self.engine else ""
        return (
            f"dtype-explorer on Colab: Keras {self.keras} on {self.kernel_backend} in this "
            f"kernel{keras2}; workers for {', '.join(self.backends)} (set: {set_here})"
        )


def on_colab(modules: Mapping[str, object] | None = None) -> bool:
    """Whether this kernel is Colab's (its ``google.colab`` module is imported).

    >>> on_colab({}), on_colab({"google.colab": object()})
    (False, True)
    """
    return COLAB_MODULE in (sys.modules if modules is None else modules)


def setup(*, keras2: bool = False, quiet: bool = False) -> ColabSetup | None:
    """On Colab, let dtype-explorer use the backends this runtime has; elsewhere nothing.

    Args:
        keras2: make this kernel the Keras 2 kernel first (lesson 7b): the ``tf_keras`` engine
            for this TensorFlow is made (pip, once) and entered; before anything imports
            TensorFlow or Keras.
        quiet: print nothing (by default one line says what was found and set).

    Returns:
        What was found and set in ``os.environ`` (read by the kernel's Keras when it is first
        imported, and by every worker), or ``None`` off Colab (nothing read, nothing set).

    >>> import dtype_explorer as dx
    >>> dx.colab.setup() is None   # in JupyterLab, on Binder, in a test
    True
    """
    if not on_colab():
        return None
    before = dict(os.environ)
    engine = engines.enter_kernel("tf_keras", progress=not quiet) if keras2 else None
    if not os.environ.get(pool.ENV_BACKENDS, "").strip():  # all allowed: the installed ones
        os.environ[pool.ENV_BACKENDS] = ",".join(pool.installed_backends())
    allowed = pool.installed_backends()
    kernel = _kernel_backend(os.environ)
    if allowed and not pool.installed(kernel) and "keras" not in sys.modules:
        kernel = os.environ["KERAS_BACKEND"] = allowed[0]
    release = keras_release.installed()
    done = ColabSetup(
        keras=release[0] if release else "unknown",
        backends=tuple(allowed),
        kernel_backend=kernel,
        changed=tuple((k, v) for k, v in os.environ.items() if before.get(k) != v),
        engine=engine.spec if engine else None,
    )
    if not quiet:
        print(done)
    return done


def _kernel_backend(environ: Mapping[str, str]) -> str:
    """The backend Keras will import: ``KERAS_BACKEND``, else ``keras.json``'s, else its
    default (as ``keras/src/backend/config.py`` decides)."""
    named = environ.get("KERAS_BACKEND", "").strip()
    if named:
        return named
    try:
        with open(keras_config_path(), encoding="utf-8") as file:
            config = json.load(file)
    except (OSError, ValueError):
        return KERAS_DEFAULT_BACKEND
    backend = config.get("backend") if isinstance(config, dict) else None
    return backend if isinstance(backend, str) and backend else KERAS_DEFAULT_BACKEND

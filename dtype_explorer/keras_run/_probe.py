"""Run one probe in this process, on the backend Keras imported: the one entry point, which
sets the policy and floatx, hands the spec to its target's path (``_probe_layer``,
``_probe_op``, ``_probe_objective``) and turns a spec Keras cannot run into an ``invalid``
result.

A probe builds the target under the requested policy, calls it eagerly on a sample, and
observes every dtype on the way by running Keras: ``keras.ops.convert_to_tensor`` for the
``converted`` stage, a wrapper around the layer's own ``call`` for what it *received* and the
variables it *read*, and the returned tensors for ``output``. The symbolic call gives the
declared dtype; ``rules`` gives the documented one.

>>> from dtype_explorer.timing import ms
from dtype_explorer.records import ProbeSpec
>>> import keras
>>> r = run(ProbeSpec(target="Dense", input_dtypes=("float64",), kwargs={"units": 2},
...                   backend=keras.backend.backend()))
>>> r.output_dtype
'float32'
"""

from __future__ import annotations

import time
from typing import Any

from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import catalog
from dtype_explorer.keras_run._keras_state import preserved_keras_state
from dtype_explorer.keras_run._modes import check_mode
from dtype_explorer.keras_run._observe import (
    Invalid,
    error_info,
)
from dtype_explorer.keras_run._probe_layer import layer_class, layer_entry, run_layer
from dtype_explorer.keras_run._probe_objective import run_objective
from dtype_explorer.keras_run._probe_op import run_op
from dtype_explorer.records import (
    ProbeResult,
    ProbeSpec,
)
from dtype_explorer.timing import ms
from dtype_explorer.versions import versions


def run(spec: ProbeSpec, *, target: Any = None, trace: bool = True) -> ProbeResult:
    """Probe ``spec`` here. Keras errors become results; the global Keras state is restored.

    ``target`` is the user layer (a ``Layer`` subclass or instance) behind a
    ``"custom:<Name>"`` spec. ``trace=False`` leaves the op trace out (benchmarks compare).
    """
    import keras

    backend = keras.backend.backend()
    if spec.backend != backend:
        raise InvalidSpecError(
            f"this process runs Keras on {backend!r}, not {spec.backend!r}; "
            "probe other backends through dtype_explorer.pool"
        )
    started = time.perf_counter()
    timings: dict[str, float] = {}
    base = {"spec": spec, "backend": backend, "versions": versions(backend), "timings": timings}
    try:
        with preserved_keras_state():
            if spec.floatx:
                keras.config.set_floatx(spec.floatx)
            keras.config.set_dtype_policy(spec.policy)
            if spec.mode != "call" and spec.target.startswith(("ops.", "losses.", "metrics.")):
                check_mode(spec.mode, spec.target, backend=backend)
            if spec.target.startswith("ops."):
                fields = run_op(spec, catalog.entry(spec.target), timings, trace)
            elif spec.target.startswith(("losses.", "metrics.")):
                fields = run_objective(spec, catalog.entry(spec.target), timings)
            else:
                fields = run_layer(
                    spec, layer_entry(spec, target), layer_class(spec, target), timings, trace
                )
    except Invalid as invalid:
        fields = {
            "status": "invalid",
            "error": error_info(invalid.error, invalid.where),
            "verdict": "error",
        }
    except (InvalidSpecError, ValueError, TypeError) as error:
        fields = {"status": "invalid", "error": error_info(error, "spec"), "verdict": "error"}
    timings["total_ms"] = ms(started)
    return ProbeResult(**base, **tool_failure_invalid(fields))


def tool_failure_invalid(fields: dict[str, Any]) -> dict[str, Any]:
    """A result's fields whose error is dtype-explorer's own (``where="tool"``) made
    ``invalid``: the tool's failure is never presented as Keras's answer."""
    error = fields.get("error")
    if error is None or error.where != "tool":
        return fields
    note = "dtype-explorer's own code failed here: this is not Keras's answer"
    basis = (*fields.get("basis", ()), note)
    return {**fields, "status": "invalid", "verdict": "error", "basis": basis}

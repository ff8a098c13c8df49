"""Run one probe in this process, on the backend Keras imported: the one entry point, which
sets the policy and floatx, hands the spec to its target's path (``_probe_layer``,
``_probe_op``, ``_probe_objective``) and turns a spec Keras cannot run into an ``invalid``
result.

A probe builds the target under the requested policy, calls it eagerly on a sample, and
observes every dtype on the way by running Keras: ``keras.ops.convert_to_tensor`` for the
``converted`` stage, a wrapper around the layer's own ``call`` for what it *received* and the
variables it *read*, and the returned tensors for ``output``. The symbolic call gives the
declared dtype; ``rules`` gives the documented one.

>>> from dtype_explorer.records import ProbeSpec
>>> import keras
>>> r = run(ProbeSpec(target="Dense", input_dtypes=("float64",), kwargs={"units": 2},
...                   backend=keras.backend.backend()))
>>> r.output_dtype
'float32'
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import catalog
from dtype_explorer.keras_run._environment import precision_set, read_environment
from dtype_explorer.keras_run._instance_kind import instance_kind
from dtype_explorer.keras_run._keras_state import preserved_keras_state
from dtype_explorer.keras_run._lazy_tensorflow import tensorflow_if_imported
from dtype_explorer.keras_run._mode_rules import check_mode
from dtype_explorer.keras_run.model import Packed, pack
from dtype_explorer.keras_run.probe._fields import ProbeFields
from dtype_explorer.keras_run.probe._layer import run_layer
from dtype_explorer.keras_run.probe._layer_target import layer_class, layer_entry
from dtype_explorer.keras_run.probe._objective import run_objective
from dtype_explorer.keras_run.probe._observe import (
    Invalid,
    error_info,
)
from dtype_explorer.keras_run.probe._op import run_op
from dtype_explorer.keras_run.probe._quantize_layer import QuantizeRefused
from dtype_explorer.keras_run.probe._stages import supplied, timed
from dtype_explorer.keras_run.trace import in_place as trace_in_place
from dtype_explorer.keras_run.trace import op_kernel, placed
from dtype_explorer.records import (
    ProbeResult,
    ProbeSpec,
    Supplied,
)
from dtype_explorer.timing import ms
from dtype_explorer.versions import versions


def _packed(target: Any, timings: dict[str, float]) -> Packed | None:
    """The instance as it travels (``pack``: written to a ``.keras`` archive here, in
    process); ``None`` for a class or no target. An instance Keras cannot save is the spec's
    (``Invalid`` at ``"copy"``)."""
    if isinstance(target, Packed):
        return target
    if target is None or instance_kind(target) is None:
        return None
    with timed(timings, "pack_ms"):
        try:
            return pack(target)
        except Exception as error:
            raise Invalid(error, "copy") from error


def _loaded(packed: Packed, timings: dict[str, float]) -> Any:
    """A copy of the instance (``Invalid`` at ``"load"`` when its archive does not load)."""
    with timed(timings, "load_ms"):
        try:
            return packed.load()
        except Exception as error:
            raise Invalid(error, "load") from error


def run(spec: ProbeSpec, *, target: Any = None, trace: bool = True) -> ProbeResult:
    """Probe ``spec`` here. Keras errors become results; the global Keras state is restored.

    ``target`` is the user layer (a ``Layer`` subclass) behind a ``"custom:<Name>"`` spec,
    or the user's instance (a layer, model, loss or metric) as it is, or as it travelled
    (``_instance.Packed``): the probe works on a copy from its ``.keras`` archive, and the
    user's object is never called. ``trace=False`` leaves the op trace out (benchmarks
    compare).
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
    fields: ProbeFields
    try:
        # the op trace's wrappers bound before the probe patches Keras's random draws (as a
        # worker keeps them): patched first, every probe here looked for every binding again
        in_place = trace_in_place() if trace else contextlib.nullcontext()
        precision = precision_set(spec.precision, backend)
        # what Keras writes of an instance or a config imports no TensorFlow where none is
        with preserved_keras_state(), tensorflow_if_imported(), precision, in_place:
            # The settings in effect for this probe (its precision set), read once.
            base["environment"] = read_environment(backend)
            if spec.floatx:
                keras.config.set_floatx(spec.floatx)
            keras.config.set_dtype_policy(spec.policy)
            if spec.mode != "call" and spec.target.startswith(("ops.", "losses.", "metrics.")):
                check_mode(spec.mode, spec.target, backend=backend)
            packed = _packed(target, timings)
            notes: tuple[Supplied, ...] = ()
            if spec.target.startswith("ops."):
                entry = catalog.entry(spec.target)
                fields = run_op(spec, entry, timings, trace)
                fields["kernel"] = _op_kernel(spec, entry, fields)
            elif spec.target.startswith(("losses.", "metrics.")):
                entry = catalog.entry(spec.target)
                instance = _loaded(packed, timings) if packed is not None else None
                fields = run_objective(spec, entry, timings, instance=instance)
            else:
                entry = layer_entry(spec, packed or target)
                cls = layer_class(spec, packed or target, timings)
                notes = getattr(cls, "notes", ())
                fields = run_layer(spec, entry, cls, timings, trace)
            fields["supplied"] = (*notes, *supplied(spec, entry, instance=packed is not None))
    except QuantizeRefused as refused:  # Keras's answer: it refused to quantize the layer
        fields = refused.fields()
    except Invalid as invalid:
        fields = {
            "status": "invalid",
            "error": error_info(invalid.error, invalid.where),
            "verdict": "error",
            "called": invalid.called,
        }
    except (InvalidSpecError, ValueError, TypeError) as error:
        fields = {"status": "invalid", "error": error_info(error, "spec"), "verdict": "error"}
    timings["total_ms"] = ms(started)
    if fields.get("trace"):
        execution, compiled = fields.get("execution", ""), fields.get("compiled")
        fields["trace"] = placed(fields["trace"], backend, execution, compiled)
    return ProbeResult(**base, **tool_failure_invalid(fields))


def _op_kernel(spec: ProbeSpec, entry: Any, fields: ProbeFields) -> str | None:
    """The kernel path of the op itself, from its converted inputs' dtypes and shapes."""
    converted = tuple(s.dtype for s in fields.get("cast_path", ()) if s.stage == "converted")
    shapes = spec.shapes or getattr(entry, "shapes", ())
    return op_kernel(spec, shapes, converted, fields.get("device"))


def tool_failure_invalid(fields: dict[str, Any]) -> dict[str, Any]:
    """A result's fields whose error is dtype-explorer's own (``where="tool"``) made
    ``invalid``: the tool's failure is never presented as Keras's answer."""
    error = fields.get("error")
    if error is None or error.where != "tool":
        return fields
    note = "dtype-explorer's own code failed here: this is not Keras's answer"
    basis = (*fields.get("basis", ()), note)
    return {**fields, "status": "invalid", "verdict": "error", "basis": basis}

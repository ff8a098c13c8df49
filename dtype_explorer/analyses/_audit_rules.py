"""The audit's rules: from the recorded dtype flow of a model to findings, each with a fix.

Every rule reads the :class:`~dtype_explorer.records.LayerCall` records of one real forward
pass; ``divergences`` re-runs odd-dtype layers on other backends through the worker pool.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.errors import InvalidSpecError, as_sentence
from dtype_explorer.keras_run import catalog, check_values, error_limit, make_spec, reference_dtype
from dtype_explorer.records import (
    SEVERITIES,
    Finding,
    FitReport,
    LayerCall,
    PredictReport,
    ProbeSet,
    TraceStep,
)
from dtype_explorer.runtime import pool

HALF = ("float16", "bfloat16")
_TO_FLOAT32 = 'x = keras.layers.Activation("linear", dtype="float32")(x)   # cast x to float32\n'


def find(calls: list[LayerCall], *, model: Any, policy: str) -> list[Finding]:
    """Every finding the recorded calls support (one per kind and layer). ``model`` is the one
    that ran (under ``policy=`` an uncompiled clone); ``policy`` the one it is meant to run
    under (its own, or the one it was cloned under)."""
    rules: tuple[Callable[[list[LayerCall]], Iterable[Finding]], ...] = (
        _call_errors,
        lambda c: _silent_downcasts(c, policy),
        _int_into_float,
        _float32_only,
        _custom_dtypes,
        _float16_outputs,
        _overflows,
        lambda c: _no_loss_scaling(c, model),
        _rules_disagree,
    )
    return _unique(f for rule in rules for f in rule(calls))


def ordered(findings: Iterable[Finding]) -> list[Finding]:
    """Errors first, then warnings, then notes; otherwise in the order of the forward pass."""
    return sorted(_unique(findings), key=lambda f: SEVERITIES.index(f.severity))


# --------------------------------------------------------------------------- rules


def _call_errors(calls: list[LayerCall]) -> Iterator[Finding]:
    for call in calls:
        if call.error is not None and call.retried is None:
            yield Finding(
                kind="call-error",
                severity="error",
                path=call.path,
                message=(
                    f"The forward pass stopped in {call.layer_class} ({call.compute_dtype} "
                    f"compute, received {_names(call.received)}): {_error(call)}"
                ),
                details={"error": call.error.to_dict()},
            )


def _silent_downcasts(calls: list[LayerCall], model_policy: str) -> Iterator[Finding]:
    for call in calls:
        for source, target, why in _casts(call):
            if not dtypes.narrows(source, target):
                continue
            if source != "float64" and call.policy == model_policy:
                continue  # float32 -> 16-bit under the model's own mixed policy: asked for
            step = _cast_step(call, source, target)
            yield Finding(
                kind="silent-downcast",
                severity="warning" if source == "float64" else "info",
                path=call.path,
                message=(
                    f"{source} data is cast to {target} on entry to {call.layer_class} ({why}), "
                    f"without a warning: {_precision_lost(target)}.{_at(step)}"
                ),
                fix=_downcast_fix(source, call),
                details={"from": source, "to": target},
                step=step,
            )


def _int_into_float(calls: list[LayerCall]) -> Iterator[Finding]:
    for call in calls:
        ints = [t.dtype for t in call.received if dtypes.is_integer(t.dtype)]
        if not ints or not call.leaf or not dtypes.is_float(call.compute_dtype):
            continue
        entry = _catalog_entry(call.layer_class) if call.builtin else None
        if entry is not None and not _computes_on_floats(entry):
            continue
        raised = call.error is not None and call.retried is not None
        if raised:
            outcome = (
                f"here it raised {_error(call)} The audit re-ran it with the input cast to "
                f"{call.compute_dtype}, and that works."
            )
        else:
            outcome = (
                f"here it returned {_names(call.outputs)}, but whether integer input is "
                "accepted, cast or rejected differs between layers and backends "
                "(check with --backends all)."
            )
        yield Finding(
            kind="int-into-float-layer",
            severity="error" if raised else "warning" if entry is not None else "info",
            path=call.path,
            message=(
                f"{ints[0]} data reaches {call.layer_class}, which computes in "
                f"{call.compute_dtype}; Keras autocasts only float inputs, so {outcome}"
            ),
            fix=(
                f"# give {call.layer_class} float data, e.g. scaled pixels:\n"
                "x = keras.layers.Rescaling(1.0 / 255)(x)   # uint8 0..255 -> float32 0..1\n"
                f'# or just cast: x = keras.ops.cast(x, "{call.compute_dtype}")'
            ),
            details={"input": ints[0], "raised": raised},
        )


def _float32_only(calls: list[LayerCall]) -> Iterator[Finding]:
    for call in calls:
        half_in = any(t.dtype in HALF for t in call.received)
        if call.error is not None and call.retried and half_in:
            yield Finding(
                kind="float32-only-layer",
                severity="error",
                path=call.path,
                message=(
                    f"{call.layer_class} fails under the {call.policy} policy: Keras autocasts "
                    f"its input to {_names(call.received)}, and it only takes float32. "
                    f"{_error(call)} The audit re-ran it with float32 input, and that works."
                ),
                fix=_float32_fix(call),
                details={"received": _names(call.received)},
            )
        elif call.builtin and call.leaf and _stays_wider(call, only_half=True):
            yield Finding(
                kind="float32-only-layer",
                severity="warning",
                path=call.path,
                message=(
                    f"{call.layer_class} computes in {call.compute_dtype} under {call.policy}, "
                    f"yet returned {_names(call.outputs)}: it silently stays in float32, and "
                    "the next layers cast back down."
                ),
                fix=_float32_fix(call),
            )


def _custom_dtypes(calls: list[LayerCall]) -> Iterator[Finding]:
    for call in calls:
        if call.builtin or call.call_index:
            continue
        problems = [
            f"variable '{name}' is stored as {var.stored}, but the {call.policy} policy "
            f"stores variables in {call.variable_dtype}"
            for name, var in call.variables.items()
            if dtypes.is_float(var.stored) and var.stored != call.variable_dtype
        ]
        problems += [
            f"variable '{name}' is read as {var.read} in call(), not in the compute dtype "
            f"{call.compute_dtype}" + ("" if var.autocast else " (add_weight(autocast=False))")
            for name, var in call.variables.items()
            if var.read and dtypes.is_float(var.read) and var.read != call.compute_dtype
        ]
        if call.leaf and _stays_wider(call, only_half=False):
            problems.append(
                f"call() returns {_names(call.outputs)} from {_names(call.received)} input, "
                f"although its policy computes in {call.compute_dtype}: it casts against its policy"
            )
        if problems:
            yield Finding(
                kind="custom-variable-dtype",
                severity="warning",
                path=call.path,
                message=f"Custom layer {call.layer_class}: " + "; ".join(problems) + ".",
                fix=(
                    "def build(self, input_shape):\n"
                    "    # no dtype=: stored in self.variable_dtype, read in self.compute_dtype\n"
                    "    self.w = self.add_weight(shape=(input_shape[-1], self.units))\n\n"
                    "def call(self, x):   # x and self.w both arrive in the compute dtype\n"
                    "    y = keras.ops.matmul(x, self.w)\n"
                    "    return keras.ops.cast(y, self.compute_dtype)   # never a fixed float32"
                ),
                details={"problems": problems},
            )


def _float16_outputs(calls: list[LayerCall]) -> Iterator[Finding]:
    for call in calls:
        half = [t.dtype for t in call.outputs if t.dtype in HALF]
        if not half or not (call.final_output or call.softmax):
            continue
        what = "the model's output, the loss's input," if call.final_output else "this softmax"
        step = _half_step(call, half[0])
        yield Finding(
            kind="float16-output",
            severity="warning",
            path=call.path,
            message=(
                f"Under {call.policy}, {what} is {half[0]} (from {call.layer_class}): "
                "probabilities near 0 and 1 lose precision, and the loss can overflow or take "
                f"log(0). Keep the last layer in float32.{_at(step)}"
            ),
            step=step,
            fix=(
                f'keras.layers.{call.layer_class}(..., dtype="float32")   # the last layer\n'
                "# or after it:\n"
                'outputs = keras.layers.Activation("linear", dtype="float32")(outputs)'
            ),
            details={"output": half[0], "final": call.final_output},
        )


def _overflows(calls: list[LayerCall]) -> Iterator[Finding]:
    flagged = [c for c in calls if _overflowed(c)]
    for call in flagged:
        if any(o.path.startswith(call.path + "/") for o in flagged):
            continue  # an inner layer is where it happened
        finite_given = all(t.finite is not False for t in call.given or ())
        at_entry = finite_given and any(t.finite is False for t in call.received)
        how = (
            f"casting its finite input to {_names(call.received)} on entry"
            if at_entry
            else f"computing in {call.compute_dtype}"
        )
        step = _overflow_step(call)
        hidden = all(t.finite is not False for t in call.outputs)
        said = (
            f"An op of {call.layer_class} overflowed {call.compute_dtype} (inf from finite "
            "values) and a later op hid it: the output looks finite, its gradient is not"
            if hidden
            else f"{call.layer_class} produced inf or NaN from finite input by {how}"
        )
        yield Finding(
            kind="overflow",
            severity="error",
            path=call.path,
            message=f"{said}: float16 holds at most 65504.{_at(step)}",
            step=step,
            fix=(
                f'keras.layers.{call.layer_class}(..., dtype="float32")   # this layer in float32\n'
                "# or keep activations small (normalise inputs), or use mixed_bfloat16"
            ),
        )


def _no_loss_scaling(calls: list[LayerCall], model: Any) -> Iterator[Finding]:
    import keras

    optimizer = getattr(model, "optimizer", None)
    if optimizer is None or isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return
    if not any(c.compute_dtype == "float16" for c in calls):
        return
    name = type(optimizer).__name__
    yield Finding(
        kind="no-loss-scaling",
        severity="warning",
        path=model.name,
        message=(
            f"The model is compiled with {name} and computes in float16, without loss "
            "scaling: small gradients underflow to zero. compile() adds a LossScaleOptimizer "
            f"only when the model's own policy is mixed_float16 ({model.dtype_policy.name} here)."
        ),
        fix=(
            f"optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.{name}())\n"
            "model.compile(optimizer=optimizer, loss=...)"
        ),
    )


# --------------------------------------------------------------------------- across modes


def mode_divergences(predict: PredictReport) -> Iterator[Finding]:
    """A layer whose dtypes under ``model.predict`` differ from its eager call's, and an
    output with inf/NaN under predict that the eager call did not have."""
    if predict.error is not None:
        where = predict.failed_at or "the model"
        cause = predict.cause or predict.error
        also = (
            f" (model.predict re-raised it as {predict.error.type}: "
            f"{as_sentence(predict.error.message)})"
            if cause.type != predict.error.type
            else ""
        )
        yield Finding(
            kind="mode-divergence",
            severity="error",
            path=predict.failed_at or "model.predict",
            message=(
                f"Under {predict.execution}, {where} raised {cause.type} where the eager call "
                f"ran: {as_sentence(cause.message)}{also}"
            ),
            fix=(
                "# inside a compiled function tensors have no values: no float(x), x.numpy()\n"
                "# or Python `if` on a tensor; use keras.ops (ops.where, ops.cond) instead.\n"
                "model.compile(..., run_eagerly=True)   # to debug it eagerly"
            ),
            details={"error": predict.error.to_dict(), "cause": cause.to_dict()},
        )
    for diff in predict.differences:
        if "/" not in diff.path and diff.where == "received":  # the model itself
            inside = [d for d in predict.differences if d.path.startswith(diff.path + "/")]
            yield Finding(
                kind="mode-divergence",
                severity="info" if not inside else "warning",
                path=diff.path,
                message=(
                    f"model.predict hands the model {', '.join(diff.predict)} where model(x) "
                    f"hands it {', '.join(diff.eager)}: predict converts the sample before "
                    f"its function runs ({predict.execution}). "
                    + (
                        f"{len(inside)} layer call(s) inside see other dtypes (below)."
                        if inside
                        else "Its layers receive the same dtypes as in the eager call."
                    )
                ),
                details={
                    "where": diff.where,
                    "eager": list(diff.eager),
                    "predict": list(diff.predict),
                },
            )
            continue
        yield Finding(
            kind="mode-divergence",
            severity="warning",
            path=diff.path,
            message=(
                f"{diff.layer_class} {'returns' if diff.where == 'output' else 'receives'} "
                f"{', '.join(diff.predict)} under {predict.execution}, but "
                f"{', '.join(diff.eager)} in the eager call: code tested with model(x) meets "
                "another dtype in model.predict."
            ),
            fix=(
                "# cast where the dtype must not depend on how the model runs:\n"
                f"x = keras.ops.cast(x, {diff.eager[0]!r})"
                if diff.eager
                else ""
            ),
            details={"where": diff.where, "eager": list(diff.eager), "predict": list(diff.predict)},
        )
    for i, (now, was) in enumerate(zip(predict.nonfinite, predict.eager_nonfinite)):
        if now > was:
            yield Finding(
                kind="mode-divergence",
                severity="error",
                path=f"output {i}",
                message=(
                    f"model.predict's output {i} holds {now} inf/NaN values where the eager "
                    f"call's holds {was} ({predict.execution})."
                ),
                details={"nonfinite": now, "eager_nonfinite": was},
            )


def step_failed(model: Any, said: str, how: str, loss: str, labels: str) -> Finding:
    """The training step raised where the eager ``training=True`` call ran."""
    return Finding(
        kind="mode-divergence",
        severity="error",
        path=model.name,
        message=(
            f"One model.fit step ({how}, loss {loss}, labels {labels}) raised where the eager "
            f"training=True call ran: {said}"
        ),
        fix=(
            "# inside a compiled step tensors have no values: no float(x), x.numpy() or a\n"
            "# Python `if` on a tensor; use keras.ops. If the loss needs other targets:\n"
            "check_model(model, x, mode='fit', labels=y)   # %dtype_check ... --labels y"
        ),
        details={"error": said},
    )


def gradient_findings(fit: FitReport, model: Any) -> Iterator[Finding]:
    """inf/NaN gradients in the training step: an error without loss scaling; with it, a note
    (``LossScaleOptimizer`` skips the step and lowers its scale, as designed)."""
    bad = fit.nonfinite_gradients
    if not bad:
        return
    shown = ", ".join(bad[:5]) + (f", ... ({len(bad)} in all)" if len(bad) > 5 else "")
    if fit.loss_scaling:
        yield Finding(
            kind="nonfinite-gradient",
            severity="info",
            path=model.name,
            message=(
                f"The scaled gradients of {shown} held inf/NaN at loss scale "
                f"{fit.loss_scale:g}: LossScaleOptimizer skipped the step and lowered the "
                f"scale to {fit.loss_scale_after:g}, as designed. If it keeps happening, the "
                "gradients overflow float16 even unscaled."
            ),
            details={"variables": bad},
        )
        return
    yield Finding(
        kind="nonfinite-gradient",
        severity="error",
        path=model.name,
        message=(
            f"One training step ({fit.optimizer} on {fit.loss}) gave inf/NaN gradients for "
            f"{shown}, and no loss scaling guards the step: the weights become NaN."
        ),
        fix=(
            "# keep the loss and the last layer in float32, or scale the loss:\n"
            "optimizer = keras.optimizers.LossScaleOptimizer(optimizer)"
        ),
        details={"variables": bad},
    )


def _rules_disagree(calls: list[LayerCall]) -> Iterator[Finding]:
    """A layer computing in its compute dtype (every float input autocast to it) where
    ``result_type`` of those inputs and the compute dtype names another dtype: Keras's two
    rules disagree (``result_type('float64', 'float64')`` is float32 on torch and numpy)."""
    import keras

    for call in calls:
        entry = _catalog_entry(call.layer_class) if call.builtin and call.leaf else None
        if entry is None or entry.contract != "compute" or call.error is not None:
            continue
        floats = [t.dtype for t in call.received if dtypes.family(t.dtype) == "float"]
        if not floats or set(floats) != {call.compute_dtype}:
            continue
        said = keras.backend.result_type(*floats, call.compute_dtype)
        if said == call.compute_dtype:
            continue
        got = _names(call.outputs)
        yield Finding(
            kind="rules-disagree",
            severity="info" if got == call.compute_dtype else "warning",
            path=call.path,
            message=(
                f"Keras's rules disagree here: the policy {call.policy} says {call.layer_class} "
                f"computes in {call.compute_dtype}, result_type({', '.join(floats)}, "
                f"{call.compute_dtype}) says {said} on {keras.backend.backend()}. It returned "
                f"{got}: the policy's answer is the documented one for a layer."
            ),
            details={"policy": call.compute_dtype, "result_type": said, "output": got},
        )


# --------------------------------------------------------------------------- wrong numbers


def worth_value_check(received: Iterable[Any]) -> bool:
    """A call that does arithmetic on integer tensors: where numbers wrap around, saturate or
    are truncated while the dtypes look right."""
    return any(dtypes.family(t.dtype) in ("int", "uint") for t in received)


def wrong_numbers(calls: list[tuple[LayerCall, Any, Any]]) -> list[Finding]:
    """Re-run each leaf call kept for a value check (its layer, same weights) on its own inputs
    in the widest float the backend computes in, and report the first output element whose
    number is wrong: wrapped around, saturated, truncated, or off beyond the dtype's error."""
    import keras

    wide = reference_dtype(keras.backend.backend())
    findings = []
    for call, layer, values in calls:
        if values is None or not _computes_on_values(call):
            continue
        args, kwargs, outputs = values
        try:
            refs = keras_leaves(_reference_call(layer, args, kwargs, wide))
        except Exception:
            continue  # a layer that cannot be rebuilt in the wide dtype: no check
        outs = keras_leaves(outputs)
        for i, (out, ref, info) in enumerate(zip(outs, refs, call.outputs)):
            found = check_values(
                out.astype(np.float64),
                info.dtype,
                np.asarray(ref).astype(np.float64),
                wide,
                limit=error_limit(call.compute_dtype),
                output=i,
            )
            if found is None:
                continue
            where = f"output {i} [{', '.join(map(str, found.element))}]"
            findings.append(
                Finding(
                    kind=found.kind,
                    severity="warning",
                    path=call.path,
                    message=(
                        f"{call.layer_class} returned {_names(call.outputs)} on "
                        f"{_names(call.received)} input, but the numbers are wrong: at {where}, "
                        f"{found.message}."
                    ),
                    fix=(
                        f'x = keras.ops.cast(x, "{_fix_dtype(call)}")   '
                        f"# before {call.layer_class}: compute on floats (or a wider integer)"
                    ),
                    details={
                        "output": i,
                        "element": list(found.element),
                        "value": found.value,
                        "expected": found.expected,
                        "reference_dtype": wide,
                    },
                )
            )
            break
    return findings


def _computes_on_values(call: LayerCall) -> bool:
    """Not a lookup, hashing or index layer (an integer there is an id, not a number)."""
    entry = _catalog_entry(call.layer_class) if call.builtin else None
    return entry is None or entry.contract in ("compute", "self-managed", "passthrough")


def _fix_dtype(call: LayerCall) -> str:
    if dtypes.is_float(call.compute_dtype) and not all(
        dtypes.is_integer(t.dtype) for t in call.outputs
    ):
        return call.compute_dtype
    return (
        "int32"
        if any(t.dtype in ("int8", "uint8", "int16", "uint16") for t in call.outputs)
        else "int64"
    )


def _reference_call(layer: Any, args: Any, kwargs: Any, wide: str) -> Any:
    """``layer`` rebuilt under the ``wide`` policy with the same weights, called on the same
    values with every number array in ``wide``."""
    import keras

    config = {**layer.get_config(), "dtype": wide}
    clone = type(layer).from_config(config)

    def widen(x: Any) -> Any:
        if isinstance(x, np.ndarray) and dtypes.family(x.dtype.name) in ("int", "uint", "float"):
            return x.astype(wide)
        return x

    args, kwargs = keras.tree.map_structure(widen, (args, kwargs))
    clone(*args, **kwargs)
    clone.set_weights(
        [
            w.astype(wide) if dtypes.family(str(w.dtype)) == "float" else w
            for w in layer.get_weights()
        ]
    )
    return clone(*args, **kwargs)


def keras_leaves(structure: Any) -> list[np.ndarray]:
    import keras

    return [
        np.asarray(keras.ops.convert_to_numpy(x))
        for x in keras.tree.flatten(structure)
        if hasattr(x, "shape")
    ]


# --------------------------------------------------------------------------- across backends


def divergences(
    calls: list[LayerCall],
    layers: dict[str, Any],
    backends: list[str],
    *,
    timeout: float | None = None,
) -> list[Finding]:
    """Re-run each catalogued layer that took integer, bool or 64-bit input (or raised) on
    ``backends`` and on this one, through the worker pool; report those whose results differ."""
    import keras

    names = list(dict.fromkeys([keras.backend.backend(), *backends]))
    groups: dict[str, tuple[LayerCall, list[Any]]] = {}
    for call in calls:
        specs = _probe_specs(call, layers.get(call.path), names)
        if specs:
            groups.setdefault(specs[0].cache_key(), (call, specs))
    wanted = [spec for _, specs in groups.values() for spec in specs]
    results = {r.spec.cache_key(): r for r in pool.run_many(wanted, timeout=timeout)}
    findings = []
    for call, specs in groups.values():
        outcomes = {spec.backend: results[spec.cache_key()] for spec in specs}
        finished = [r for r in outcomes.values() if r.status in ("ok", "error")]
        if len({(r.status, r.output_dtype) for r in finished}) < 2:
            findings.extend(_value_divergence(call, list(outcomes.values())))
            continue
        shown = {backend: _outcome(r) for backend, r in outcomes.items()}
        findings.append(
            Finding(
                kind="backend-divergence",
                severity="error" if any(r.status == "error" for r in finished) else "warning",
                path=call.path,
                message=(
                    f"{call.layer_class} on {', '.join(specs[0].input_dtypes)} input under "
                    f"{call.policy} differs across backends: "
                    + "; ".join(f"{b} {o}" for b, o in shown.items())
                    + "."
                ),
                fix=(
                    f'x = keras.ops.cast(x, "{call.compute_dtype}")   '
                    f"# hand {call.layer_class} its compute dtype: every backend agrees"
                ),
                details=shown,
            )
        )
    return findings


def _value_divergence(call: LayerCall, results: list[Any]) -> Iterator[Finding]:
    """The backends agree on the dtype, but not on the numbers (same inputs and weights)."""
    parted = ProbeSet(results=tuple(results)).value_divergence()
    if parted is None:
        return
    yield Finding(
        kind="value-divergence",
        severity="warning",
        path=call.path,
        message=(
            f"{call.layer_class} on {', '.join(results[0].spec.input_dtypes)} input under "
            f"{call.policy}: every backend returns {results[0].outcome}, but {parted.message}."
        ),
        fix=(
            f'x = keras.ops.cast(x, "{call.compute_dtype}")   '
            f"# hand {call.layer_class} its compute dtype: every backend computes the same"
        ),
        details={"values": parted.values, "element": list(parted.element)},
    )


def _probe_specs(call: LayerCall, layer: Any, backends: list[str]) -> list[Any]:
    """One probe spec per backend re-creating ``call``, or none if it is not worth probing."""
    entry = _catalog_entry(call.layer_class) if call.builtin and call.leaf else None
    if layer is None or entry is None or entry.skip or not _odd_input(call):
        return []
    given = call.given if call.given is not None else call.received
    try:
        return [
            make_spec(
                entry.name,
                input_dtype=tuple(t.dtype for t in given),
                policy=call.policy,
                backend=backend,
                kwargs=_kwargs(layer),
                shape=[tuple(d or 1 for d in t.shape) for t in given],
            )
            for backend in backends
        ]
    except InvalidSpecError:
        return []


def _odd_input(call: LayerCall) -> bool:
    """Integer, bool or 64-bit input, or a call that raised: where backends part ways."""
    given = call.given if call.given is not None else call.received
    odd = any(not dtypes.is_float(t.dtype) or t.dtype == "float64" for t in given)
    return odd or call.error is not None


def _kwargs(layer: Any) -> dict[str, Any]:
    """The layer's config as plain JSON kwargs for a probe; serialized Keras objects
    (initializers, regularizers, constraints) are left at their defaults."""
    config = json.loads(json.dumps(layer.get_config(), default=str))
    return {
        key: value
        for key, value in config.items()
        if key not in ("name", "dtype", "trainable")
        and not (isinstance(value, dict) and "class_name" in value)
    }


def _outcome(result: Any) -> str:
    return f"returns {result.outcome}" if result.ok else result.outcome


# --------------------------------------------------------------------------- helpers


def _at(step: TraceStep | None) -> str:
    """`` First at ops.exp (model.py:12: y = ops.exp(x)).`` from the call's op trace."""
    if step is None:
        return ""
    src = step.source
    return f" First at {step.op}" + (f" ({src.short}: {src.text})." if src else ".")


def _overflow_step(call: LayerCall) -> TraceStep | None:
    """The op of the call that first made inf/NaN from finite values (or left float16's range,
    even if a later op hid it)."""
    steps = [s for s in call.trace if s.phase == "call"]
    return next((s for s in steps if s.first_nonfinite), None) or next(
        (s for s in steps if s.float16_overflow or s.hidden_overflow()), None
    )


def _cast_step(call: LayerCall, source: str, target: str) -> TraceStep | None:
    """The op of the call that cast ``source`` data to ``target``."""
    return next(
        (
            s
            for s in call.trace
            if s.phase == "call"
            and s.changes_dtype
            and any(t.dtype == source for t in s.inputs)
            and any(t.dtype == target for t in s.outputs)
        ),
        None,
    )


def _half_step(call: LayerCall, half: str) -> TraceStep | None:
    """The first op of the call that made ``half`` data from another dtype, else the last op
    that returned ``half`` data (the data arrived in ``half``)."""
    made = [s for s in call.trace if s.phase == "call" and any(t.dtype == half for t in s.outputs)]
    return next((s for s in made if s.changes_dtype), made[-1] if made else None)


def _casts(call: LayerCall) -> Iterator[tuple[str, str, str]]:
    """(from, to, why) for every input dtype Keras changed on the way into ``call``."""
    if call.given is not None and len(call.given) == len(call.received):
        for given, received in zip(call.given, call.received, strict=True):
            if given.dtype != received.dtype:
                why = f"its {call.policy} policy autocasts float inputs"
                yield given.dtype, received.dtype, why
    if call.entry and len(call.entry) == len(call.received):
        for received, entry in zip(call.received, call.entry, strict=True):
            if received.dtype != entry:
                yield received.dtype, entry, f"its keras.Input is {entry}"


def _computes_on_floats(entry: Any) -> bool:
    """A catalogued layer doing float math on its (float-role) input."""
    return entry.contract in ("compute", "self-managed") and entry.roles[0] == "float"


def _downcast_fix(source: str, call: LayerCall) -> str:
    if source == "float64":
        return (
            "# keep float64 end to end (set before building the model):\n"
            'keras.config.set_floatx("float64")   # or dtype="float64" on keras.Input and layers\n'
            "# or, if float32 is enough, cast where the data enters, so that it shows:\n"
            'x = x.astype("float32")'
        )
    return (
        f"# {call.layer_class} runs under {call.policy}, unlike the rest of the model:\n"
        f'keras.layers.{call.layer_class}(..., dtype="float32")   # or the policy you meant'
    )


def _float32_fix(call: LayerCall) -> str:
    return (
        _TO_FLOAT32
        + f'y = keras.layers.{call.layer_class}(..., dtype="float32")(x)   # or the whole layer'
    )


def _stays_wider(call: LayerCall, *, only_half: bool) -> bool:
    """A float-computing call returning floats wider than its compute dtype, although its
    float inputs arrived in the compute dtype (``only_half``: only for 16-bit compute)."""
    compute = call.compute_dtype
    if not dtypes.is_float(compute) or call.error is not None:
        return False
    if only_half and compute not in HALF:
        return False
    floats_in = [t.dtype for t in call.received if dtypes.is_float(t.dtype)]
    floats_out = [t.dtype for t in call.outputs if dtypes.is_float(t.dtype)]
    if not floats_out or any(d != compute for d in floats_in):
        return False
    return any(dtypes.narrows(d, compute) for d in floats_out)


def _overflowed(call: LayerCall) -> bool:
    finite_in = all(t.finite is not False for t in (call.given or call.received))
    # an op of the call that left float16's range counts even when a later op hid it
    nonfinite_out = any(t.finite is False for t in call.outputs) or any(
        s.float16_overflow or s.hidden_overflow() for s in call.trace if s.phase == "call"
    )
    half = call.compute_dtype in HALF or any(t.dtype in HALF for t in call.outputs)
    return finite_in and nonfinite_out and half


def _catalog_entry(name: str) -> Any:
    try:
        found = catalog.entry(name)
    except InvalidSpecError:
        return None
    return found if found.kind == "layer" else None


def _unique(findings: Iterable[Finding]) -> list[Finding]:
    seen: dict[tuple[str, str], Finding] = {}
    for finding in findings:
        seen.setdefault((finding.kind, finding.path), finding)
    return list(seen.values())


def _precision_lost(target: str) -> str:
    if target == "float16":
        return "float16 keeps about 3 significant digits and overflows beyond 65504"
    if target == "bfloat16":
        return "bfloat16 keeps about 2 significant digits"
    return "digits beyond float32's ~7 significant ones are lost"


def _error(call: LayerCall) -> str:
    assert call.error is not None
    return f"{call.error.type}: {as_sentence(call.error.message)}"


def _names(infos: Iterable[Any]) -> str:
    return ", ".join(t.dtype for t in infos) or "nothing"

"""``check_model(keras3_model, engine="tf_keras")``: a Keras 3 model rebuilt in Keras 2 and
audited there, from a Keras 3 process.

The model's Keras 3 config (the arguments the user did not set taken out, as for a Keras 3
engine: :func:`._audit_engine.user_set_only`) and each layer's weights travel to the Keras 2
engine's worker, where ``keras_run.rebuild_in_keras2`` translates the config into Keras 2's
(dtype policies by name; a layer class or an argument Keras 2 lacks refused by name), builds
the model with tf_keras under this process's global policy and sets its weights; the Keras 2
audit (:func:`._audit_keras2.check_keras2_model`) then runs on it, its findings' fixes written
in tf.keras code, and the report comes back with a note saying it is the model rebuilt in
Keras 2. Modes: those of the Keras 2 audit (``call``, ``training``, ``predict``, ``fit``);
``fit`` trains a clone of the rebuilt model, which is not compiled: SGD on mean squared error
(Keras 2's ``LossScaleOptimizer`` around it under ``mixed_float16``), whatever the Keras 3
model was compiled with. The worker's Keras 2 global policy and floatx are put back after.
Every other engine goes to :func:`._audit_engine.check_on_engine`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from dtype_explorer.analyses.audit import _engine as _audit_engine
from dtype_explorer.analyses.audit import _keras2 as _audit_keras2
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import (
    Keras2Refusal,
    describe_model,
    keras2_state_kept,
    rebuild_in_keras2,
)
from dtype_explorer.records import AuditReport
from dtype_explorer.runtime import engines, pool

#: The backend of the Keras 2 engine's worker (tf_keras runs on TensorFlow only).
_KERAS2_BACKEND = "tensorflow"


def check_on_engine(
    asked: _audit_engine.EngineQuestion, *, audit: Callable[..., dict[str, Any] | str]
) -> AuditReport:
    """``check_model`` on the engine ``engine``: the Keras 2 engine here
    (:func:`check_on_tf_keras`), a Keras 3 release in :func:`._audit_engine.check_on_engine`
    (``audit`` rebuilds and audits the model there)."""
    if asked.engine.startswith("tf_keras"):
        return check_on_tf_keras(asked)
    return _audit_engine.check_on_engine(asked, audit=audit)


def check_on_tf_keras(asked: _audit_engine.EngineQuestion) -> AuditReport:
    """The Keras 3 ``model`` rebuilt in the Keras 2 engine's worker and audited there by the
    Keras 2 audit; ``options`` are check_model's ``call_kwargs``, ``mode`` and ``labels``.

    Raises:
        InvalidSpecError: an argument the Keras 2 audit does not take (``policy``,
            ``backends``, ``labels``, a mode it does not run), or a model Keras 2 cannot
            rebuild (what it lacks, by name).
    """
    import keras

    model, sample, engine, options = asked.model, asked.sample, asked.engine, asked.options
    # 1. Check the question: what the Keras 2 audit takes
    _refuse(model, engine, options["mode"], asked.policy, asked.requested, options.get("labels"))
    if options.get("quantize") is not None:
        raise InvalidSpecError(
            f"Keras 2 (engine {engine!r}) has no quantization (Model.quantize arrived in Keras "
            f"3.3): audit the quantized model with the installed Keras or a Keras 3 engine. "
            f"Received: quantize={options['quantize']!r}"
        )
    # 2. The model as it travels: its config (the arguments the user set), weights, sample
    config, sample = _audit_engine.travelling(model, sample, engine)
    weights = {
        layer.name: [keras.ops.convert_to_numpy(w) for w in layer.weights]
        for layer in getattr(model, "layers", ())
    }
    # 3. Rebuilt and audited in the Keras 2 worker
    engines.ensure(engine)
    future = pool.call(
        _KERAS2_BACKEND,
        audit_in_keras2,
        config,
        weights,
        sample,
        (keras.config.dtype_policy().name, model.dtype_policy.name),
        {"mode": options["mode"], "call_kwargs": options.get("call_kwargs")},
        timeout=math.inf if asked.timeout is None else asked.timeout + 120,
        engine=engine,
    )
    answer = future.result()
    if isinstance(answer, str):
        raise InvalidSpecError(f"{describe_model(model)} cannot be audited in Keras 2: {answer}")
    report = AuditReport.from_dict(answer)
    note = (
        f"the model rebuilt in Keras 2 (tf_keras {report.keras}, engine {engine}) from its "
        f"Keras 3 config and weights, and audited there: the findings and their fixes are "
        f"about that tf.keras model, in tf.keras code"
    )
    return report.model_copy(update={"engine": engine, "notes": (*report.notes, note)})


def audit_in_keras2(
    config: dict[str, Any],
    weights: dict[str, list[Any]],
    sample: Any,
    policies: tuple[str, str],
    options: dict[str, Any],
) -> dict[str, Any] | str:
    """In the Keras 2 engine's worker: the Keras 3 model rebuilt with tf_keras (under Keras 2's
    global policy ``policies[0]``, put back afterwards; the model's own ``policies[1]``) and
    audited; the report as a dict, or what Keras 2 lacks to rebuild it."""
    with keras2_state_kept():
        try:
            model, notes = rebuild_in_keras2(config, weights, *policies)
        except Keras2Refusal as exc:
            return str(exc)
        report = _audit_keras2.check_keras2_model(model, sample, **options)
    return report.model_copy(update={"notes": (*report.notes, *notes)}).to_dict()


def _refuse(model: Any, engine: str, mode: str, policy: Any, backends: Any, labels: Any) -> None:
    """``InvalidSpecError`` for a mode or an argument the Keras 2 audit does not take."""
    if mode not in _audit_keras2.KERAS2_MODES:
        raise InvalidSpecError(
            f"mode {mode!r} cannot audit {describe_model(model)} rebuilt in Keras 2 (engine "
            f"{engine!r}); modes that apply: {', '.join(_audit_keras2.KERAS2_MODES)}"
        )
    refused = {"policy": policy, "backends": backends, "labels": labels}
    named = sorted(k for k, v in refused.items() if v not in (None, [], ()))
    if named:
        raise InvalidSpecError(
            f"check_model with engine={engine!r} rebuilds {describe_model(model)} in Keras 2 "
            f"and audits it there, as it is; it takes no {', '.join(named)}. Received: "
            + ", ".join(f"{k}={refused[k]!r}" for k in named)
        )

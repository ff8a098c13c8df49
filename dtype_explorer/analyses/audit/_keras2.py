"""``check_model`` on a Keras 2 (``tf_keras``) model, in the Keras 2 kernel (or a script run
with ``dtype-explorer run --engine tf_keras``), where ``tf.keras`` is Keras 2.

The forward pass is Keras 2's own (``keras_run.Keras2Tracer``: ``tf_keras``'s
``Layer.__call__`` traced as Keras 3's is), its records the same ``LayerCall``\\ s, the rules
the same pure functions (:mod:`._audit_rules`): the findings are the ones a Keras 3 user gets.
Their fixes are then written in tf.keras code (:func:`in_tf_keras`): ``tf.keras.layers``,
``tf.cast``, ``tf.keras.backend.set_floatx``, ``tf.keras.mixed_precision``. What Keras 2 lacks
(the op trace, ``result_type``, the value check) is said once, in the notes.

>>> from dtype_explorer.records import Finding
>>> fix = 'keras.layers.Dense(..., dtype="float32")   # the last layer'
>>> in_tf_keras(Finding(kind="float16-output", severity="warning", path="m", message="",
...                     fix=fix)).fix
'tf.keras.layers.Dense(..., dtype="float32")   # the last layer'
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

from dtype_explorer.analyses.audit import _fixes as _audit_fixes
from dtype_explorer.analyses.audit import _keras2_modes as _audit_keras2_modes
from dtype_explorer.analyses.audit import _rules as _audit_rules
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import (
    KERAS2_LACKS,
    Keras2Tracer,
    describe_model,
    keras2_copy,
    keras2_inputs,
    keras2_state_kept,
    keras2_variables_kept,
    sample_for,
    tensor_info,
)
from dtype_explorer.records import AuditReport, Finding
from dtype_explorer.timing import ms

#: Keras 3 spellings in the rules' fixes and messages, and Keras 2's (most specific first).
_TF_KERAS = (
    ("keras.config.set_floatx(", "tf.keras.backend.set_floatx("),
    ("keras.config.set_dtype_policy(", "tf.keras.mixed_precision.set_global_policy("),
    ("keras.ops.cast(", "tf.cast("),
    ("keras.ops.matmul(", "tf.matmul("),
    ("keras.optimizers.LossScaleOptimizer(", "tf.keras.mixed_precision.LossScaleOptimizer("),
    ("add_weight(autocast=False)", "add_weight(experimental_autocast=False)"),
    ("keras.", "tf.keras."),
)
_SPELLING = re.compile(
    "|".join(rf"(?<![\w.]){re.escape(k3)}" for k3, _ in _TF_KERAS[:-1]) + r"|(?<![\w.])keras\."
)
#: Why a Keras 2 audit shows no fix for an overflow or a lossy cast (``_fixes.not_tried``).
_NO_FIX = (
    "the audit runs fixes on a copy of a Keras 3 model only; a tf.keras model's copy is not "
    "re-run with one"
)
#: The modes a Keras 2 audit runs (``save`` is Keras 3's).
KERAS2_MODES = ("call", "training", "predict", "fit")


def in_tf_keras(finding: Finding, classes: Mapping[str, str] | None = None) -> Finding:
    """``finding`` with its fix and message written in tf.keras (Keras 2) code.

    Args:
        finding: a finding of the rules, whose fix is written in Keras 3 code.
        classes: how the user's code names a layer class that is not tf.keras's own, by
            class name (``{"KerasLayer": "hub.KerasLayer"}``).

    Returns:
        The same finding, its Keras 3 spellings replaced by Keras 2's.

    >>> fix = 'keras.config.set_floatx("float64")\\nx = keras.ops.cast(x, "float32")'
    >>> print(in_tf_keras(Finding(kind="silent-downcast", severity="warning", path="m",
    ...                           message="its keras.Input is float32", fix=fix)).fix)
    tf.keras.backend.set_floatx("float64")
    x = tf.cast(x, "float32")
    """
    spelled = dict(_TF_KERAS)

    def k2(text: str | None) -> str | None:
        if text is None:
            return None
        text = _SPELLING.sub(lambda m: spelled.get(m.group(0), "tf.keras."), text)
        for name, spelling in (classes or {}).items():  # as written, or by its bare name
            text = re.sub(
                rf"(?<![\w.])(?:tf\.keras\.layers\.)?{re.escape(name)}\(", f"{spelling}(", text
            )
        return text

    return finding.model_copy(update={"fix": k2(finding.fix), "message": k2(finding.message)})


def check_keras2_model(
    model: Any,
    sample: Any = None,
    mode: str = "call",
    call_kwargs: dict[str, Any] | None = None,
    quantize: Any = None,
    refused: dict[str, Any] | None = None,
) -> AuditReport:
    """Audit a Keras 2 model: one real forward pass through Keras 2's ``Layer.__call__``,
    every layer call recorded, the rules' findings with their fixes in tf.keras code.

    Args:
        model: a ``tf.keras`` (``tf_keras``) model or layer.
        sample: an array, list or dict matching the model's inputs (default: built from its
            ``tf.keras.Input``\\ s, batch of 2).
        mode: ``"call"`` (inference), ``"training"`` (``training=True``), ``"predict"``
            (Keras 2's real ``model.predict``, its ``tf.function``'s trace recorded and
            compared with the eager call) or ``"fit"`` (one real ``train_on_batch`` step of a
            copy: gradient dtypes, inf/NaN, the ``LossScaleOptimizer``'s scale before and
            after).
        call_kwargs: keyword arguments of the model's call.
        quantize: refused (``InvalidSpecError``): Keras 2 has no ``quantize()``.
        refused: ``check_model``'s other arguments by name, which a Keras 2 audit does not
            take (``policy``, ``backends``, ``engine``, ``labels``); each one given raises
            ``InvalidSpecError``.

    Returns:
        An ``AuditReport`` (``keras`` is tf_keras's version).

    >>> report = check_keras2_model(model)        # doctest: +SKIP
    >>> [f.kind for f in report.findings]         # doctest: +SKIP
    ['float32-only-layer', 'float16-output']
    """
    import tensorflow as tf
    import tf_keras

    started = time.perf_counter()
    # 1. Check the question: Keras 2's audit runs the eager call only
    _refuse(model, mode, {**(refused or {}), "quantize": quantize})
    kwargs = dict(call_kwargs or {})
    inputs = keras2_inputs(model)
    sample = sample_for(model, inputs, sample)
    notes = [KERAS2_LACKS]
    if not model.built:
        notes.insert(0, f"{describe_model(model)} was not built; the audit built it.")
    ran: dict[str, Any] = {"execution": _EXECUTION.get(mode, "")}
    with keras2_state_kept():
        # 2. The eager pass through Keras 2's Layer.__call__, every layer call recorded (on a
        #    copy for "fit")
        target = keras2_copy(model) if mode == "fit" else model
        tracer = Keras2Tracer(target)
        trains = mode == "training" or kwargs.get("training") is True  # on the user's model
        with keras2_variables_kept(target) if trains else contextlib.nullcontext():
            outputs = tracer.run(sample, inputs, kwargs, training=mode in ("training", "fit"))
        calls = tracer.finish(outputs)
        # 3. The rules on the records, the fixes in tf.keras code
        audited = _audited(model, tf_keras)
        found = _audit_rules.find(calls, model=audited, policy=audited.policy)
        # 4. The mode's own run: the real model.predict, or one train_on_batch on the copy
        timings = {"forward_ms": tracer.forward_ms}
        if mode == "predict" and outputs is not None:
            t0 = time.perf_counter()
            predict, calls, more = _audit_keras2_modes.predict_phase(
                model, sample, calls, outputs, audited
            )
            timings["predict_ms"] = ms(t0)
            found += more
            ran.update(predict=predict, compiled=True)
        if mode == "fit" and outputs is not None:
            fit, more = _audit_keras2_modes.fit_phase(model, target, sample, outputs, timings)
            found += more
            ran.update(fit=fit, compiled=True)
            notes.append(_FIT_NOTE)
    classes = _user_classes(layer for layer, _, _ in tracer.layers.values())
    found = _audit_fixes.not_tried(found, _NO_FIX)
    # 4. The report
    return AuditReport(
        model=model.name,
        model_class=type(model).__name__,
        backend="tensorflow",
        policy=model.dtype_policy.name,
        sample=tuple(tensor_info(x) for x in tf.nest.flatten(sample)),
        layers=tuple(calls),
        findings=tuple(in_tf_keras(f, classes) for f in _audit_rules.ordered(found)),
        notes=tuple(notes),
        timings={**timings, "total_ms": ms(started)},
        mode=mode,
        **ran,
        keras=tf_keras.__version__,
        engine=f"tf_keras=={tf_keras.__version__}",
    )


_EXECUTION = {"training": "the eager call with training=True", **_audit_keras2_modes.EXECUTION}
_FIT_NOTE = (
    "The training step ran on a copy of the model (tf_keras.models.clone_model, weights "
    "copied, compiled with its loss and a fresh optimizer, or SGD on mean squared error); "
    "the model itself was not trained."
)


def _audited(model: Any, tf_keras: Any) -> _audit_rules.AuditedModel:
    """What the rules need to know of the Keras 2 ``model``."""
    optimizer = getattr(model, "optimizer", None)
    return _audit_rules.AuditedModel(
        name=model.name,
        policy=model.dtype_policy.name,
        backend="tensorflow",
        optimizer=None if optimizer is None else type(optimizer).__name__,
        loss_scaled=isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer),
    )


def _refuse(model: Any, mode: Any, refused: dict[str, Any]) -> None:
    """``InvalidSpecError`` for a mode or an argument the Keras 2 audit does not take."""
    if mode not in KERAS2_MODES:
        raise InvalidSpecError(
            f"mode {mode!r} cannot audit the Keras 2 model {describe_model(model)}: the Keras 2 "
            f"audit runs the eager call; modes that apply: {', '.join(KERAS2_MODES)}"
        )
    given = sorted(k for k, v in refused.items() if v not in (None, [], ()))
    if given:
        raise InvalidSpecError(
            f"check_model on the Keras 2 model {describe_model(model)} audits it here, as it "
            f"is (policy: set tf.keras.mixed_precision.set_global_policy before building it); "
            f"it takes no {', '.join(given)}. Received: "
            + ", ".join(f"{k}={refused[k]!r}" for k in given)
        )


#: How users import the libraries whose layers a tf.keras model holds (``import ... as``).
_IMPORTED_AS = {"tensorflow_hub": "hub"}


def _user_classes(layers: Iterable[Any]) -> dict[str, str]:
    """How the user's code names each layer class not of tf.keras itself: ``hub.KerasLayer``
    for tensorflow-hub's, the bare class name for one of their own.

    >>> class Scale: pass
    >>> _user_classes([Scale()])
    {'Scale': 'Scale'}
    """
    found: dict[str, str] = {}
    for layer in layers:
        cls = type(layer)
        top = cls.__module__.split(".")[0]
        if top != "tf_keras":
            found[cls.__name__] = (
                f"{_IMPORTED_AS[top]}.{cls.__name__}" if top in _IMPORTED_AS else cls.__name__
            )
    return found

"""The fit mode's run: real ``model.fit`` steps of the compiled copy of the model on the
sample (``keras_run.train_steps``: one by default, ``steps=N`` for N, each recorded, with a
progress bar from :data:`PROGRESS_STEPS`), with the labels the user gave or zeros that fit the
model's outputs; where it raises, the finding says whose the error is (the labels', the
model's, or a backend that does not train: Keras's own words). A step that raised compiled
with XLA is run again on the copy compiled without it: ``jit_compile=False`` is the finding's
fix once that step ran (its proof says so either way)."""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

from dtype_explorer.analyses._run import progress_bar
from dtype_explorer.analyses.audit import _fixes_training
from dtype_explorer.analyses.audit import _rules_across as _audit_rules_across
from dtype_explorer.errors import InvalidSpecError, as_sentence, keras_message, received
from dtype_explorer.keras_run import (
    compiled_by,
    describe_model,
    fitting_labels,
    global_seed_kept,
    loss_name,
    sample_text,
    train_steps,
    unimplemented,
)
from dtype_explorer.records import MAX_FIT_STEPS, Finding, FitReport, FixMeasure, FixProof

#: From how many steps a training run shows a progress bar (a shorter one ends in a second).
PROGRESS_STEPS = 20


def check_steps(steps: Any, mode: str, engine: str | None) -> int:
    """``steps`` checked: a whole number from 1 to ``MAX_FIT_STEPS``, more than 1 only with
    ``mode="fit"`` and a Keras 3 engine (the Keras 2 audit runs one ``train_on_batch``).

    >>> check_steps(20, "fit", None)
    20
    >>> check_steps(0, "fit", None)
    Traceback (most recent call last):
    ...
    dtype_explorer.errors.InvalidSpecError: steps is how many training steps mode='fit' runs: ...
    """
    whole = isinstance(steps, numbers.Integral) and not isinstance(steps, bool)
    if not whole or not 1 <= steps <= MAX_FIT_STEPS:
        raise InvalidSpecError(
            "steps is how many training steps mode='fit' runs: a whole number from 1 to "
            f"{MAX_FIT_STEPS}. Received: steps={received(steps)}"
        )
    if steps != 1 and mode != "fit":
        raise InvalidSpecError(
            f"steps counts training steps: pass it with mode='fit'; got mode={mode!r}. "
            f"Received: steps={steps}"
        )
    if steps != 1 and engine is not None and engine.startswith("tf_keras"):
        raise InvalidSpecError(
            "steps: the Keras 2 audit (engine='tf_keras') runs one training step "
            f"(train_on_batch); leave steps out. Received: steps={steps}"
        )
    return int(steps)


def fit_step(
    copy: Any, sample: Any, outputs: Any, labels: Any, steps: int = 1
) -> tuple[FitReport | None, Any]:
    """``steps`` real ``model.fit`` steps of the compiled copy on ``sample``: its report, or
    the finding that it raised where the eager ``training=True`` call ran. Labels the user gave
    that the step refuses are an ``InvalidSpecError``."""
    import keras

    name = loss_name(copy)
    given = labels is not None
    fitting = fitting_labels(copy, outputs)  # zeros, class indices for a sparse loss
    labels = fitting if labels is None else labels

    def step(y: Any, count: int = 1) -> FitReport:
        with (
            global_seed_kept(),
            progress_bar(
                total=count, desc=f"fit {copy.name}", enabled=count >= PROGRESS_STEPS, unit="step"
            ) as bar,
        ):
            return train_steps(
                copy,
                sample,
                y,
                count,
                loss=str(name),
                prefix=f"{copy.name}/",
                on_step=lambda _: bar.update(1),
            )

    try:
        return step(labels, steps), None
    except Exception as error:
        said = f"{type(error).__name__}: {as_sentence(keras_message(str(error), limit=1000))}"
        if unimplemented(error) is not None:  # the openvino backend: Keras's trainer refuses
            raise InvalidSpecError(
                f"mode 'fit' cannot audit {describe_model(copy)} on the "
                f"{keras.backend.backend()} backend, which does not implement it; Keras "
                f"says: {said}"
            ) from None
        how, shown = compiled_by(copy)[1], sample_text(labels)
        if not given:
            found = _audit_rules_across.step_failed(copy.name, said, how, str(name), shown)
        elif _fits_with(step, fitting):  # Keras's error is about the labels: they are to blame
            raise InvalidSpecError(
                f"one model.fit step of a copy of {describe_model(copy)} failed with the labels "
                f"given ({shown}): {said}"
            ) from error
        else:
            found = _audit_rules_across.step_error(copy.name, said, how, str(name), shown)
        if "XLA" not in how:
            return None, found
        proof = _without_xla(copy, step, labels, said)
        fix = proof.change if proof.proven else ""
        return None, found.model_copy(update={"fix": fix, "proof": proof})


def frozen_proven(
    fit: FitReport, copy: Any, sample: Any, outputs: Any, labels: Any, calls: list
) -> list[Finding]:
    """The run's ``update-lost`` findings, each with its fix run on a copy trained as the run
    was (``_fixes_training.update_lost_proof``: the same batch, the labels given or the same
    zeros, the same number of steps)."""
    found = list(_audit_rules_across.frozen_findings(fit, copy.name))
    if not found:
        return []
    labels = fitting_labels(copy, outputs) if labels is None else labels
    steps = max(len(fit.steps), 1)
    return [_fixes_training.update_lost_proof(f, copy, sample, labels, steps, calls) for f in found]


def _without_xla(copy: Any, step: Callable[[Any], Any], labels: Any, said: str) -> FixProof:
    """The step that raised compiled with XLA run again on ``copy`` compiled without it
    (``jit_compile=False``, its train function made again)."""
    before = FixMeasure(finding=True, at=copy.name, error=said[:300])
    copy.jit_compile = False
    copy.train_function = None
    proof = FixProof(how="jit-off", before=before)
    try:
        step(labels)
    except Exception as error:
        again = f"{type(error).__name__}: {as_sentence(keras_message(str(error), limit=300))}"
        return proof.model_copy(
            update={
                "after": FixMeasure(finding=True, at=copy.name, error=again[:300]),
                "tried": (f"jit_compile=False: the step raised {again[:200]}",),
            }
        )
    code = (
        "model.compile(optimizer=model.optimizer, loss=model.loss, jit_compile=False)"
        "   # proven on a copy: one model.fit step ran (your other compile arguments as before)"
    )
    return proof.model_copy(
        update={
            "change": code,
            "proven": True,
            "after": FixMeasure(finding=False, at=copy.name),
            "tried": ("jit_compile=False: one model.fit step ran",),
        }
    )


def _fits_with(step: Callable[[Any], Any], labels: Any) -> bool:
    """Whether the training step runs with ``labels`` (zeros fitting the model's outputs):
    when it fails with those too, the error is the model's own, not the labels'."""
    try:
        step(labels)
    except Exception:
        return False
    return True

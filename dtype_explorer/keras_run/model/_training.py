"""One real training step, as ``model.fit`` runs it: compiled as Keras's trainer compiles it
(``tf.function`` on tensorflow; ``jax.jit`` on jax and ``torch.compile`` on torch under
``jit_compile``), eager on torch by default, on jax with ``jit_compile=False`` and where the
model was compiled with ``run_eagerly=True``; the gradients read where the optimizer receives
them.

Inside a compiled step the gradients are symbolic (jax tracers, graph tensors): their dtypes
are read while the step is traced, and their inf/NaN counts are computed by the step itself
and sent out (``jax.debug.callback`` on jax, an assignment to a variable made outside on
tensorflow), so the step that runs is the one Keras compiles, not an eager stand-in. Used by
the probe's ``"fit"`` mode and by ``check_model(..., mode="fit")``.

Whether the loss was scaled: a ``LossScaleOptimizer`` divides every gradient it applies by
its scale, whether or not the train step multiplied the loss by it (``optimizer.scale_loss``,
which Keras's own ``train_step`` calls on every backend; a custom one may not). Its
``scale_loss`` is watched on the instance for the run (:func:`scale_loss_calls`), and the
report says whether it was called (``FitReport.loss_scaled``).

>>> import keras, numpy as np
>>> inputs = keras.Input((3,))
>>> model = keras.Model(inputs, keras.layers.Dense(2, name="dense")(inputs))
>>> model.compile(optimizer="sgd", loss="mse")
>>> report = train_one_step(model, np.ones((2, 3), "float32"), np.zeros((2, 2), "float32"))
>>> [(g.name, g.dtype, g.nonfinite) for g in report.gradients]
[('dense/kernel', 'float32', 0), ('dense/bias', 'float32', 0)]
"""

from __future__ import annotations

import contextlib
import hashlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from dtype_explorer import float_bits
from dtype_explorer.keras_run._arrays import numpy_values
from dtype_explorer.keras_run._keras_state import global_seed_kept
from dtype_explorer.keras_run.model._copy import loss_name
from dtype_explorer.keras_run.trace import variable_dtypes
from dtype_explorer.records import FitReport, FitStep, FrozenVariable, GradientInfo


def compiled_by(model: Any) -> tuple[bool, str]:
    """Whether ``model.fit``'s step is compiled, and by what, in words: as Keras's trainer
    decides it, from ``run_eagerly`` and ``jit_compile`` (jax jits a step only with
    ``jit_compile``; tensorflow always makes a ``tf.function``, with XLA under it; torch
    compiles with it)."""
    import keras

    backend = keras.backend.backend()
    if getattr(model, "run_eagerly", False):
        return False, "eager (compiled with run_eagerly=True)"
    jit = jit_compiled(model)
    if backend == "jax":
        return (
            (True, "compiled by jax.jit") if jit else (False, "eager (model.jit_compile is False)")
        )
    if backend == "tensorflow":
        return True, "compiled by tf.function" + (" with XLA" if jit else "")
    if backend == "torch" and jit:
        return True, "compiled by torch.compile"
    return False, f"eager on {backend}"


def jit_compiled(model: Any) -> bool:
    """Keras's ``model.jit_compile``, what its trainer reads, without the property's side
    effect: read before ``compile()`` it stores what ``"auto"`` resolves to on the model.

    >>> import keras
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(jit_compile=False)
    >>> jit_compiled(model)
    False
    """
    value = getattr(model, "_jit_compile", None)
    if value is not None:
        return bool(value)
    resolve = getattr(model, "_resolve_auto_jit_compile", None)  # a model with no trainer: none
    return bool(resolve()) if callable(resolve) else False


def predict_compiled_by(model: Any) -> tuple[bool, str]:
    """Whether ``model.predict`` runs compiled, and by what, in words: jax, tensorflow and
    torch as :func:`compiled_by` (torch's trainer compiles its predict step with
    ``torch.compile`` under ``jit_compile``, as its train step); openvino compiles the model's
    graph with ``ov.compile_model`` (where every layer supports it), at the CPU plugin's
    default inference precision (bfloat16 on a CPU with native bf16: float32 outputs, bf16
    arithmetic), not the f32 its eager ops ask."""
    import keras
    from keras.src.trainers.trainer import model_supports_jit

    backend = keras.backend.backend()
    if getattr(model, "run_eagerly", False):
        return False, "eager (compiled with run_eagerly=True)"
    if backend in ("jax", "tensorflow", "torch"):
        return compiled_by(model)
    if backend == "openvino" and model is not None and model_supports_jit(model):
        return True, "compiled by OpenVINO (ov.compile_model, the CPU plugin's default precision)"
    return False, f"eager on {backend}"


class _GradientSink:
    """Reads the gradients the optimizer receives, concrete or inside a compiled step: each
    one's inf/NaN values and its nonzero values, counted."""

    def __init__(self, model: Any, prefix: str):
        import keras

        self.backend = keras.backend.backend()
        variables = list(model.trainable_variables)
        self.names = [v.path.removeprefix(prefix) for v in variables]
        self.stored = [keras.backend.standardize_dtype(v.dtype) for v in variables]
        self.dtypes: list[str | None] | None = None
        #: This step's counts: each gradient's inf/NaN values, then each one's nonzero ones.
        self.counts: list[int] | None = None
        #: The nonzero counts of the step last taken (:meth:`take`).
        self.nonzero: list[int] | None = None
        self.unread: str | None = None
        self._variable: Any = None
        if self.backend == "tensorflow":
            import tensorflow as tf

            self._variable = tf.Variable(
                tf.fill([max(2 * len(variables), 1)], tf.constant(-1, tf.int64)), trainable=False
            )

    def record(self, gradients: list[Any]) -> None:
        import keras

        if self.dtypes is None:  # the first trace (a compiled step may be traced twice)
            self.dtypes = [
                None if g is None else keras.backend.standardize_dtype(g.dtype) for g in gradients
            ]
        try:
            if self._concrete(gradients):
                counted = [self._count_now(g) for g in gradients]
                self.counts = [c[0] for c in counted] + [c[1] for c in counted]
            else:
                counted = [self._count_op(g) for g in gradients]
                self._send([c[0] for c in counted] + [c[1] for c in counted])
        except Exception as error:  # never let reading the gradients change the step
            self.unread = f"{type(error).__name__}: {error}"

    def _concrete(self, gradients: list[Any]) -> bool:
        if self.backend == "tensorflow":
            import tensorflow as tf

            return tf.executing_eagerly()
        if self.backend == "jax":
            import jax

            return not any(isinstance(g, jax.core.Tracer) for g in gradients)
        return True

    @staticmethod
    def _count_now(g: Any) -> tuple[int, int]:
        if g is None:
            return 0, 0
        values = numpy_values(g).astype("float32")
        finite = np.isfinite(values)
        return int(np.size(values) - finite.sum()), int(np.count_nonzero(values[finite]))

    @staticmethod
    def _count_op(g: Any) -> tuple[Any, Any]:
        import keras

        if g is None:
            zero = keras.ops.zeros((), dtype="int32")
            return zero, zero
        wide = keras.ops.cast(g, "float32")
        finite = keras.ops.isfinite(wide)
        nonzero = keras.ops.logical_and(finite, keras.ops.not_equal(wide, 0))
        return (
            keras.ops.sum(keras.ops.cast(keras.ops.logical_not(finite), "int32")),
            keras.ops.sum(keras.ops.cast(nonzero, "int32")),
        )

    def _send(self, counts: list[Any]) -> None:
        if self.backend == "jax":
            import jax

            def received(*values: Any) -> None:
                self.counts = [int(v) for v in values]

            jax.debug.callback(received, *counts)
        elif self.backend == "tensorflow":
            import tensorflow as tf

            if counts:
                self._variable.assign(tf.cast(tf.stack(counts), tf.int64))
        else:
            raise RuntimeError(f"cannot read gradients inside a compiled step on {self.backend}")

    def take(self) -> list[int] | None:
        """The inf/NaN counts of the step that just ran (``None``: not read), cleared for the
        next step; its nonzero counts are kept in :attr:`nonzero`."""
        self.nonzero = None
        if self.unread is not None:
            return None
        n = len(self.names)
        if self.backend == "tensorflow" and self.counts is None:
            import tensorflow as tf

            counts = [int(c) for c in self._variable.numpy()]
            self._variable.assign(tf.fill(tf.shape(self._variable), tf.constant(-1, tf.int64)))
            if any(c < 0 for c in counts[: 2 * n]):
                return None
            self.nonzero = counts[n : 2 * n]
            return counts[:n]
        if self.backend == "jax":
            import jax

            jax.effects_barrier()  # the step's callback has run
        counts, self.counts = self.counts, None
        if counts is None:
            return None
        self.nonzero = counts[n : 2 * n]
        return counts[:n]

    def gradients(self, counts: list[int] | None) -> tuple[GradientInfo, ...]:
        """Each gradient's dtype (read while the step was traced) with its inf/NaN count in
        the step whose ``counts`` are given."""
        found = []
        for i, (name, stored) in enumerate(zip(self.names, self.stored)):
            dtype = (self.dtypes or [None] * len(self.names))[i]
            if dtype is None:
                continue
            bad = None if counts is None else counts[i]
            found.append(GradientInfo(name=name, dtype=dtype, variable_dtype=stored, nonfinite=bad))
        return tuple(found)


def train_one_step(
    model: Any,
    x: Any,
    y: Any,
    *,
    loss: str | None = None,
    prefix: str = "",
    variables_of: Any = None,
) -> FitReport:
    """Run one ``model.fit`` step on ``(x, y)`` (one batch) and report it.

    Args:
        model: a compiled Keras model; it is trained (pass a copy to keep the original).
        x: the batch of inputs.
        y: the batch of targets.
        loss: the loss's name for the report (default: the model's compiled loss, by name).
        prefix: cut from the variables' paths in the report.
        variables_of: the layer whose variables' dtypes after the step are reported
            (default: the model).

    Returns:
        A ``FitReport``: loss and optimizer, loss scaling and its scale before and after, each
        gradient's dtype and inf/NaN count as the optimizer received it, the variables' dtypes
        after, whether the step was compiled, and what Keras warned.

    >>> import keras, numpy as np
    >>> inputs = keras.Input((2,))
    >>> model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> train_one_step(model, np.ones((2, 2)), np.zeros((2, 1))).loss
    'mse'
    """
    return train_steps(model, x, y, 1, loss=loss, prefix=prefix, variables_of=variables_of)


def train_steps(
    model: Any,
    x: Any,
    y: Any,
    steps: int = 1,
    *,
    loss: str | None = None,
    prefix: str = "",
    variables_of: Any = None,
    on_step: Callable[[FitStep], None] | None = None,
) -> FitReport:
    """Run ``steps`` real training steps on ``(x, y)`` (one batch, one step an epoch: one
    ``model.fit`` of ``steps`` epochs) and report each.

    Args:
        model: a compiled Keras model; it is trained (pass a copy to keep the original).
        x: the batch of inputs.
        y: the batch of targets.
        steps: how many steps (``1``: the report of one step, with no :attr:`FitReport.steps`).
        loss: the loss's name for the report (default: the model's compiled loss, by name).
        prefix: cut from the variables' paths in the report.
        variables_of: the layer whose variables' dtypes after the run are reported
            (default: the model).
        on_step: called with each step's record as it ends (a progress bar).

    Returns:
        A ``FitReport`` of the first step (as :func:`train_one_step`), the variables' dtypes
        after the last, and with ``steps > 1`` every step (``FitReport.steps``: loss, loss
        scale, skipped, inf/NaN gradient counts).

    >>> import keras, numpy as np
    >>> inputs = keras.Input((2,))
    >>> model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> run = train_steps(model, np.ones((2, 2)), np.zeros((2, 1)), 3)
    >>> [s.step for s in run.steps], run.skipped_steps
    ([1, 2, 3], ())
    """
    import keras

    # 1. Before the run: loss scaling and its scale, how the step is compiled.
    optimizer = model.optimizer
    scaling = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
    scale_before = loss_scale(optimizer) if scaling else None
    if scaling and scale_before is None:
        scale_before = float(optimizer.initial_scale)
    compiled, execution = compiled_by(model)
    # 2. The run, model.fit on one batch a step, with the gradients read where the optimizer
    #    gets them and each step read as it ends.
    sink = _GradientSink(model, prefix)
    watcher = _step_watcher(sink, optimizer, on_step)
    batch = len(keras.tree.flatten(x)[0])
    recorded = gradients_to(optimizer, sink.record)
    before = [_digest(v) for v in model.trainable_variables]  # not a copy: a model's size
    watched = scale_loss_calls(model)
    with (
        recorded,
        watched as scaled,
        global_seed_kept(),
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")  # Keras's warnings go to the report, not the user
        model.fit(
            x, y, batch_size=batch, epochs=steps, verbose=0, shuffle=False, callbacks=[watcher]
        )
    # 3. The report: the first step's, every step's.
    first = watcher.records[0] if watcher.records else None
    owner = model if variables_of is None else variables_of
    notes = []
    if sink.unread is not None:
        notes.append(f"the gradients' inf/NaN counts could not be read: {sink.unread}")
    said = "one training step" if steps == 1 else f"{steps} training steps"
    return FitReport(
        loss=loss or loss_name(model),
        optimizer=type(optimizer).__name__
        + (f"({type(optimizer.inner_optimizer).__name__})" if scaling else ""),
        loss_value=None if first is None else first.loss,
        loss_scaling=scaling,
        loss_scaled=None if scaled is None else scaled[0] > 0,
        loss_scale=scale_before,
        loss_scale_after=None if first is None else first.loss_scale,
        gradients=sink.gradients(watcher.first_counts),
        warnings=tuple(
            dict.fromkeys([*(str(w.message) for w in caught if not _numpy_copy_notice(w)), *notes])
        ),
        variables_after={
            v.path.removeprefix(prefix): variable_dtypes(v).stored for v in owner.variables
        },
        compiled=compiled,
        execution=f"model.fit: {said}, {execution}",
        steps=tuple(watcher.records) if steps > 1 else (),
        applied=watcher.applied,
        frozen=_frozen(
            model.trainable_variables, before, sink, watcher.nonzero if watcher.moving else None
        ),
    )


def _digest(variable: Any, values: np.ndarray | None = None) -> tuple[tuple[int, ...], str, bytes]:
    """A variable's values (``values``, where read already) as their shape, dtype and a digest
    of their bytes: what tells whether a run left it exactly as it was, without holding a
    second copy of every weight."""
    values = np.ascontiguousarray(numpy_values(variable.value) if values is None else values)
    digest = hashlib.blake2b(memoryview(values.reshape(-1).view(np.uint8)), digest_size=16)
    return values.shape, values.dtype.str, digest.digest()


def _frozen(
    variables: list[Any], before: list[tuple], sink: _GradientSink, nonzero: list[int] | None
) -> tuple[FrozenVariable, ...]:
    """The trainable variables whose values the run left exactly as they were (``before``: each
    one's :func:`_digest`), though their gradients held ``nonzero`` values in the applied
    steps: each update was rounded away when stored. Each with the spacing of its dtype's
    values at its median magnitude (``float_bits.spacing``). Nothing where the gradients were
    not read."""
    if nonzero is None:
        return ()
    found = []
    for variable, old, name, stored, moved in zip(
        variables, before, sink.names, sink.stored, nonzero
    ):
        if not moved:
            continue
        new = numpy_values(variable.value)
        if _digest(variable, new) != old:
            continue
        magnitude = float(np.median(np.abs(float_bits.widened(new)))) if new.size else None
        found.append(
            FrozenVariable(
                name=name,
                dtype=stored,
                size=int(new.size),
                gradient_nonzero=moved,
                magnitude=magnitude,
                spacing=None if not magnitude else float_bits.spacing(magnitude, stored),
            )
        )
    return tuple(found)


def _step_watcher(
    sink: _GradientSink, optimizer: Any, on_step: Callable[[FitStep], None] | None
) -> Any:
    """A ``keras.callbacks.Callback`` that reads each step as its epoch (one batch) ends: the
    loss Keras logged, the loss scale, whether the optimizer's ``iterations`` advanced, the
    gradients' inf/NaN counts (``records``; the first step's counts: ``first_counts``)."""
    import keras

    scaling = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
    applying = optimizer.inner_optimizer if scaling else optimizer

    class StepWatcher(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.records: list[FitStep] = []
            self.first_counts: list[int] | None = None
            self.iterations = _iterations(applying)
            self.applied = 0
            #: Whether an applied step had a learning rate above zero (``None``: not read):
            #: a variable a zero rate leaves unchanged lost no update (a warmup from 0).
            self.rate: float | None = None
            self.moving = False
            #: Nonzero gradient values per variable, summed over the applied steps (``None``:
            #: a step's were not read).
            self.nonzero: list[int] | None = [0] * len(sink.names)

        def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
            self.rate = _learning_rate(applying)

        def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
            counts = sink.take()
            if epoch == 0:
                self.first_counts = counts
            iterations = _iterations(applying)
            if iterations != self.iterations or not sink.names:
                self.applied += 1
                self.moving |= self.rate is None or self.rate > 0
                if self.nonzero is not None and sink.nonzero is not None:
                    self.nonzero = [a + b for a, b in zip(self.nonzero, sink.nonzero)]
                else:
                    self.nonzero = None
            value = (logs or {}).get("loss")
            loss = None if value is None else float(value)
            finite = loss is None or bool(np.isfinite(loss))
            record = FitStep(
                step=epoch + 1,
                loss=loss if finite else None,
                loss_nonfinite=not finite,
                loss_scale=loss_scale(optimizer) if scaling else None,
                skipped=bool(sink.names) and iterations == self.iterations,
                nonfinite={
                    name: count
                    for name, count in zip(sink.names, counts or ())
                    if count  # (the variables whose gradient held any, in the model's order)
                },
                counted=counts is not None,
            )
            self.iterations = iterations
            self.records.append(record)
            if on_step is not None:
                on_step(record)

    return StepWatcher()


def _learning_rate(optimizer: Any) -> float | None:
    """The learning rate ``optimizer`` applies its next step with (a schedule's, at its
    iterations), or ``None`` where it cannot be read."""
    import keras

    try:
        return float(keras.ops.convert_to_numpy(optimizer.learning_rate))
    except Exception:
        return None


def _iterations(optimizer: Any) -> int:
    """How many steps ``optimizer`` has applied (its ``iterations``)."""
    import keras

    return int(keras.ops.convert_to_numpy(optimizer.iterations))


@contextlib.contextmanager
def gradients_to(optimizer: Any, record: Callable[[list], None]) -> Iterator[None]:
    """The optimizer's ``apply`` and ``stateless_apply`` hand their gradients (a list) to
    ``record`` first (on the instance: its class is never touched; put back on exit).

    Args:
        optimizer: a built Keras optimizer.
        record: called with each step's gradients before the optimizer applies them.
    """
    apply, stateless_apply = optimizer.apply, optimizer.stateless_apply

    def recorded_apply(gradients: Any, *args: Any, **kwargs: Any) -> Any:
        gradients = list(gradients)
        record(gradients)
        return apply(gradients, *args, **kwargs)

    def recorded_stateless(optimizer_variables: Any, gradients: Any, *args: Any) -> Any:
        gradients = list(gradients)
        record(gradients)
        return stateless_apply(optimizer_variables, gradients, *args)

    with _on_instance(optimizer, apply=recorded_apply, stateless_apply=recorded_stateless):
        yield


@contextlib.contextmanager
def _on_instance(optimizer: Any, **methods: Callable[..., Any]) -> Iterator[None]:
    """``methods`` set on the optimizer instance for the block, past Keras's attribute
    tracking (its class is never touched), and taken off after."""
    for name, method in methods.items():
        object.__setattr__(optimizer, name, method)
    try:
        yield
    finally:
        for name in methods:
            optimizer.__dict__.pop(name, None)


@contextlib.contextmanager
def scale_loss_calls(model: Any) -> Iterator[list[int] | None]:
    """Inside, each call of the ``scale_loss`` of ``model``'s ``LossScaleOptimizer`` is
    counted (on the instance: its class is never touched; put back on exit). A compiled step
    calls it while it is traced, so only a step not made yet (or run eagerly) is watched.

    Args:
        model: a compiled Keras model, about to train.

    Returns:
        A context manager giving ``[calls]``, or ``None`` where nothing is watched: an
        optimizer that is no ``LossScaleOptimizer``, or a compiled step made before.
    """
    import keras

    optimizer = getattr(model, "optimizer", None)
    made = getattr(model, "train_function", None) is not None
    if (
        not isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
        or not hasattr(optimizer, "scale_loss")
        or (made and not getattr(model, "run_eagerly", False))
    ):
        yield None
        return
    calls = [0]
    scale_loss = optimizer.scale_loss

    def counted(loss: Any, *args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return scale_loss(loss, *args, **kwargs)

    with _on_instance(optimizer, scale_loss=counted):
        yield calls


def _numpy_copy_notice(warning: Any) -> bool:
    """NumPy 2's notice about ``__array__`` without ``copy=`` (torch tensors), not Keras's."""
    return str(warning.message).startswith("__array__ implementation doesn't accept a copy")


def loss_scale(optimizer: Any) -> float | None:
    """A ``LossScaleOptimizer``'s loss scale now; ``None`` for another optimizer, or one never
    built (no trainable variables: the step applied nothing)."""
    import keras

    scale = getattr(optimizer, "dynamic_scale", None)
    return None if scale is None else float(keras.ops.convert_to_numpy(scale))

"""How a probe runs its layer (``ProbeSpec.mode``): the eager call (``"call"``), the eager
call with ``training=True`` (``"training"``), inside a functional ``keras.Model``
(``"model"``: ``Model.__call__`` and its conversion on the cast path, as the ``model`` stage),
through ``model.predict`` (``"predict"``: compiled on jax, tensorflow and openvino), or one
training step with a real loss and optimizer (``"fit"``: gradients, loss scaling, variables
afterwards; Keras's openvino trainer refuses it, which is shown as not supported), or mapped
over ``tf.data`` (``"dataset"``, on every backend, tensorflow installed).

Under ``"training"`` and ``"fit"`` random layers are seeded (their ``seed=`` argument, from
the spec's seed) and Keras's global seed generator, if one exists, is put back, so answers are
reproducible and cacheable and the user's random stream is untouched. Models built here are
local: nothing compiled outlives the probe.

Which modes apply, and the check of a ``mode=``, are ``_mode_rules``' (re-exported here).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.keras_run._compat import layer_path
from dtype_explorer.keras_run._keras_state import global_seed_kept
from dtype_explorer.keras_run._mode_rules import (
    MODEL_MODES,
)
from dtype_explorer.keras_run.model import (
    compiled_by,
    predict_compiled_by,
    train_one_step,
)
from dtype_explorer.keras_run.trace import operator_limit
from dtype_explorer.records import UNSUPPORTED, CastStep, ErrorInfo, FitReport, own_words


def seeded(cls: Any, kwargs: dict[str, Any], mode: str, seed: int) -> dict[str, Any]:
    """The constructor kwargs with ``seed=`` set from the spec under ``"training"``/``"fit"``,
    for a layer whose constructor takes one and was given none."""
    if mode not in ("training", "fit") or "seed" in kwargs:
        return kwargs
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return kwargs
    return {**kwargs, "seed": seed} if "seed" in params else kwargs


#: Where Keras's preprocessing layers live (every release): the layers it runs in ``tf.data``
#: on every backend.
_PREPROCESSING = ("keras.src.layers.preprocessing.", "keras.layers.preprocessing.")


class ModeRun:
    """One layer run in one mode: ``prepare`` builds the model (before any recorder is set,
    so the symbolic build is not taken for the call), ``forward`` runs it on the samples,
    ``fit_step`` runs one training step."""

    def __init__(
        self,
        mode: str,
        layer: Any,
        call: Callable[..., Any],
        shapes,
        input_dtypes: tuple[str, ...],
        backend: str,
        nest: Callable[[list[Any]], list[Any]] = list,
        paths: list[tuple[Any, ...]] | None = None,
    ):
        self.mode = mode
        # how the leaves nest into the inputs (a user's dict), and each leaf's place there
        self.nest = nest
        self.paths = paths
        self.layer = layer
        self.call = call
        self.shapes = shapes
        self.input_dtypes = input_dtypes
        self.backend = backend
        self.model: Any = None
        self.model_received: list[str] | None = None

    @property
    def traced(self) -> bool:
        """Whether the op trace can follow this mode: every mode; inside a compiled function
        (``predict``, ``dataset``) it records dtypes per op, not values."""
        return True

    def trace_note(self, steps: int) -> str:
        """What the op trace of this mode covers, or why it has none, and what it leaves out
        of the user's Python operators on this backend."""
        notes = (self._mode_note(steps), operator_limit(self.backend))
        return "; ".join(n for n in notes if n)

    def _mode_note(self, steps: int) -> str:
        if self.mode == "fit":
            return (
                "the op trace is the eager training=True call's; the compiled training step "
                "(loss, gradients) is reported in fit, not traced"
            )
        if self.mode == "dataset" and not steps and self.backend != "tensorflow":
            return (
                "no op trace: inside tf.data a preprocessing layer switches itself to "
                f"TensorFlow's ops, and the trace wraps the {self.backend} backend's"
            )
        if self.mode in ("predict", "dataset"):
            where = "model.predict's" if self.mode == "predict" else "tf.data.map's"
            compiled = self.mode == "dataset" or bool(self.compiled)
            if not steps:
                return f"no op trace: {where} function ran no Keras op the trace wraps"
            if compiled:
                return (
                    f"dtypes per op as {where} compiled function traced them (symbolic "
                    "tensors: no values, so no inf/NaN per op)"
                )
        return ""

    def tf_data_limit(self, error: ErrorInfo | None) -> ErrorInfo | None:
        """``error`` as "not supported here" when it is the ``dataset`` mode's limit: off
        tensorflow, only Keras's preprocessing layers (``keras.layers.preprocessing``: they
        switch to TensorFlow's ops inside ``tf.data``, as Keras documents) run in
        ``Dataset.map``; any other layer gets symbolic ``tf.Tensor``s its backend cannot take.
        ``None`` where it is not (the call ran, another mode, tensorflow, a preprocessing
        layer's own failure, the tool's)."""
        import keras

        backend = keras.backend.backend()
        if self.mode != "dataset" or error is None or backend == "tensorflow":
            return None
        preprocessing = type(self.layer).__module__.startswith(_PREPROCESSING)
        if error.where == "tool" or preprocessing:
            return None
        said = f"{error.type}: {own_words(error.message, error.type)}"
        return ErrorInfo(
            type=error.type,
            message=(
                "dataset mode runs the target inside tf.data.Dataset.map, a TensorFlow graph, "
                f"which only the tensorflow backend runs for a layer other than Keras's "
                f"preprocessing layers ({backend} cannot); Keras said: {said}"
            ),
            where=UNSUPPORTED,
        )

    @property
    def values(self) -> bool:
        """Whether the call runs eagerly, so the op trace and numerics can read values."""
        return self.mode not in ("predict", "dataset")

    @property
    def execution(self) -> str:
        if self.mode == "call":
            return "eager call"
        if self.mode == "training":
            return "eager call, training=True"
        if self.mode == "model":
            return "Model.__call__ of a functional model"
        if self.mode == "fit":
            how = compiled_by(self.model)[1]
            return f"model.fit: the eager training=True call, then one step {how}"
        if self.mode == "dataset":
            return "tf.data.Dataset.map (a tf.function graph), one batch"
        return f"model.predict, {self.compiled_by}"

    @property
    def compiled(self) -> bool | None:
        if self.mode == "fit":
            return compiled_by(self.model)[0]
        if self.mode != "predict":
            return None
        return predict_compiled_by(self.model)[0]

    @property
    def compiled_by(self) -> str:
        return predict_compiled_by(self.model)[1]

    def prepare(self) -> None:
        if self.mode not in MODEL_MODES:
            return
        import keras

        inputs = [
            keras.Input(shape=tuple(s[1:]), batch_size=s[0], dtype=d)
            for s, d in zip(self.shapes, self.input_dtypes)
        ]
        outputs = self.call(self.layer, inputs)
        with _unquantized_global_policy():  # the wrapper model quantizes nothing itself
            self.model = keras.Model(inputs[0] if len(inputs) == 1 else inputs, outputs)
        standardize = self.model._standardize_inputs

        def recorded(inputs: Any) -> Any:
            flat = standardize(inputs)
            if self.model_received is None:
                self.model_received = [
                    dtypes.describe(t) for t in flat if hasattr(t, "dtype") and hasattr(t, "shape")
                ]
            return flat

        object.__setattr__(self.model, "_standardize_inputs", recorded)

    def forward(self, samples: list[Any]) -> Any:
        if self.mode == "call":
            return self.call(self.layer, samples)
        if self.mode == "training":
            with global_seed_kept():
                return self.call(self.layer, samples, training=True)
        if self.mode == "dataset":
            return self._dataset(samples)
        x = samples[0] if len(samples) == 1 else list(samples)
        if self.mode == "model":
            return self.model(x)
        if self.mode == "fit":
            with global_seed_kept():
                return self.model(x, training=True)
        return self.model.predict(x, batch_size=self.shapes[0][0], verbose=0)

    def _dataset(self, samples: list[Any]) -> Any:
        """The layer mapped over one batch of ``tf.data``, as Keras documents preprocessing
        layers on every backend; the batch it yields. Each element is the inputs as the user
        nested them (a dict of named inputs stays a dict), as a user's own dataset yields it."""
        import tensorflow as tf

        batch = self.shapes[0][0]
        paths = self.paths or [(i,) for i in range(len(samples))]
        element = tuple(self.nest(list(samples)))
        data = tf.data.Dataset.from_tensor_slices(element).batch(batch)
        mapped = data.map(lambda *xs: self.call(self.layer, [_at(xs, p) for p in paths]))
        return next(iter(mapped))

    def model_steps(self, converted: list[str]) -> list[CastStep]:
        """What ``Model.__call__`` handed the layer, one step per input (the ``model`` stage)."""
        if self.model is None or self.model_received is None:
            return []
        return [
            CastStep(
                stage="model",
                dtype=got,
                index=i,
                changed=got != conv,
                note=(
                    f"Model.__call__ kept {got} (keras.Input dtype {self.input_dtypes[i]})"
                    if got == conv
                    else f"{conv} -> {got}: Model.__call__ converted it (keras.Input dtype "
                    f"{self.input_dtypes[i]}, model policy {self.model.dtype_policy.name})"
                ),
            )
            for i, (conv, got) in enumerate(zip(converted, self.model_received))
        ]

    def fit_step(self, samples: list[Any], outputs: Any, softmax_head: bool) -> FitReport:
        """One ``model.fit`` step on the sample against zeros: sparse categorical crossentropy
        for a softmax head, else mean squared error on every output (zeros in the outputs'
        structure: an RNN cell's ``(h, [h, c])`` as Keras's fit asks it), with SGD; ``compile``
        wraps the optimizer in ``LossScaleOptimizer`` under ``mixed_float16``, as it does for
        users. The step is the one Keras compiles (``jax.jit``, ``tf.function``; eager on
        torch)."""
        import keras

        if softmax_head:
            shape = tuple(keras.tree.flatten(outputs)[0].shape)
            loss, y = "sparse_categorical_crossentropy", np.zeros(shape[:-1], dtype="int32")
        else:
            loss = "mean_squared_error"
            y = keras.tree.map_structure(
                lambda t: np.zeros(tuple(t.shape), dtype="float32"), outputs
            )
        self.model.compile(optimizer=keras.optimizers.SGD(0.01), loss=loss)
        x = samples[0] if len(samples) == 1 else list(samples)
        prefix = f"{layer_path(self.layer)}/"
        return train_one_step(self.model, x, y, loss=loss, prefix=prefix, variables_of=self.layer)


@contextlib.contextmanager
def _unquantized_global_policy() -> Iterator[None]:
    """Under a quantized global policy (``int8_from_float32``, a quantized layer's own), the
    policy it quantizes (``float32``) while the wrapper model is made: a functional model under
    a quantized policy would look for its own ``_int8_call`` when called (Keras's
    ``Layer.__call__``), which only the quantized layer has. Put back afterwards."""
    import keras

    policy = keras.config.dtype_policy()
    if not getattr(policy, "quantization_mode", None) or "_from_" not in policy.name:
        yield
        return
    keras.config.set_dtype_policy(policy.name.split("_from_", 1)[1])
    try:
        yield
    finally:
        keras.config.set_dtype_policy(policy)


def _at(nested: Any, path: tuple[Any, ...]) -> Any:
    """The leaf of ``nested`` at ``path`` (``(0, "images")``: the first input's "images")."""
    for key in path:
        nested = nested[key]
    return nested

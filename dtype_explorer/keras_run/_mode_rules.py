"""Which modes apply to a target, and the one check of a ``mode=`` (``check_mode``): pure
rules over the target's name and its layer class, with nothing of the mode's running, so that
validating a question (``make_spec``) imports no training or tracing code.

>>> check_mode("predict", "Discretization", backend="numpy")
'predict'
>>> check_mode("training", "ReLU", backend="numpy")
Traceback (most recent call last):
...
dtype_explorer.errors.InvalidSpecError: mode 'training': ReLU.call() takes no `training` ...
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from typing import Any

from dtype_explorer.errors import InvalidSpecError, unknown
from dtype_explorer.keras_run import catalog
from dtype_explorer.records import MODES, Mode

#: Modes that build a functional model around the layer.
MODEL_MODES: tuple[Mode, ...] = ("model", "predict", "fit")
#: Modes that hand the inputs to Keras as data, which counts samples on axis 0 of each array:
#: ``model.predict`` and ``model.fit`` (their data adapter), and ``tf.data`` slicing.
DATA_MODES: tuple[Mode, ...] = ("predict", "fit", "dataset")


def takes_training(cls: Any) -> bool:
    """Whether a layer class's (or instance's) ``call`` takes a ``training`` argument."""
    call = getattr(cls if isinstance(cls, type) else type(cls), "call", None)
    if call is None:
        return False
    try:
        return "training" in inspect.signature(call).parameters
    except (TypeError, ValueError):
        return False


def applicable(target_name: str, layer: Any = None, backend: str | None = None) -> list[str]:
    """The modes that apply to a target: ``"call"`` for an op, and ``"fit"`` (the gradient of
    its output w.r.t. its float inputs) off numpy; only ``"call"`` for a loss or a metric;
    ``"training"`` only where the layer's ``call`` takes ``training``; ``"fit"`` not on numpy
    (its backend cannot train, and has no gradients). On openvino ``"fit"`` applies: Keras's
    own trainer refuses it there, and that refusal, in its words, is the answer (shown as not
    supported, never a divergence), as is an op's gradient, which openvino has none of."""
    if target_name.startswith("ops."):
        return ["call"] if backend == "numpy" else ["call", "fit"]
    if target_name.startswith(("losses.", "metrics.")):
        return ["call"]
    modes = list(MODES)
    if layer is not None and not takes_training(layer):
        modes.remove("training")
    if backend == "numpy":
        modes.remove("fit")
    if importlib.util.find_spec("tensorflow") is None:
        modes.remove("dataset")
    return modes


_NOT_LAYERS = ("ops.", "losses.", "metrics.", "custom:")


def modes_for(target_name: str, layer: Any = None, backend: str | None = None) -> list[str]:
    """``applicable``, with a catalog layer's class looked up by its name.

    >>> modes_for("ReLU", backend="numpy")
    ['call', 'model', 'predict', 'dataset']
    """
    keras_here = "keras" in sys.modules
    if layer is None and keras_here and not target_name.startswith(_NOT_LAYERS):
        # A process that has not imported Keras (the CLI, a script asking workers) leaves the
        # ``training`` check to the worker, whose answer is then an ``invalid`` result saying
        # the same: importing Keras here would import its default backend, TensorFlow.
        import keras

        layer = getattr(keras.layers, catalog.entry(target_name).name, None)
    return applicable(target_name, layer, backend)


def check_mode(mode: Any, target_name: str, layer: Any = None, backend: str | None = None) -> Mode:
    """``mode`` if it names a mode that applies to the target, else ``InvalidSpecError`` saying
    why and listing the modes that do. ``layer`` is the layer class (a catalog name's is looked
    up), needed to tell whether ``training`` applies."""
    if not isinstance(mode, str) or mode not in MODES:
        raise unknown("mode", mode, MODES)
    if mode == "call":  # every target runs as called, and the front process need not import Keras
        return mode
    modes = modes_for(target_name, layer, backend)
    if mode in modes:
        return mode  # type: ignore[return-value]
    name = target_name.removeprefix("custom:")
    if target_name.startswith("ops.") and mode == "fit":
        why = "the numpy backend has no gradients, so an op's gradient cannot be taken there"
    elif target_name.startswith("ops."):
        why = (
            f"{name} is an op: it is called eagerly (mode='fit' takes its gradient), not "
            "trained or put in a model"
        )
    elif target_name.startswith(("losses.", "metrics.")):
        why = f"{name} is a loss or metric: it is called eagerly, not put in a model"
    elif mode == "training":
        why = f"{name}.call() takes no `training` argument, so training=True changes nothing"
    elif mode == "dataset":
        why = "it runs the layer inside tf.data.Dataset.map, and tensorflow is not installed"
    else:
        why = "the numpy backend cannot train (model.fit is not implemented there)"
    raise InvalidSpecError(f"mode {mode!r}: {why}; modes for {name}: {', '.join(modes)}")


def check_batch_layout(
    mode: str, name: str, shapes: tuple[tuple[int, ...], ...], batch_axes: tuple[int, ...]
) -> None:
    """Refuse a data mode (:data:`DATA_MODES`) where an input holds its batch on another
    axis than 0 and its axis 0 is not the batch: an RNN cell's states stacked as one tensor
    (``LSTMCell``'s ``(2, batch, units)``, ``StackedRNNCells``'s ``(n_cells, batch, units)``).
    Keras's ``predict``/``fit`` and ``tf.data`` take axis 0 of every array as its samples,
    so they would refuse the probe's own layout ("Data cardinality is ambiguous"), which is
    no answer about the layer. Where axis 0 happens to equal the batch, the probe hands the
    whole arrays over as one batch and Keras runs the layer on them as given.

    Args:
        mode: the probe's mode.
        name: the layer's name, for the message.
        shapes: each input's shape, batch first for the layer's inputs.
        batch_axes: each input's batch axis (``LayerEntry.batch_axes``; ``()``: axis 0).

    Raises:
        InvalidSpecError: saying which input, its shape and where its batch is, and what to
            ask instead.

    >>> check_batch_layout("predict", "StackedRNNCells", ((2, 3), (1, 2, 4)), (0, -2))
    Traceback (most recent call last):
    ...
    dtype_explorer.errors.InvalidSpecError: mode 'predict': StackedRNNCells's input 1 ...
    >>> check_batch_layout("model", "StackedRNNCells", ((2, 3), (1, 2, 4)), (0, -2))
    """
    if mode not in DATA_MODES or not shapes or not shapes[0]:
        return
    batch = shapes[0][0]
    for i, shape in enumerate(shapes):
        axis = batch_axes[i] if i < len(batch_axes) else 0
        if not shape or axis % len(shape) == 0 or shape[0] == batch:
            continue
        raise InvalidSpecError(
            f"mode {mode!r}: {name}'s input {i} has shape {tuple(shape)} with the batch "
            f"({batch}) at axis {axis % len(shape)}: the states stacked as one tensor. "
            "model.predict, model.fit and tf.data count samples on axis 0 of every array "
            f"({shape[0]} here, {batch} for input 0), so Keras would refuse this layout, not "
            f"the layer. Ask mode='call' or mode='model' (one call, no batching), or probe "
            f"the cell inside keras.layers.RNN, whose states are (batch, units) arrays"
        )

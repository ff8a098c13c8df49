"""An op's ``mode="fit"``: the gradient of its output with respect to its float inputs, as a
user takes it on their backend (``jax.grad``, ``tf.GradientTape``, ``torch.autograd.grad``) of
the sum of the op's float outputs; each gradient's dtype and inf/NaN count, in the same
``FitReport`` a layer's training step fills (no loss, no optimizer: no step is taken). Keras
has no gradient of its own, and numpy and openvino (inference only) none at all: there the mode
is not supported."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.records import FitReport, GradientInfo

#: How each backend takes a gradient, in words (the report's ``execution``).
HOW = {
    "jax": "jax.grad",
    "tensorflow": "tf.GradientTape",
    "torch": "torch.autograd.grad",
}


class NoGradients(Exception):
    """The backend has no gradients (numpy), or the op no float input or output."""


def op_gradients(
    run: Callable[[dict[int, Any]], Any], floats: dict[int, Any], names: Sequence[str]
) -> FitReport:
    """The gradient of the sum of ``run``'s float outputs w.r.t. each input in ``floats``.

    Args:
        run: the op called with its probed inputs replaced by the given ones (index -> tensor);
            returns its outputs.
        floats: the probed float inputs, index -> backend tensor, as the eager call had them.
        names: each probed input's name in the cast path, by index.

    Returns:
        A ``FitReport`` (loss: what was differentiated; one ``GradientInfo`` per input).

    Raises:
        NoGradients: on numpy and openvino, or with no float input or output (the why in
            its message).
    """
    import keras

    backend = keras.backend.backend()
    if backend not in HOW:  # numpy, openvino
        raise NoGradients(f"the {backend} backend has no gradients (it has no autodiff)")
    if not floats:
        raise NoGradients("the op has no float input to differentiate with respect to")
    order = list(floats)

    def total(xs: Sequence[Any]) -> Any:
        outputs = run(dict(zip(order, xs)))
        leaves = [o for o in keras.tree.flatten(outputs) if _is_float(o)]
        if not leaves:
            raise NoGradients("the op's output is not float: it has no gradient")
        summed = [keras.ops.sum(o) for o in leaves]
        return summed[0] if len(summed) == 1 else keras.ops.sum(keras.ops.stack(summed))

    grads = _gradients(backend, total, [floats[i] for i in order])
    infos = [_info(names[i], floats[i], g) for i, g in zip(order, grads)]
    return FitReport(
        loss="the sum of the op's float outputs",
        optimizer="none: the op's gradient, no training step",
        gradients=tuple(infos),
        compiled=False,
        execution=f"{HOW[backend]} of the sum of the output, eager",
    )


def _is_float(value: Any) -> bool:
    return hasattr(value, "dtype") and dtypes.is_float(dtypes.describe(value))


def _gradients(backend: str, total: Callable[[Sequence[Any]], Any], xs: list[Any]) -> list[Any]:
    if backend == "jax":
        import jax

        return list(jax.grad(lambda *a: total(a), argnums=tuple(range(len(xs))))(*xs))
    if backend == "tensorflow":
        import tensorflow as tf

        xs = [tf.convert_to_tensor(x) for x in xs]
        with tf.GradientTape() as tape:
            for x in xs:
                tape.watch(x)
            y = total(xs)
        return list(tape.gradient(y, xs))
    import torch  # the one backend left: op_gradients refused those without a HOW

    xs = [x.detach().clone().requires_grad_(True) for x in xs]
    return list(torch.autograd.grad(total(xs), xs, allow_unused=True))


def _info(name: str, x: Any, grad: Any) -> GradientInfo:
    import keras

    given = dtypes.describe(x)
    if grad is None:  # the output does not depend on this input
        return GradientInfo(name=name, dtype="none (not connected)", variable_dtype=given)
    values = np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(grad, "float32")))
    nonfinite = int(np.size(values) - np.count_nonzero(np.isfinite(values)))
    return GradientInfo(
        name=name, dtype=dtypes.describe(grad), variable_dtype=given, nonfinite=nonfinite
    )

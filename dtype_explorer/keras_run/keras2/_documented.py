"""What Keras 2 (``tf_keras``) documents about a layer's output dtype, in its own words.

tf_keras states its policy rule in two docstrings, read here from the ``tf_keras`` running
(never copied in), and quoted in the answer's basis:

* ``tf.keras.mixed_precision.Policy``, "How a layer uses its policy's compute dtype": *A layer
  casts its inputs to its compute dtype. This causes the layer's computations and output to
  also be in the compute dtype.* and *Currently, only tensors in the first argument to the
  layer's `call` method are casted*;
* ``Layer._maybe_cast_inputs`` (what ``Layer.__call__`` runs): *If self._compute_dtype is
  floating-point, and self_autocast is True, floating-point inputs are casted to
  self._compute_dtype.*

So the documented output dtype is the layer's own ``compute_dtype`` (read from the built
``tf_keras`` layer: its policy, the user's ``dtype=``, a ``tf.keras.Model``'s too, since
``Model.__call__`` is ``Layer.__call__``) where that rule decides it: the compute dtype is
floating, the layer autocasts, every input is floating and in the first argument of ``call``.
Elsewhere tf_keras states no rule for the output (an int input is not cast, a second argument
is not cast, ``autocast=False`` casts nothing, a layer that picks its output dtype itself),
and the answer stays ``undocumented``, saying which condition was not met. A release whose
docstrings no longer say it documents nothing here.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from dtype_explorer.keras_run import _rules as rules
from dtype_explorer.keras_run.catalog import LayerEntry
from dtype_explorer.keras_run.probe import LayerInputs
from dtype_explorer.records import Expectation

#: The sentences quoted, as patterns over each docstring with its whitespace collapsed.
_CASTS = r"A layer casts its inputs to its compute dtype\. This causes [^.]*\."
_FIRST_ARGUMENT = r"Currently, only tensors in the first argument to the layer's `call` method "
_FLOATS = (
    r"If self\._compute_dtype is floating-point, and self_autocast is True, floating-point "
    r"inputs are casted to self\._compute_dtype\."
)


def _sentence(obj: Any, pattern: str) -> str | None:
    """The first match of ``pattern`` in ``obj``'s docstring (whitespace collapsed)."""
    text = " ".join((inspect.getdoc(obj) or "").split())
    found = re.search(pattern, text)
    return found.group(0) if found else None


def policy_rule(tf_keras: Any) -> tuple[str, ...] | None:
    """tf_keras's own statements of its policy rule, each as ``"<where>: '<its words>'"``;
    ``None`` when this release's docstrings do not state it.

    >>> import tf_keras                                                # doctest: +SKIP
    >>> policy_rule(tf_keras)[0][:60]                                  # doctest: +SKIP
    "tf.keras.mixed_precision.Policy: 'A layer casts its inputs t"
    """
    from tf_keras.src.engine.base_layer import Layer

    policy = tf_keras.mixed_precision.Policy
    casts = _sentence(policy, _CASTS)
    first = _sentence(policy, _FIRST_ARGUMENT + r"[^.]*\.")
    floats = _sentence(Layer._maybe_cast_inputs, _FLOATS)
    if casts is None or floats is None:
        return None
    said = [
        f"tf.keras.mixed_precision.Policy: {casts!r}",
        f"tf_keras Layer._maybe_cast_inputs (run by Layer.__call__): {floats!r}",
    ]
    if first is not None:
        said.append(f"tf.keras.mixed_precision.Policy: {first!r}")
    return tuple(said)


def documented(
    layer: Any, entry: LayerEntry, inputs: LayerInputs, tf: Any, tf_keras: Any
) -> tuple[rules.Documented, list[Expectation]]:
    """The output dtype tf_keras documents for ``layer`` called on ``inputs``, and the policy
    expectation (none where it documents none).

    Args:
        layer: the built ``tf_keras`` layer or model (its policy, its ``autocast``).
        entry: its catalog entry (how its inputs are passed; a layer the catalog marks as
            choosing its own output dtype).
        inputs: what its call gets (each leaf's dtype and argument).
        tf: TensorFlow.
        tf_keras: Keras 2.

    Returns:
        ``(documented, expectations)``: ``documented.dtype`` ``None`` where tf_keras states
        no rule, its basis saying why.
    """
    said = policy_rule(tf_keras)
    if said is None:
        why = f"tf_keras {tf_keras.__version__}'s docstrings state no policy rule for outputs"
        return rules.Documented(None, (why,)), []
    compute = layer.compute_dtype
    missing = _not_covered(layer, entry, inputs, compute, tf)
    if missing is not None:
        return rules.Documented(None, (f"tf_keras documents no output dtype here: {missing}",)), []
    why = (
        f"{type(layer).__name__} casts its floating-point inputs to its compute dtype "
        f"{compute}: its output is documented as {compute}"
    )
    basis = (why, *said)
    return rules.Documented(compute, basis), [
        Expectation(source="policy", dtype=compute, basis="; ".join(basis))
    ]


def _not_covered(
    layer: Any, entry: LayerEntry, inputs: LayerInputs, compute: Any, tf: Any
) -> str | None:
    """Why the documented rule does not decide this call's output, or ``None`` if it does."""
    name = type(layer).__name__
    if compute is None or not tf.as_dtype(compute).is_floating:
        return f"{name}'s compute dtype {compute} is not floating-point (nothing is cast)"
    if not getattr(layer, "_autocast", True):
        return f"{name} has autocast=False (Layer.__call__ casts none of its inputs)"
    if entry.contract == "own-output":
        return f"{name} chooses its output dtype itself (its own arguments), not the policy"
    if not inputs.dtypes:
        return f"{name} is called on no tensor"
    positional = entry.input_style == "positional"
    later = [d for d, path in zip(inputs.dtypes, inputs.paths) if positional and path[0] != 0]
    if later:
        return (
            f"{name}'s call takes {', '.join(later)} after its first argument, which "
            "Layer.__call__ does not cast"
        )
    others = [d for d in inputs.dtypes if not _floating(d, tf)]
    if others:
        return f"{', '.join(dict.fromkeys(others))} input: only floating-point inputs are cast"
    return None


def _floating(dtype: str, tf: Any) -> bool:
    try:
        return bool(tf.as_dtype(dtype).is_floating)
    except TypeError:  # a name TensorFlow has no dtype for (a Python scalar's)
        return False

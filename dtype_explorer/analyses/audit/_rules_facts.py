"""Facts of a model's dtypes that are no fault: the layers its author keeps in float32 under a
16-bit policy (keras-hub's attention softmax is built with ``dtype="float32"``, so that
Keras computes it in float32 and casts its input up). A pure function of the recorded calls.

>>> from dtype_explorer import dtypes
from dtype_explorer.records import LayerCall
>>> def call(path, cls, policy, compute, depth=1):
...     return LayerCall(path=path, layer_class=cls, depth=depth, policy=policy,
...                      compute_dtype=compute, variable_dtype="float32")
>>> calls = [call("m", "Functional", "mixed_float16", "float16", depth=0),
...          call("m/attention", "Attention", "mixed_float16", "float16"),
...          call("m/attention/softmax", "Softmax", "float32", "float32", depth=2)]
>>> print(float32_on_purpose(calls)[0])  # doctest: +NORMALIZE_WHITESPACE
Kept in float32 on purpose under mixed_float16 (a fact, no fault: each one's own policy
computes in float32, its dtype set where it is built; Keras casts its inputs up and the next
layers cast back down): m/attention/softmax (Softmax in Attention).
"""

from __future__ import annotations

from dtype_explorer import dtypes
from dtype_explorer.records import LayerCall


def float32_on_purpose(calls: list[LayerCall]) -> list[str]:
    """A note (a fact, not a finding: nothing to fix) naming each layer whose own policy
    computes in float32 inside a model that computes in 16 bits (its ``dtype`` was set where
    it is built), with the layer that holds it; none when there is none."""
    top = next((c for c in calls if c.depth == 0), None)
    if top is None or top.compute_dtype not in dtypes.HALF:
        return []
    classes = {c.path: c.layer_class for c in calls}
    kept = [
        c
        for c in calls
        if c.call_index == 0
        and c.depth > 0
        and c.compute_dtype == "float32"
        and "_from_" not in c.policy  # a quantized policy is quantization's own finding
    ]
    if not kept:
        return []
    named = [
        f"{c.path} ({c.layer_class}"
        + (f" in {classes[parent]})" if (parent := c.path.rsplit("/", 1)[0]) in classes else ")")
        for c in kept
    ]
    return [
        f"Kept in float32 on purpose under {top.policy} (a fact, no fault: each one's own "
        "policy computes in float32, its dtype set where it is built; Keras casts its inputs "
        f"up and the next layers cast back down): {', '.join(named)}."
    ]

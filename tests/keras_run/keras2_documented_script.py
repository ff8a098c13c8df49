"""Issue 39 item 7's Keras 2 questions, as tf.keras users write them: run with ``raw`` as plain
tf_keras (the engine's site first, ``TF_USE_LEGACY_KERAS=1``, no dtype-explorer), or with
``dx`` under ``dtype-explorer run --engine tf_keras`` (``engines.script_command``): the same
layers asked through ``dx``. Each prints one ``DX-OUT`` JSON line
(``tests/keras_run/test_keras2_documented.py`` compares them).
"""

import inspect
import json
import sys

import numpy as np
import tensorflow as tf

k = tf.keras


class Head(k.Model):
    """A subclassed model: ``Model.__call__`` is ``Layer.__call__``, which casts its inputs."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = k.layers.Dense(2, kernel_initializer="ones")

    def call(self, inputs):
        return self.dense(inputs)


class BackToFloat32(k.layers.Layer):
    """A user's layer that leaves its compute dtype: it returns float32 under mixed_float16."""

    def call(self, inputs):
        return tf.cast(inputs, tf.float32) * 2.0


class TwoArguments(k.layers.Layer):
    """tf_keras's own docstring example (``Policy``): ``b`` is not cast."""

    def call(self, a, b):
        return a + 1.0, b + 1.0


x32 = np.full((2, 3), 0.5, "float32")
x64 = np.full((2, 3), 0.5, "float64")
own = k.layers.Dense(2, dtype="float64", kernel_initializer="ones", name="own")


def _names(out) -> list:
    return [t.dtype.name for t in tf.nest.flatten(out)]


def raw() -> dict:
    out = {"module": k.layers.Dense.__module__.split(".")[0]}
    out["policy_doc"] = " ".join(inspect.getdoc(k.mixed_precision.Policy).split())
    k.mixed_precision.set_global_policy("mixed_float16")
    dense = k.layers.Dense(2)
    out["dense_mixed"] = [_names(dense(x32)), dense.compute_dtype]
    head = Head()
    out["model"] = [_names(head(x64)), head.compute_dtype]
    back = BackToFloat32()
    out["back"] = [_names(back(x32)), back.compute_dtype]
    k.mixed_precision.set_global_policy("float32")
    out["own"] = [_names(own(x32)), own.compute_dtype]
    two = TwoArguments(dtype="float64")
    out["two"] = [_names(two(x32, x32)), two.compute_dtype]
    return out


def dx_answers() -> dict:
    import dtype_explorer as dx

    def said(r) -> dict:
        return {
            "outputs": list(r.output_dtypes),
            "documented": r.documented_dtype,
            "verdict": r.verdict,
            "expected_by": r.expected_by,
            "policy": [e.dtype for e in r.expectations if e.source == "policy"],
            "basis": list(r.basis),
            "error": r.error and r.error.message,
        }

    out = {}
    for name, ask in [
        (
            "dense_mixed",
            lambda: dx.probe("Dense", values=x32, kwargs={"units": 2}, policy="mixed_float16"),
        ),
        ("model", lambda: dx.probe(Head, values=x64, policy="mixed_float16")),
        ("back", lambda: dx.probe(BackToFloat32, values=x32, policy="mixed_float16")),
        ("own", lambda: dx.probe(own, values=x32)),
        ("two", lambda: dx.probe(TwoArguments, values=[x32, x32], kwargs={"dtype": "float64"})),
    ]:
        try:
            out[name] = said(ask())
        except Exception as error:  # what the test shows when the tool refuses
            out[name] = f"raised {type(error).__name__}: {error}"
    return out


if __name__ == "__main__":
    answers = raw() if sys.argv[1:] == ["raw"] else dx_answers()
    print("DX-OUT " + json.dumps(answers))

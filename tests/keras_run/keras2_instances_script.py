"""Issue 39's Keras 2 questions, as tf.keras users wrote them: run with ``raw`` as plain
tf_keras (the engine's site first, ``TF_USE_LEGACY_KERAS=1``, no dtype-explorer), or with
``dx`` under ``dtype-explorer run --engine tf_keras`` (``engines.script_command``): the same
objects asked through ``dx``. Each prints one ``DX-OUT`` JSON line
(``tests/keras_run/test_keras2_instances.py`` compares them).
"""

import json
import sys

import numpy as np
import tensorflow as tf

k = tf.keras


class Pair(k.layers.Layer):
    """A layer whose call takes one tuple (issue 39, item 1)."""

    def call(self, inputs):
        a, b = inputs
        return a * b


a, b = np.full((2, 3), 2.0, "float32"), np.full((2, 3), 3.0, "float32")

# Item 2: a model around adapted StringLookup and IntegerLookup layers.
words = k.layers.StringLookup(name="words")
words.adapt(np.array([["a"], ["b"], ["c"]]))
ids = k.layers.IntegerLookup(name="ids")
ids.adapt(np.array([[7], [8]], "int64"))
s_in = k.Input((1,), dtype="string", name="s")
i_in = k.Input((1,), dtype="int64", name="i")
s_out = k.layers.Dense(1, kernel_initializer="ones", name="ds")(
    k.layers.Flatten()(
        k.layers.Embedding(words.vocabulary_size(), 2, embeddings_initializer="ones")(words(s_in))
    )
)
i_out = k.layers.Dense(1, kernel_initializer="ones", name="di")(
    k.layers.Flatten()(
        k.layers.Embedding(ids.vocabulary_size(), 2, embeddings_initializer="ones")(ids(i_in))
    )
)
lookups = k.Model([s_in, i_in], [s_out, i_out])
xs, xi = np.array([["a"], ["z"]]), np.array([[7], [9]], "int64")

# Item 3: an adapted TextVectorization instance (its dtype: "string").
vectorize = k.layers.TextVectorization(output_mode="multi_hot")
vectorize.adapt(np.array(["a b", "b c"]))
texts = np.array(["a c", "b"])

# Item 6: a Keras 2 loss instance, and a metric instance.
y_true = np.array([1, 2], "int32")
y_pred = np.array([[0.1, 0.6, 0.3], [0.2, 0.2, 0.6]], "float32")
loss = k.losses.SparseCategoricalCrossentropy()
metric = k.metrics.SparseCategoricalAccuracy()

# Item 4: a call's mask.
x = np.array([[1.0, 2.0]], "float32")
mask = [[True, False]]


def raw() -> dict:
    out = {"module": k.layers.Dense.__module__.split(".")[0]}
    k.mixed_precision.set_global_policy("mixed_float16")
    pair = Pair()((a, b))
    k.mixed_precision.set_global_policy("float32")
    out["pair"] = [pair.dtype.name, pair.numpy().ravel().tolist()[:2]]
    out["lookups"] = [t.dtype.name for t in lookups([xs, xi])]
    out["vectorize"] = [vectorize(texts).dtype.name, vectorize(texts).numpy().tolist()]
    value = loss(y_true, y_pred)
    out["loss"] = [value.dtype.name, round(float(value), 5)]
    metric.update_state(y_true, y_pred)
    out["metric"] = [metric.result().dtype.name, float(metric.result())]
    out["softmax_mask"] = k.layers.Softmax()(x, mask=np.array(mask)).numpy().ravel().tolist()
    return out


def dx_answers() -> dict:
    import dtype_explorer as dx

    def head(result) -> list | None:
        return result.numerics and list(result.numerics.outputs[0].head)

    def pair() -> list:
        got = dx.probe(Pair, policy="mixed_float16", values=[(a, b)])
        return [got.output_dtype, (head(got) or [])[:2], got.error and got.error.message]

    def lookups_() -> list:
        report = dx.check_model(lookups, [xs, xi])
        errors = [f.message for f in report.findings if f.severity == "error"]
        return [[t.dtype for t in report.layers[0].outputs], errors]  # the model's own call

    def vectorize_() -> list:
        got = dx.probe(vectorize, values=[texts])
        return [got.output_dtype, got.error and got.error.message, got.spec.policy]

    def loss_() -> list:
        got = dx.probe(loss, values=[y_true, y_pred])
        return [got.output_dtype, round((head(got) or [0])[0], 5), got.spec.target]

    def metric_() -> list:
        got = dx.probe(metric, values=[y_true, y_pred])
        return [got.output_dtype, (head(got) or [None])[0], got.spec.target]

    def softmax() -> list | None:
        return head(dx.probe("Softmax", values=[x], call_kwargs={"mask": mask}))

    out = {}
    for name, ask in [
        ("pair", pair),
        ("lookups", lookups_),
        ("vectorize", vectorize_),
        ("loss", loss_),
        ("metric", metric_),
        ("softmax_mask", softmax),
    ]:
        try:
            out[name] = ask()
        except Exception as error:  # what the test shows when the tool refuses
            out[name] = f"raised {type(error).__name__}: {error}"
    return out


if __name__ == "__main__":
    answers = raw() if sys.argv[1:] == ["raw"] else dx_answers()
    print("DX-OUT " + json.dumps(answers))

"""``mode="dataset"`` beside raw ``tf.data``: a model of named inputs fed a dataset of dicts,
and the mode's limit off tensorflow (a layer other than Keras's preprocessing layers cannot run
inside ``Dataset.map`` there), which every view draws as "not supported here", as ``fit`` on
numpy is, never as a divergence of backends; raw Keras on jax is run in a process of its own
(this session's backend is tensorflow, see conftest.py) to show the limit is Keras's."""

import os
import subprocess
import sys

import keras
import numpy as np
import tensorflow as tf

import dtype_explorer as dx
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.frontends.widget import unsupported_result
from dtype_explorer.records import ProbeSpec, compare
from dtype_explorer.views import probe_set_table

NAMED = {"a": np.linspace(-1, 1, 6).reshape(2, 3).astype("float32"), "b": np.ones((2, 3), "int32")}


def _named_model():
    a = keras.Input((3,), name="a")
    b = keras.Input((3,), name="b", dtype="int32")
    joined = keras.layers.Concatenate()([a, keras.ops.cast(b, "float32")])
    dense = keras.layers.Dense(2, kernel_initializer="ones", name="head")
    return keras.Model({"a": a, "b": b}, dense(joined))


def test_a_model_of_named_inputs_runs_on_a_dataset_of_dicts_as_raw_tf_data_does():
    model = _named_model()
    r = dx.probe(model, values=[NAMED], mode="dataset")
    assert r.status == "ok", r.error
    assert "tf.data.Dataset.map" in r.execution
    raw = next(iter(tf.data.Dataset.from_tensor_slices(NAMED).batch(2).map(model)))
    assert r.output_dtype == keras.backend.standardize_dtype(raw.dtype)
    inputs = {s.name: s.dtype for s in r.cast_path if s.stage == "input"}
    assert inputs == {"a": "float32", "b": "int32"}


_RAW_ON_JAX = """
import numpy as np, keras, tensorflow as tf
layer = keras.layers.Dense(4)
data = tf.data.Dataset.from_tensor_slices(np.ones((2, 4), "float32")).batch(2)
try:
    next(iter(data.map(layer)))
    print("RAN")
except Exception as error:
    print("RAISED", type(error).__name__)
"""


def _raw_dense_in_tf_data_on_jax() -> str:
    env = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [sys.executable, "-c", _RAW_ON_JAX], env=env, capture_output=True, text=True, timeout=300
    )
    return done.stdout.strip().splitlines()[-1]


def test_dataset_mode_off_tensorflow_is_not_supported_like_fit_on_numpy_never_a_divergence():
    raw = _raw_dense_in_tf_data_on_jax()
    rs = dx.probe("Dense", mode="dataset", backend=["jax", "tensorflow"], use_cache=False)
    jax, tf_result = rs["jax"], rs["tensorflow"]
    # raw Keras on jax raises inside Dataset.map too: the tool says it cannot run, in its words
    assert raw.startswith("RAISED"), raw
    assert jax.unsupported and jax.error.type == raw.split()[1]
    assert "Keras said: " in jax.error.message and "\n" not in jax.error.message
    assert jax.headline.startswith("not supported here: dataset mode runs the target")
    layer = keras.layers.Dense(4)
    data = tf.data.Dataset.from_tensor_slices(np.ones((2, 4), "float32")).batch(2)
    expected = keras.backend.standardize_dtype(next(iter(data.map(layer))).dtype)
    assert tf_result.ok and tf_result.output_dtype == expected
    # no say in the verdict across backends, and drawn as fit's limit is, in every view
    assert rs.verdict == tf_result.verdict != "diverges"
    assert rs.first_divergence() is None
    fit_limit = unsupported_result(
        ProbeSpec(target="Dense", mode="fit"), "numpy", InvalidSpecError("numpy cannot train")
    )
    for result in (jax, fit_limit):
        grid = compare([result, tf_result])
        assert grid.columns[0].status == "unsupported"
        assert result.shown_verdict == "unsupported"
    html = rs._repr_html_()
    assert "⊘ unsupported" in html and "disagree" not in html
    assert "jax cannot" in html
    assert "(in not supported here)" not in html and "⊘ not supported here" in html
    assert "⊘ not supported here: dataset mode" in str(jax)
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(probe_set_table(rs))
    text = console.export_text()
    assert "⊘ unsupported" in text and "diverges" not in text

"""Issue 39, the Keras 2 side (items 1-6): a layer whose call takes one tuple, a model around
adapted ``StringLookup``/``IntegerLookup``, an adapted ``TextVectorization`` instance, a call's
``mask`` (``call_kwargs``), an RNN cell's sampled state, and Keras 2 loss and metric
instances. Each is asked as a tf.keras user asks it (``keras2_instances_script.py``): through
``dx`` under ``dtype-explorer run --engine tf_keras`` (the Keras 2 kernel's environment) and,
for the built-in questions, from this Keras 3 process with ``engine="tf_keras"``; every answer
is compared with the same code run as plain tf_keras (the engine's site first,
``TF_USE_LEGACY_KERAS=1``, no dtype-explorer).

Creating the engine needs the package index: without it these tests fail, never skip.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from keras2_runs import in_engine, plain_tf_keras

import dtype_explorer as dx

pytestmark = pytest.mark.timeout(900)

SCRIPT = Path(__file__).with_name("keras2_instances_script.py")

#: Plain tf_keras, as users call it: an RNN cell on its inputs and a state tensor.
RAW_CELL = """
import json
import numpy as np
import tensorflow as tf

x = np.linspace(-1, 1, 6, dtype="float32").reshape(2, 3)
h = np.full((2, 4), 0.5, "float32")
cells = {}
for name in ("GRUCell", "SimpleRNNCell"):
    y, _ = getattr(tf.keras.layers, name)(4)(x, tf.constant(h))
    try:
        getattr(tf.keras.layers, name)(4)(x, h)
        refused = None
    except Exception as error:
        refused = type(error).__name__
    cells[name] = [y.dtype.name, refused]
print("DX-OUT " + json.dumps(cells))
"""


@pytest.fixture(scope="module")
def plain(tf_keras_engine) -> dict:
    out = plain_tf_keras(tf_keras_engine, str(SCRIPT), "raw")
    assert out.pop("module") == "tf_keras"
    return out


@pytest.fixture(scope="module")
def asked(tf_keras_engine) -> dict:
    """The same questions through ``dx``, in the Keras 2 engine's own process."""
    return in_engine(tf_keras_engine, str(SCRIPT), "dx")


def test_a_layer_whose_call_takes_one_tuple_gets_the_tuple(plain, asked):
    """Item 1: ``values=[(a, b)]`` is one input (a tuple), not two."""
    dtype, head, error = asked["pair"]
    assert error is None
    assert [dtype, head] == plain["pair"] == ["float16", [6.0, 6.0]]


def test_a_model_around_adapted_lookups_is_audited(plain, asked):
    """Item 2: the lookups' ``VocabWeightHandler`` is no variable; the model's call runs."""
    outputs, errors = asked["lookups"]
    assert errors == []
    assert outputs == plain["lookups"] == ["float32", "float32"]


def test_an_adapted_textvectorization_keeps_its_own_dtype(plain, asked):
    """Item 3: its dtype ``"string"`` is the layer's own, never set as the global policy."""
    dtype, error, policy = asked["vectorize"]
    assert error is None and policy == "string"
    assert dtype == plain["vectorize"][0] == "float32"


def test_keras2_loss_and_metric_instances_are_probed_as_losses_and_metrics(plain, asked):
    """Item 6: a tf.keras loss or metric instance runs as that loss or metric (a metric is a
    tf.keras Layer too: it is still probed as a metric, its update_state and result)."""
    dtype, value, target = asked["loss"]
    assert target == "losses.SparseCategoricalCrossentropy"
    assert dtype == plain["loss"][0] and value == pytest.approx(plain["loss"][1], rel=1e-4)
    dtype, value, target = asked["metric"]
    assert target == "metrics.SparseCategoricalAccuracy"
    assert [dtype, value] == plain["metric"]


def test_call_kwargs_reach_the_layer_in_keras2(plain, asked, tf_keras_engine):
    """Item 4: the mask reaches Softmax, in the engine's process and from Keras 3."""
    assert asked["softmax_mask"] == plain["softmax_mask"] == [1.0, 0.0]
    x = np.array([[1.0, 2.0]], "float32")
    for mode in ("call", "model"):
        r = dx.probe(
            "Softmax",
            values=[x],
            call_kwargs={"mask": [[True, False]]},
            engine="tf_keras",
            backend="tensorflow",
            mode=mode,
        )
        assert r.ok, r.error
        assert list(r.numerics.outputs[0].head) == plain["softmax_mask"], mode


def test_an_rnn_cell_gets_its_sampled_state_as_tf_keras_takes_it(tf_keras_engine):
    """Item 5: the tool's own state sample reaches tf_keras's cells as a tensor, which they
    take; the user's own NumPy state is passed as given, and refused as raw tf_keras refuses
    it."""
    raw = plain_tf_keras(tf_keras_engine, "-c", RAW_CELL)
    x = np.linspace(-1, 1, 6, dtype="float32").reshape(2, 3)
    h = np.full((2, 4), 0.5, "float32")
    for name in ("GRUCell", "SimpleRNNCell"):
        dtype, refused = raw[name]
        sampled = dx.probe(name, kwargs={"units": 4}, engine="tf_keras")
        assert sampled.ok, sampled.error
        assert sampled.output_dtype == dtype
        given = dx.probe(name, values=[x, h], kwargs={"units": 4}, engine="tf_keras")
        assert (given.error.type if given.error else None) == refused, name

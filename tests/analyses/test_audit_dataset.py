"""``check_model(model, x, mode="dataset")`` (issue 39 item 14): the real ``model.predict``
on a ``tf.data.Dataset`` of the sample, as users feed one on every backend, its layers as the
compiled function saw them beside the eager call. Each answer is checked against raw Keras
doing the same (``audit_dataset.py``: each layer's ``call`` records what it received, under
``model.predict(tf.data.Dataset.from_tensor_slices(x).batch(2))`` and the eager call):
tensorflow in-process, jax in its worker (``pool.call``)."""

from __future__ import annotations

import audit_dataset
import keras
import pytest

from dtype_explorer import check_model, pool
from dtype_explorer.errors import InvalidSpecError


def _beside_raw(got: dict) -> set[str]:
    """The audit's layers, output and differences against raw Keras's; the layers whose
    dtypes differ between raw Keras's eager call and its predict on the dataset."""
    assert got["mode"] == "dataset" and "model.predict on a tf.data.Dataset" in got["execution"]
    for name, dtype in got["raw_dataset"].items():  # each layer received what raw Keras's did
        assert got["audited"][name] == dtype, (name, got)
    assert got["output"] == [got["raw_output"]]
    parted = {n for n, d in got["raw_dataset"].items() if d != got["raw_eager"][n]}
    named = {d[0]: d for d in got["differences"] if d[0] in got["raw_dataset"]}
    assert set(named) == parted, got["differences"]
    for name in parted:
        _, where, eager, dataset, run = named[name]
        assert (where, eager, dataset, run) == (
            "received",
            [got["raw_eager"][name]],
            [got["raw_dataset"][name]],
            "dataset",
        )
        assert ["mode-divergence", name, ""] in got["findings"]
    return parted


def test_dataset_mode_on_tensorflow_is_raw_keras_predict_on_a_dataset():
    got = audit_dataset.raw_and_audited()
    assert "tf.function" in got["execution"]
    # the fact to find: Rescaling converts inside tf.data's graph, the eager call keeps uint8
    assert _beside_raw(got) == {"rescale"}


def test_dataset_mode_on_jax_in_its_worker():
    got = pool.call("jax", audit_dataset.raw_and_audited, timeout=300).result()
    assert got["backend"] == "jax" and "jax.jit" in got["execution"]
    _beside_raw(got)
    # the model itself is handed int32 ids from the dataset (jax, x64 off), int64 eagerly
    (root,) = [d for d in got["differences"] if d[0] == "net"]
    assert root[2][0] == "int64" and root[3][0] == "int32"


def test_a_layer_has_no_dataset_mode_and_says_where_to_go():
    with pytest.raises(InvalidSpecError, match=r"dx.probe\(layer, mode='dataset'\)"):
        check_model(keras.layers.Dense(2), mode="dataset")


def test_the_dataset_audit_as_code_runs_raw_keras_predict_on_the_same_dataset():
    """``report.as_code()``'s raw-Keras script feeds the model a ``tf.data.Dataset`` as the
    audit did: run here, it gives raw Keras's own ``model.predict`` on that dataset."""
    import numpy as np
    import tensorflow as tf

    pixels, ids = keras.Input((4,), dtype="uint8", name="pixels"), keras.Input((2,), name="ids")
    scaled = keras.layers.Rescaling(1 / 255, name="rescale")(pixels)
    embedded = keras.layers.Flatten()(keras.layers.Embedding(10, 2, name="emb")(ids))
    joined = keras.layers.Concatenate()([scaled, embedded])
    model = keras.Model({"pixels": pixels, "ids": ids}, keras.layers.Dense(3)(joined))
    x = audit_dataset.sample()
    script = check_model(model, x, mode="dataset").as_code().script
    assert "tf.data.Dataset.from_tensor_slices(element).batch(2)" in script
    scope: dict = {}
    exec(compile(script, "as_code", "exec"), scope)
    raw = model.predict(tf.data.Dataset.from_tensor_slices(x).batch(2), verbose=0)
    assert scope["y"].dtype == raw.dtype
    np.testing.assert_allclose(scope["y"], raw, rtol=1e-6)

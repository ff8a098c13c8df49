"""``mode="save"`` on a model with a string input (issue 39 item 17), beside raw Keras doing
the same work on tensorflow: ``model.export`` then ``keras.layers.TFSMLayer`` on the same text
gives the same bins, so the SavedModel round trip must compare, not report the tool's own
``astype("string")`` failure as a round-trip error."""

from __future__ import annotations

import keras
import numpy as np

from dtype_explorer import check_model


def test_a_hashing_model_on_strings_round_trips_as_raw_keras_does(tmp_path):
    text = np.array([["A"], ["B"], ["C"]])
    inputs = keras.Input((1,), dtype="string")
    model = keras.Model(inputs, keras.layers.Hashing(num_bins=3)(inputs))
    model.export(str(tmp_path / "raw"), verbose=False)
    reloaded = keras.layers.TFSMLayer(str(tmp_path / "raw"), call_endpoint="serve")
    raw = np.asarray(keras.tree.flatten(reloaded(text))[0])
    assert np.array_equal(raw, np.asarray(model(text)))  # raw Keras: the same bins

    report = check_model(model, text, mode="save")
    trips = {t.format: t for t in report.roundtrip.trips}
    saved = trips["SavedModel"]
    assert saved.outcome == "compared", saved.text()
    assert saved.max_abs_difference == 0.0
    assert not [f.message for f in report.findings if "not understood" in f.message]

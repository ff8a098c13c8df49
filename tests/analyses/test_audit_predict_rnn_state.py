"""``check_model(m, [x, h0, c0], mode="predict")`` for a mixed_float16 model around
``LSTM(8, return_sequences=True, return_state=True)(d, initial_state=[h, c])`` (issue 39
item 9), beside raw ``model.predict`` on each backend: on JAX the LSTM's cell runs inside
``lax.scan`` (and every layer inside the jitted predict), where a value is a tracer and has
no values to read; the audit records its dtype, as raw predict runs, and reports no error."""

from __future__ import annotations

import pytest
from on_backend import json_on

_SCRIPT = """
import json
import numpy as np
import keras
import dtype_explorer as dx

keras.config.set_dtype_policy("mixed_float16")
x_in = keras.Input((5, 3), name="x")
h_in = keras.Input((8,), name="h")
c_in = keras.Input((8,), name="c")
d = keras.layers.Dense(4, name="dense")(x_in)
seq, h, c = keras.layers.LSTM(8, return_sequences=True, return_state=True, name="lstm")(
    d, initial_state=[h_in, c_in]
)
model = keras.Model([x_in, h_in, c_in], [seq, h, c])
keras.config.set_dtype_policy("float32")
rng = np.random.default_rng(0)
sample = [
    rng.normal(size=(2, 5, 3)).astype("float32"),
    rng.normal(size=(2, 8)).astype("float32"),
    rng.normal(size=(2, 8)).astype("float32"),
]
raw = [keras.backend.standardize_dtype(o.dtype) for o in model.predict(sample, verbose=0)]
report = dx.check_model(model, sample, mode="predict")
lstm = [c for c in report.layers if c.path.endswith("/lstm")][0]
print(json.dumps({
    "raw": raw,
    "predicted": [o.dtype for o in report.predict.outputs],
    "predict_error": str(report.predict.error) if report.predict.error else None,
    "lstm": [o.dtype for o in lstm.outputs],
    "errors": [f.message[:300] for f in report.findings if f.severity == "error"],
}))
"""


@pytest.mark.parametrize("backend", ["jax", "tensorflow", "torch", "numpy"])
def test_predict_of_an_lstm_given_its_initial_state_reports_what_raw_predict_gives(backend):
    got = json_on(backend, _SCRIPT)
    assert got["errors"] == []
    assert got["lstm"] == got["raw"]
    assert got["predict_error"] is None
    assert got["predicted"] == got["raw"]

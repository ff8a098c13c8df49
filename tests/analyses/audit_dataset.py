"""For ``test_audit_dataset.py``, run in-process (tensorflow) and in a backend's worker
(``pool.call``): raw Keras's ``model.predict`` on a ``tf.data.Dataset`` of a sample, each
layer's call recording the dtypes it received, beside the eager call, and
``check_model(model, sample, mode="dataset")`` on a model built the same way."""

from __future__ import annotations

import numpy as np


def _model(seen: dict[str, list[str]] | None):
    """uint8 pixels through Rescaling (a preprocessing layer: it converts inside a TF graph)
    and int32 ids through an Embedding, joined by a Dense; each layer's ``call`` records the
    dtypes it received into ``seen`` (by layer name) when given."""
    import keras

    def spy(cls):
        class Spy(cls):
            def call(self, inputs):
                if seen is not None:
                    seen.setdefault(self.name, []).append(
                        keras.backend.standardize_dtype(inputs.dtype)
                    )
                return super().call(inputs)

        Spy.__name__ = cls.__name__
        return Spy

    pixels = keras.Input((4,), dtype="uint8", name="pixels")
    ids = keras.Input((2,), dtype="int32", name="ids")
    scaled = spy(keras.layers.Rescaling)(1 / 255, name="rescale")(pixels)
    embedded = spy(keras.layers.Embedding)(10, 2, name="emb")(ids)
    flat = keras.layers.Flatten(name="flat")(embedded)
    joined = keras.layers.Concatenate(name="join")([scaled, flat])
    out = spy(keras.layers.Dense)(3, name="head")(joined)
    return keras.Model({"pixels": pixels, "ids": ids}, out, name="net")


def sample() -> dict[str, np.ndarray]:
    return {
        "pixels": (np.arange(8, dtype="uint8").reshape(2, 4) * 30).astype("uint8"),
        "ids": np.array([[1, 2], [3, 9]], dtype="int64"),  # int64, as NumPy makes them
    }


def raw_and_audited() -> dict:
    """Raw Keras's eager call and ``model.predict(dataset)`` (what each layer received and
    the output's dtype), then the audit of the same model in ``mode="dataset"``."""
    import keras
    import tensorflow as tf

    import dtype_explorer as dx

    x = sample()
    eager: dict[str, list[str]] = {}
    keras.tree.map_structure(lambda t: t, _model(eager)(x))
    seen: dict[str, list[str]] = {}
    model = _model(seen)
    data = tf.data.Dataset.from_tensor_slices(x).batch(2)
    out = model.predict(data, verbose=0)
    report = dx.check_model(_model(None), x, mode="dataset")
    layers = {c.path.rsplit("/", 1)[-1]: [t.dtype for t in c.received] for c in report.layers}
    return {
        "backend": keras.backend.backend(),
        "raw_eager": {k: v[-1] for k, v in eager.items()},
        "raw_dataset": {k: v[-1] for k, v in seen.items()},
        "raw_output": keras.backend.standardize_dtype(out.dtype),
        "mode": report.mode,
        "execution": report.execution,
        "audited": {k: v[0] for k, v in layers.items() if v},
        "output": [t.dtype for t in report.predict.outputs],
        "eager_output": [t.dtype for t in report.predict.eager_outputs],
        "differences": [
            [d.path.rsplit("/", 1)[-1], d.where, list(d.eager), list(d.predict), d.run]
            for d in report.predict.differences
        ],
        "findings": [[f.kind, f.path.rsplit("/", 1)[-1], f.fix] for f in report.findings],
    }

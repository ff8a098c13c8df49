"""What the tool writes of a model on jax imports no TensorFlow, and writes what Keras writes.

Keras's ``serialize_keras_object`` asks ``tf.available`` of every object, which imports
TensorFlow where it is installed: a first audit on another backend took 1.5 s and 565 MB more
for it (``benchmarks/first_use.py``). ``keras_run.tensorflow_if_imported`` answers the same
question without the import. Checked in a fresh jax process (this suite runs on tensorflow):
an audit, its ``.keras``/``.h5`` round trip and a probe of an instance leave TensorFlow
unimported, and each writes what raw Keras writes once TensorFlow is imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import keras
import pytest
from keras.src.saving import serialization_lib
from keras.src.utils.module_utils import LazyModule

from dtype_explorer.keras_run import tensorflow_if_imported

pytestmark = pytest.mark.subprocess

_ON_JAX = r"""
import json, sys
import numpy as np, keras
import dtype_explorer as dx
from dtype_explorer.keras_run.model import pack
from keras.src.legacy.saving import json_utils
from keras.src.saving import serialization_lib
from keras.src.utils.module_utils import LazyModule

def tf_imported():
    return "tensorflow" in sys.modules

def put_back():
    return isinstance(serialization_lib.tf, LazyModule) and isinstance(json_utils.tf, LazyModule)

x = np.random.default_rng(0).uniform(-3, 3, (4, 8)).astype("float32")
inputs = keras.Input((8,))
h = keras.layers.Dense(6, activation="relu")(inputs)
model = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Dropout(0.2)(h)))
model(x)
out = {"imported": {"start": tf_imported()}, "put_back": []}
layer = keras.layers.Dense(3)
layer.build((2, 4))
packed = pack(layer)  # what the worker's path sends: written here, outside any probe
out["imported"]["pack"] = tf_imported()
call = dx.check_model(model, x)
out["config"] = call.question.config
out["imported"]["audit"], _ = tf_imported(), out["put_back"].append(put_back())
save = dx.check_model(model, x, mode="save")
out["trips"] = [t.model_dump(mode="json") for t in save.roundtrip.trips]
out["imported"]["round trip"], _ = tf_imported(), out["put_back"].append(put_back())
skip = {"timings", "environment", "versions"}
probe = lambda: dx.probe(layer, "float32", shape=[2, 4], use_cache=False)
out["instance"] = probe().model_dump(mode="json", exclude=skip)
out["imported"]["instance probe"], _ = tf_imported(), out["put_back"].append(put_back())
# raw Keras, which imports TensorFlow as it writes: the same config, round trips and probe
out["raw_config"] = json.loads(json.dumps(keras.saving.serialize_keras_object(model)))
out["imported_by_keras"] = tf_imported()
again = dx.check_model(model, x, mode="save")
out["trips_imported"] = [t.model_dump(mode="json") for t in again.roundtrip.trips]
out["instance_imported"] = probe().model_dump(mode="json", exclude=skip)
print(json.dumps(out))
"""


def _on_jax() -> dict:
    env = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [sys.executable, "-c", _ON_JAX], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_audit_a_round_trip_and_an_instance_probe_on_jax_import_no_tensorflow():
    out = _on_jax()
    assert out["imported"] == dict.fromkeys(
        ("start", "pack", "audit", "round trip", "instance probe"), False
    )
    assert out["put_back"] == [True, True, True]
    assert out["instance"]["status"] == "ok"
    # the same answers as where Keras imported TensorFlow to write them
    assert out["imported_by_keras"]
    assert out["config"] == out["raw_config"]
    formats = [(t["format"], t["outcome"]) for t in out["trips"]]
    assert (".keras", "compared") in formats and (".h5", "compared") in formats
    assert out["trips"] == out["trips_imported"]
    assert out["instance"] == out["instance_imported"]


def test_where_tensorflow_is_imported_keras_writes_its_objects_as_it_does_without_the_block():
    import tensorflow as tf

    shape, dtype = tf.TensorShape([2, None]), tf.float16
    raw = [serialization_lib.serialize_keras_object(v) for v in (shape, dtype)]
    with tensorflow_if_imported():
        assert not isinstance(serialization_lib.tf, LazyModule)
        assert serialization_lib.tf.available
        inside = [serialization_lib.serialize_keras_object(v) for v in (shape, dtype)]
        assert keras.layers.Dense(2).get_config()["units"] == 2
    assert inside == raw == [[2, None], "float16"]
    assert isinstance(serialization_lib.tf, LazyModule)


def test_nested_blocks_and_a_rebinding_meanwhile_are_left_as_they_are():
    lazy = serialization_lib.tf
    with tensorflow_if_imported():
        outer = serialization_lib.tf
        with tensorflow_if_imported():
            assert serialization_lib.tf is outer  # not a stand-in of the stand-in
        assert serialization_lib.tf is outer
    assert serialization_lib.tf is lazy
    theirs = object()
    try:
        with tensorflow_if_imported():
            serialization_lib.tf = theirs  # someone re-binds it inside the block: kept
        assert serialization_lib.tf is theirs
        with tensorflow_if_imported():  # not Keras's lazy module: not replaced
            assert serialization_lib.tf is theirs
    finally:
        serialization_lib.tf = lazy


def test_a_failure_half_way_through_the_replacing_puts_back_what_was_replaced(monkeypatch):
    import importlib

    from keras.src.legacy.saving import json_utils

    real = importlib.import_module

    def failing(name: str, *args: object) -> object:
        if name == "keras.src.legacy.saving.json_utils":
            raise RuntimeError("interrupted")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", failing)
    lazy = serialization_lib.tf
    with (
        pytest.raises(RuntimeError, match="interrupted"),
        tensorflow_if_imported(
            ("keras.src.saving.serialization_lib", "keras.src.legacy.saving.json_utils")
        ),
    ):
        pass
    assert serialization_lib.tf is lazy
    assert isinstance(json_utils.tf, LazyModule)

"""Spurious ``state_changed`` entries (issue 39 item 18): Keras's own objects are fingerprinted
before a user's code runs and compared after. Python's empty ``__annotations__`` on a class
first read (TensorFlow's tracing reads them) is not a change, and a registry keyed by classes
(``GLOBAL_CUSTOM_NAMES``) is named, not a ``TypeError`` that replaces the worker, and what a
user's ``pool.call`` changed is put back after it, never named by the next probe. Compared with
raw Keras: the registry as Keras's own ``register_keras_serializable`` leaves it, and a plain
LoRA Dense called by bare Keras on tensorflow."""

from __future__ import annotations

import keras
import numpy as np

import dtype_explorer as dx
from dtype_explorer.keras_run import _integrity as integrity
from tests.on_backend import json_on


def test_reading_a_keras_classs_annotations_is_not_a_change():
    before = integrity.snapshot()
    classes = [keras.initializers.Zeros, keras.initializers.GlorotUniform, keras.Variable]
    for cls in classes:
        cls.__annotations__  # noqa: B018 - Python stores {} in the class's dict on this read
    assert integrity.changes(before) == []
    # a real annotation written onto a Keras class is still one
    keras.initializers.Zeros.__annotations__ = {"x": int}
    try:
        assert any(n.endswith("Zeros.__annotations__") for n in integrity.changes(before))
    finally:
        integrity.restore(before)
    assert integrity.changes(before) == []


def test_classes_registered_by_keras_are_named_and_put_back():
    registry = keras.saving.get_custom_objects()
    kept = dict(registry)
    before = integrity.snapshot()

    @keras.saving.register_keras_serializable(package="dx_test")
    class First(keras.layers.Layer):
        pass

    @keras.saving.register_keras_serializable(package="dx_test")
    class Second(keras.layers.Layer):
        pass

    assert keras.saving.get_registered_name(First) == "dx_test>First"  # raw Keras registered
    changed = integrity.changes(before)  # GLOBAL_CUSTOM_NAMES is keyed by the two classes
    assert "GLOBAL_CUSTOM_OBJECTS['dx_test>First']" in changed
    assert any("First" in n and n.startswith("GLOBAL_CUSTOM_NAMES[") for n in changed)
    restored, lost = integrity.restore(before)
    assert lost == [] and set(restored) == set(changed)
    assert keras.saving.get_custom_objects() == kept
    assert keras.saving.get_registered_name(First) == "First"  # as raw Keras before


def test_a_plain_lora_dense_on_tensorflow_changes_nothing():
    dense = keras.layers.Dense(4, kernel_initializer="ones")
    dense.build((None, 3))
    dense.enable_lora(2)
    r = dx.probe(dense, values=[np.ones((2, 3), "float32")], backend="tensorflow")
    assert r.status == "ok", r.error
    assert r.state_changed == ()
    raw = json_on(
        "tensorflow",
        "import json, keras, numpy as np\n"
        "d = keras.layers.Dense(4, kernel_initializer='ones')\n"
        "d.build((None, 3)); d.enable_lora(2)\n"
        "y = d(np.ones((2, 3), 'float32'))\n"
        "print(json.dumps([keras.backend.standardize_dtype(y.dtype), np.asarray(y).tolist()]))",
    )
    assert r.output_dtype == raw[0]


def _leave_floatx_float16() -> str:
    import keras

    keras.config.set_floatx("float16")
    return keras.config.floatx()


def test_what_a_users_pool_call_changed_is_put_back_before_the_next_probe():
    """A user's function run by ``pool.call`` sets floatx in the user-code worker; the next
    probe of a user's layer there runs under the worker's own settings, and its
    ``state_changed`` names nothing that call left (it used to name the call's change as the
    probe's own: after a ``pool.call`` that built a layer, ``keras.dtype_policy``). Raw Keras
    beside it: floatx is float32 in a fresh process."""
    assert dx.pool.call("numpy", _leave_floatx_float16, timeout=120).result() == "float16"
    dense = keras.layers.Dense(2)
    dense.build((None, 3))
    r = dx.probe(dense, values=[np.ones((1, 3), "float32")], backend="numpy")
    assert r.status == "ok", r.error
    assert r.state_changed == ()
    floatx = dx.pool.call("numpy", _floatx, timeout=120).result()
    assert floatx == json_on(
        "numpy", "import json, keras\nprint(json.dumps(keras.config.floatx()))"
    )


def _floatx() -> str:
    import keras

    return keras.config.floatx()

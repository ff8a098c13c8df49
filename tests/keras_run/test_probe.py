"""The probe engine on the scenarios of shared/SCENARIOS.md, on every backend.

In-process tests use this session's backend (tensorflow, see conftest.py); cross-backend
tests go through real worker processes, one per backend.
"""

import keras
import numpy as np
import pytest
from swept import SWEPT

import dtype_explorer as dx

ALL = list(SWEPT)


def stage(result, name, index=0):
    return next(s for s in result.cast_path if s.stage == name and s.index == index)


# --------------------------------------------------------------- scenario 6: mixed precision


@pytest.mark.parametrize("backend", ALL)
@pytest.mark.parametrize(
    "policy, compute", [("mixed_float16", "float16"), ("mixed_bfloat16", "bfloat16")]
)
def test_dense_mixed_precision_outputs_compute_dtype_keeps_float32_kernel(backend, policy, compute):
    r = dx.probe(
        "Dense", input_dtype="float32", policy=policy, backend=backend, kwargs={"units": 4}
    )
    assert r.status == "ok", r.error
    assert r.output_dtype == compute
    assert r.verdict == "as-documented"
    kernel = r.variables["kernel"]
    assert (kernel.stored, kernel.read) == ("float32", compute)
    assert stage(r, "autocast").dtype == compute and stage(r, "autocast").changed
    assert f"result_type({compute}, {compute}) = {compute}" in r.basis


# ---------------------------------------------------------------- scenario 1: uint8 images


def test_conv1d_uint8_diverges_float32_on_jax_error_elsewhere():
    rs = dx.probe(
        "Conv1D", input_dtype="uint8", backend=ALL, kwargs={"filters": 2, "kernel_size": 3}
    )
    assert set(rs.backends) == set(ALL)
    assert rs.verdict == "diverges"
    assert rs["jax"].status == "ok" and rs["jax"].output_dtype == "float32"
    for backend in ("tensorflow", "torch", "numpy"):
        assert rs[backend].status == "error", rs[backend]
        assert rs[backend].error.message
        # the documented dtype is still stated: result_type(uint8, float32)
        assert rs[backend].documented_dtype == "float32"
    # uint8 passes the autocast rule untouched on every backend
    assert stage(rs["jax"], "autocast").note.startswith("uint8 kept: not a float")


@pytest.mark.parametrize("backend", ALL)
def test_batchnorm_on_flattened_uint8_mnist_returns_float32(backend):
    r = dx.probe(
        "BatchNormalization", input_dtype="uint8", backend=backend, shape=(2, 784), values="image"
    )
    assert r.status == "ok", r.error
    assert r.output_dtype == "float32"
    assert stage(r, "autocast").dtype == "uint8"


# ------------------------------------------------------------ scenario 2: float64 -> float32


@pytest.mark.parametrize("backend", ALL)
def test_float64_is_cast_to_float32_and_the_step_says_where(backend):
    r = dx.probe("Dense", input_dtype="float64", backend=backend, kwargs={"units": 3})
    assert r.output_dtype == "float32"
    changed = [s for s in r.cast_path if s.changed and s.stage in ("converted", "autocast")]
    assert len(changed) == 1 and changed[0].dtype == "float32"
    # jax (x64 off) canonicalises 64-bit types when converting an array to a tensor; on numpy
    # the array is already a backend tensor (DTypePolicy.convert_input keeps it), and
    # tensorflow and torch keep float64 too, until Layer.__call__ autocasts it
    assert changed[0].stage == ("converted" if backend == "jax" else "autocast")


def test_layer_dtype_float64_is_honoured_on_tensorflow_and_torch_only():
    rs = dx.probe(
        "Dense", input_dtype="float64", backend=ALL, kwargs={"units": 3, "dtype": "float64"}
    )
    observed = {r.backend: r.output_dtype for r in rs}
    assert observed == {
        "tensorflow": "float64",
        "torch": "float64",
        "jax": "float32",
        "numpy": "float32",
    }
    assert rs.verdict == "diverges"


def test_floatx_float64_changes_the_default_policy():
    r = dx.probe(
        "Dense",
        input_dtype="float64",
        backend="torch",
        kwargs={"units": 3},
        floatx="float64",
        policy="float64",
    )
    assert r.output_dtype == "float64"
    assert stage(r, "autocast").changed is False


# ---------------------------------------------------- scenario 4: custom layer, mixed policy


class Scale(keras.layers.Layer):
    """A user layer: one float weight, multiplied in."""

    def build(self, input_shape):
        self.scale = self.add_weight(name="scale", shape=(input_shape[-1],), initializer="ones")

    def call(self, inputs):
        return inputs * self.scale


@pytest.mark.parametrize("backend", [None, "jax", "torch"])
def test_custom_layer_under_mixed_float16(backend):
    r = dx.probe(Scale, input_dtype="float32", policy="mixed_float16", backend=backend)
    assert r.status == "ok", r.error
    assert r.spec.target == "custom:Scale"
    assert stage(r, "autocast").dtype == "float16"
    assert r.variables["scale"].stored == "float32"
    assert r.variables["scale"].read == "float16"
    assert r.output_dtype == "float16"


def test_integer_lookup_is_judged_by_the_dtype_keras_gives_it_not_the_policy():
    """IntegerLookup's compute dtype is its vocabulary dtype (int64) whatever the policy, and
    its output dtype is chosen by its output_mode: no policy rule documents a float32."""
    vocabulary, ids = [12, 36], np.array([12, 36, 7])
    r = dx.probe("IntegerLookup", kwargs={"vocabulary": vocabulary}, values=[ids])
    raw = keras.layers.IntegerLookup(vocabulary=vocabulary)
    raw_out = keras.backend.standardize_dtype(raw(ids).dtype)
    raw_spec = raw.compute_output_spec(keras.KerasTensor((3,), dtype="int64")).dtype
    assert r.status == "ok", r.error
    assert (r.output_dtype, r.declared_dtype) == (raw_out, raw_spec)
    assert r.documented_dtype is None and r.verdict == "undocumented"
    assert f"the layer's own compute_dtype is {raw.compute_dtype}, not the policy's" in r.basis


# ---------------------------------------------------------------- scenario 3: one op


@pytest.mark.parametrize("backend", ALL)
def test_ops_add_int8_float16_follows_result_type(backend):
    r = dx.probe("ops.add", input_dtype=("int8", "float16"), backend=backend)
    assert r.status == "ok", r.error
    assert r.documented_dtype == keras.backend.result_type("int8", "float16") == "float16"
    assert r.output_dtype == "float16"
    assert r.declared_dtype == "float16"
    assert r.result_type_args == ("int8", "float16")


def test_weak_python_scalar_keeps_the_tensor_dtype():
    r = dx.probe("ops.add", input_dtype=("float16", "python_float"))
    assert r.documented_dtype == r.output_dtype == "float16"


# --------------------------------------------------------------------- in-process details


def test_in_process_probe_restores_global_state_even_on_error():
    keras.config.set_floatx("float32")
    before = keras.config.dtype_policy().name
    r = dx.probe(
        "Conv1D",
        input_dtype="uint8",
        policy="mixed_float16",
        floatx="float16",
        kwargs={"filters": 2, "kernel_size": 3},
    )
    assert r.backend == keras.backend.backend()
    assert keras.config.floatx() == "float32"
    assert keras.config.dtype_policy().name == before


def test_overflow_is_counted_in_float16():
    r = dx.probe(
        "Dense",
        input_dtype="float32",
        policy="mixed_float16",
        values="large",
        kwargs={"units": 4, "kernel_initializer": "ones"},
        shape=(2, 64),
    )
    assert r.numerics.nonfinite_from_finite > 0
    assert r.output_dtype == "float16"


def test_numerics_measures_error_against_a_wider_run():
    r = dx.probe(
        "Dense", input_dtype="float32", policy="mixed_bfloat16", kwargs={"units": 8}, shape=(4, 16)
    )
    assert r.numerics.reference_dtype == "float64"
    assert 0 < r.numerics.max_rel_error < 0.1


def test_result_round_trips_through_json():
    r = dx.probe("Dense", input_dtype="uint8", policy="mixed_float16", kwargs={"units": 2})
    assert dx.ProbeResult.from_dict(r.to_dict()) == r
    assert "documented float16" in str(r)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: dx.probe("Dens"), "did you mean 'Dense'"),
        (lambda: dx.probe("Dense", input_dtype="flaot16"), "did you mean 'float16'"),
        (lambda: dx.probe("Dense", policy="mixed_flaot16"), "did you mean 'mixed_float16'"),
        (lambda: dx.probe("Dense", backend="jaxx"), "did you mean 'jax'"),
        (lambda: dx.probe("Dense", kwargs={"units": object()}), "JSON values"),
        (lambda: dx.probe("Dense", shape=(2, -1)), "positive ints"),
    ],
)
def test_bad_input_names_what_is_valid(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_wrong_kwarg_is_invalid_with_keras_message():
    r = dx.probe("Dense", kwargs={"units": 2, "unitz": 3})
    assert r.status == "invalid"
    assert "unitz" in r.error.message


def test_shape_that_does_not_fit_is_invalid():
    r = dx.probe("Conv2D", kwargs={"filters": 2, "kernel_size": 3}, shape=(2, 5))
    assert r.status == "invalid"
    assert r.error.where == "shape or kwargs"


@pytest.mark.parametrize(
    "shape", ["2x8x3", "(2, 8, 3)", "[2, 8, 3]", "2,8,3", (2, 8, 3), [2, 8, 3]]
)
def test_every_shape_syntax_makes_the_same_spec(shape):
    spec = dx.keras_run.make_spec("Conv1D", backend="numpy", shape=shape)
    assert spec.shapes == ((2, 8, 3),)


def test_a_shape_per_input_as_text_and_a_bad_shape_text_says_what_is_valid():
    spec = dx.keras_run.make_spec("ops.add", backend="numpy", shape="2x4, 2x4")
    assert spec.shapes == ((2, 4), (2, 4))
    with pytest.raises(ValueError, match=r"received: '2x'; valid: a shape as 2x8x3"):
        dx.keras_run.make_spec("Dense", backend="numpy", shape="2x")

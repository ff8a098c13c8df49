"""No verdict that points the wrong way (issue 23): random layers judged against the same
noise, each output judged by an expectation that fits it, layers that turn autocast off, a
backend's dtype limits told from usage mistakes, a value check for every op that computes,
and integers rounded by a 16-bit float named. Real Keras on real backends."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from swept import SWEPT

import dtype_explorer as dx
from dtype_explorer import pool

#: The swept backends (tests/swept.py): the test command installs them, so one missing fails here.
BACKENDS = pool.usable(SWEPT)

# ------------------------------------------------------------------ 1. random layers

RANDOM_LAYERS = [
    ("GaussianDropout", {"rate": 0.1}),
    ("GaussianNoise", {"stddev": 0.1}),
    ("Dropout", {"rate": 0.5}),
    ("AlphaDropout", {"rate": 0.3}),
    ("SpatialDropout1D", {"rate": 0.3}),
]


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_random_layers_in_training_are_checked_against_the_same_noise(policy):
    """Old code: GaussianDropout(0.1) under mixed_bfloat16 in training reported
    ``reference-error`` "error 0.66 of the values' scale" on tensorflow (0.53 on jax), Dropout
    "error 1.5": the float64 reference drew other noise."""
    for name, kwargs in RANDOM_LAYERS:
        for r in dx.probe(
            name, "float32", policy=policy, kwargs=kwargs, mode="training", backend=BACKENDS
        ):
            assert r.status == "ok", (name, r.backend, r.error)
            assert not r.value_findings(), (name, r.backend, r.value_findings())
            assert r.numerics.reference_dtype is not None, (name, r.backend, r.numerics.note)
            assert "random draw(s) replayed" in r.numerics.note, (name, r.backend)
            # compared, and close: only the 16-bit rounding of the same computation is left
            assert r.numerics.max_rel_error is not None and r.numerics.max_rel_error < 0.05
    # call_kwargs training=True takes the same path
    r = dx.probe(
        "GaussianDropout",
        "float32",
        policy=policy,
        kwargs={"rate": 0.1},
        call_kwargs={"training": True},
    )
    assert not r.value_findings() and "replayed" in r.numerics.note
    # rate 0 draws nothing: nothing to replay, no finding either way
    r = dx.probe("GaussianDropout", "float32", policy=policy, kwargs={"rate": 0.0}, mode="training")
    assert not r.value_findings() and "replayed" not in r.numerics.note


# ------------------------------------------------------------ 10. ops with no dtype rule


@pytest.mark.parametrize("op", ["ops.rms_normalization", "ops.layer_normalization"])
def test_normalization_ops_on_int32_get_the_value_check_layers_get(op):
    """Old code: no finding (ops with no dtype rule got no reference run), though the int32
    results are truncated to -1/0/1, where LayerNormalization's same truncation is flagged."""
    for r in dx.probe(op, "int32", backend=BACKENDS):
        assert r.output_dtype == "int32", r.backend
        [found] = r.value_findings()
        assert found.kind == "truncation", (r.backend, found)
        assert float(found.value).is_integer() and not float(found.expected).is_integer()
    # the same op on float32 holds: the check is of the numbers, not of having no rule
    assert not dx.probe(op, "float32").value_findings()
    assert not dx.probe(op, "float16").value_findings()


def test_ops_with_no_dtype_rule_that_only_move_values_get_no_reference_run():
    """A reshape has nothing to check: no reference run, said so in the note."""
    r = dx.probe("ops.reshape", "int32")
    assert r.numerics.reference_dtype is None and "no reference run" in r.numerics.note


# ------------------------------------------------------------ 4. backend dtype limits


def test_a_backend_that_cannot_do_a_dtype_at_build_is_an_error_naming_its_op():
    """Old code: GRU under float16 on jax, torch and numpy came back ``status="invalid"``,
    ``where="shape or kwargs"``, as if the user's arguments were wrong; the orthogonal
    initializer's QR is what the backend refuses in float16."""
    refusing = [b for b in BACKENDS if b in ("jax", "torch", "numpy")]
    for r in dx.probe("GRU", "float16", policy="float16", kwargs={"units": 3}, backend=refusing):
        assert r.status == "error" and r.verdict == "error", (r.backend, r.error)
        assert r.error.where == "build", (r.backend, r.error)
        assert f"keras.src.backend.{r.backend}.linalg.qr refused" in r.error.message, r.error
    # the same layer under float32 is fine, and tensorflow does float16 QR
    assert dx.probe("GRU", "float32", kwargs={"units": 3}, backend=refusing[:1]).results[0].ok
    if "tensorflow" in BACKENDS:
        assert dx.probe("GRU", "float16", policy="float16", backend="tensorflow").status == "ok"


def test_wrong_arguments_stay_the_users_mistake():
    """Keras's argument checks (a bad kwarg, a shape the layer refuses) stay ``invalid``."""
    r = dx.probe("Conv2D", kwargs={"filters": 2, "kernel_size": 3}, shape=(2, 5))
    assert r.status == "invalid" and r.error.where == "shape or kwargs"
    r = dx.probe("Dense", kwargs={"units": -1})
    assert r.status == "invalid" and "units" in r.error.message


# ---------------------------------------------------------------- 3. autocast=False


class _BFloat16Head(keras.layers.Layer):
    """A head with ``autocast=False`` computing with bfloat16 weights (as keras-hub's
    ``MaskedLMHead`` does with its tied embeddings)."""

    def __init__(self, **kwargs):
        super().__init__(autocast=False, **kwargs)

    def build(self, shape):
        self.w = self.add_weight(shape=(shape[-1], 3), dtype="bfloat16", initializer="ones")

    def call(self, x):
        return keras.ops.matmul(keras.ops.cast(x, self.w.dtype), self.w)


def test_an_autocast_off_layer_is_judged_by_what_it_computes_with():
    """Old code: ``deviates`` against a documented float32 (the policy's compute dtype), though
    the layer turned autocast off and computes with its bfloat16 weights."""
    raw = _BFloat16Head()(np.ones((2, 4), "float32"))
    assert keras.backend.standardize_dtype(raw.dtype) == "bfloat16"  # raw Keras
    r = dx.probe(_BFloat16Head, "float32")
    assert r.output_dtype == "bfloat16"
    assert r.verdict == "as-documented", (r.verdict, r.basis)
    assert r.documented_dtype == "bfloat16"
    assert not any(e.source == "policy" for e in r.expectations)
    assert any("autocast=False" in b and "variables as read" in b for b in r.basis), r.basis
    # the same layer with autocast on is still judged by the policy rule
    assert dx.probe("Dense", "float32", policy="mixed_bfloat16").expected_by == "policy"


# ------------------------------------------------------- 2. each output, its own expectation

AUGMENTED = {
    "images": np.ones((1, 8, 8, 3), "float32"),
    "segmentation_masks": np.ones((1, 8, 8, 1), "uint8"),
}


class _CastsMasks(keras.layers.RandomRotation):
    """A user's augmentation layer that (wrongly) casts its masks to float32."""

    def transform_segmentation_masks(self, segmentation_masks, transformation, training=True):
        masks = super().transform_segmentation_masks(segmentation_masks, transformation, training)
        return keras.ops.cast(masks, "float32")


def _mask_verdict(r):
    [i] = [s.index for s in r.cast_path if s.stage == "output" and s.name == "segmentation_masks"]
    return r.output_dtypes[i], r.output_verdicts[i]


def test_a_kept_mask_is_judged_by_keras_mask_rule_not_the_compute_dtype():
    """Old code: RandomRotation keeping the uint8 mask (as raw Keras does) was ``deviates``
    against the compute dtype float32; a layer casting its mask to float32 was
    ``as-documented``."""
    raw = keras.layers.RandomRotation(0.2, seed=1)(AUGMENTED, training=True)
    assert keras.backend.standardize_dtype(raw["segmentation_masks"].dtype) == "uint8"
    for name in ("RandomRotation", "RandomZoom"):
        r = dx.probe(
            name,
            values=[AUGMENTED],
            kwargs={
                "seed": 1,
                **({"factor": 0.2} if name == "RandomRotation" else {"height_factor": 0.2}),
            },
            call_kwargs={"training": True},
        )
        dtype, verdict = _mask_verdict(r)
        assert dtype == "uint8" and verdict != "deviates", (name, verdict)
        # Keras's own symbolic call declares float32 for the mask: that, not the mask, differs
        assert verdict == "declared-mismatch", (name, verdict, r.basis)
        assert r.output_verdicts[0] == "as-documented"  # the images: the compute dtype
        assert any("transform_segmentation_masks keeps masks" in b for b in r.basis)
    r = dx.probe(_CastsMasks(0.2, seed=1), values=[AUGMENTED], call_kwargs={"training": True})
    assert _mask_verdict(r) == ("float32", "undocumented"), r.basis
    # RandomFlip routes masks through transform_images (Keras's own override): no stated rule
    r = dx.probe(
        "RandomFlip", values=[AUGMENTED], kwargs={"seed": 1}, call_kwargs={"training": True}
    )
    assert _mask_verdict(r)[1] == "undocumented"


# --------------------------------------------- 12. integers rounded by a 16-bit float


def test_integer_values_cast_to_float16_are_a_precision_loss():
    """Old code: no finding: 2909 becomes 2908 in float16 (2049 becomes 2048), inside
    float16's tolerance, so the reference check stays quiet."""
    ids = np.array([[2049, 2909]], "int32")
    r = dx.probe("Dense", values=[ids], kwargs={"units": 2}, policy="mixed_float16")
    [lost] = [f for f in r.value_findings() if f.kind == "precision-loss"]
    assert (lost.expected, lost.value) == (2909.0, 2908.0)
    assert r.numerics.max_abs_integer_input == 2909.0
    assert np.float16(2909) == lost.value  # what raw NumPy/ml_dtypes rounds it to
    # within float16's exact integers, or computed in float32: nothing lost
    small = dx.probe("Dense", values=[ids // 2], kwargs={"units": 2}, policy="mixed_float16")
    assert not [f for f in small.value_findings() if f.kind == "precision-loss"]
    wide = dx.probe("Dense", values=[ids], kwargs={"units": 2})
    assert not wide.value_findings()
    # an Embedding looks its ids up: they never become floats
    emb = dx.probe(
        "Embedding",
        values=[ids],
        kwargs={"input_dim": 4000, "output_dim": 2},
        policy="mixed_float16",
    )
    assert not [f for f in emb.value_findings() if f.kind == "precision-loss"]


def test_integer_labels_in_a_16_bit_loss_are_a_precision_loss():
    """Old code: a loss answered no numerics at all; labels near 1e5 in bfloat16 are rounded
    to multiples of 512."""
    r = dx.probe(
        "losses.MeanSquaredError", ("int32", "float32"), policy="mixed_bfloat16", values="large"
    )
    [lost] = r.value_findings()
    assert lost.kind == "precision-loss" and lost.value != lost.expected
    assert "bfloat16" in lost.message and "256" in lost.message
    small = dx.probe("losses.MeanSquaredError", ("int32", "float32"), policy="mixed_bfloat16")
    assert not small.value_findings()


def test_an_audit_names_integers_rounded_inside_the_model():
    """Old code: check_model found nothing on ids above 2048 fed to a float16 Dense."""
    inputs = keras.Input((2,), dtype="int32")
    model = keras.Model(inputs, keras.layers.Dense(2, dtype="mixed_float16")(inputs))
    report = dx.check_model(model, np.array([[2049, 2909]], "int32"))
    [lost] = [f for f in report.findings if f.kind == "precision-loss"]
    assert lost.details["max_abs"] == 2909.0 and lost.details["to"] == "float16"
    quiet = dx.check_model(model, np.array([[20, 29]], "int32"))
    assert not [f for f in quiet.findings if f.kind == "precision-loss"]


# ------------------------------------------------ a dtype given in kwargs, not the reference's


def test_a_narrow_dtype_in_kwargs_does_not_narrow_the_reference():
    """Old code: ``kwargs={"dtype": "mixed_float16"}`` built the wider reference under that
    narrow policy too, so it rounded as the probe did and the error read 0.0; the reference is
    the same layer under the wider policy, whose outputs differ from float16's."""
    values = np.linspace(-3.0, 3.0, 16, dtype="float32").reshape(2, 8)
    r = dx.probe(
        "Dense",
        "float32",
        kwargs={"units": 4, "dtype": "mixed_float16"},
        values=values,
        backend="numpy",
    )
    assert r.status == "ok", r.error
    assert r.output_dtype == "float16"
    assert r.numerics.reference_dtype in ("float32", "float64"), r.numerics
    assert r.numerics.max_rel_error > 1e-5, r.numerics  # float16's rounding, seen

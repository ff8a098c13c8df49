"""Issue 38, item 1: every dtype-changing step's loss measured at that step, with its cause.

The measurement (``keras_run.cast_loss``) is checked against NumPy/ml_dtypes casts; the rule
(``lossy-cast``) on hand-built records; the issue's id cases on real Keras, beside the same
model run untraced (raw Keras says which rows it read)."""

import ml_dtypes
import numpy as np
import pytest

import dtype_explorer as dx
from dtype_explorer.analyses.audit import _rules as rules
from dtype_explorer.keras_run import cast_loss
from dtype_explorer.records import CastLoss, LayerCall, TensorInfo

keras = pytest.importorskip("keras")


# ----------------------------------------------------------------- the measurement


def test_rounded_integers_are_counted_with_their_first_index():
    ids = np.array([[5, 19999, 2049, 7]])
    after = ids.astype(np.float16)
    loss = cast_loss(ids, after, step="keras-input", where="input 0")
    raw = [(int(b), int(a)) for b, a in zip(ids[0], after[0].astype(np.int64)) if b != a]
    assert loss.cause == "rounding" and loss.rounded == len(raw) == 2
    assert [(int(b), int(a)) for b, a in loss.examples] == raw == [(19999, 20000), (2049, 2048)]
    assert loss.first_index == (0, 1)
    assert "19999 -> 20000" in loss.text() and "2048" in loss.text()


def test_overflow_underflow_and_subnormal_are_told_apart():
    x = np.array([1.0, 7e4, 1e-9, 1e-6, 3.5], np.float32)
    loss = cast_loss(x, x.astype(np.float16), step="autocast", where="input 0")
    assert (loss.overflowed, loss.underflowed, loss.subnormal) == (1, 1, 1)
    assert loss.cause == "overflow" and loss.first_index == (1,)
    assert loss.rounded == 0  # 3.5 is exact; non-integers' rounding is the dtype's tolerance
    assert "65504" in loss.text()
    bf = cast_loss(x, x.astype(ml_dtypes.bfloat16), step="autocast", where="input 0")
    assert bf is None or bf.overflowed == 0  # bfloat16 has float32's range


def test_int64_to_int32_wraps_and_a_clip_saturates():
    big = np.array([1, 2**31 + 5, -(2**31) - 1], np.int64)
    wrapped = cast_loss(big, big.astype(np.int32), step="cast", where="x")
    assert wrapped.cause == "wrap" and wrapped.wrapped == 2
    assert wrapped.examples[0] == (2**31 + 5, float(big.astype(np.int32)[1]))
    clipped = np.clip(big, -(2**31), 2**31 - 1).astype(np.int32)
    assert cast_loss(big, clipped, step="cast", where="x").saturated == 2


def test_nothing_lost_is_no_record():
    ids = np.array([[1, 2048, 255]])
    assert cast_loss(ids, ids.astype(np.float16), step="keras-input", where="input 0") is None
    assert cast_loss(ids, ids.astype(np.float32), step="keras-input", where="input 0") is None


# ----------------------------------------------------------------- the rule


def _call(**kw):
    base = dict(
        path="m/dense",
        layer_class="Dense",
        depth=1,
        policy="float16",
        compute_dtype="float16",
        variable_dtype="float16",
    )
    return LayerCall(**{**base, **kw})


def test_the_finding_is_at_the_step_that_lost_the_values():
    loss = CastLoss(
        step="keras-input", where="input 0", source="int64", target="float16", count=3,
        rounded=2, first_index=(0, 0), examples=((19999, 20000), (2049, 2048)),
    )  # fmt: skip
    root = _call(path="m", layer_class="Functional", depth=0, leaf=False, losses=(loss,))
    emb = _call(path="m/emb", layer_class="Embedding", received=(TensorInfo(dtype="float16"),))
    model = rules.AuditedModel(name="m", policy="float16")
    findings = rules.find([root, emb], model=model, policy="float16")
    [lossy] = [f for f in findings if f.kind == "lossy-cast"]
    assert lossy.path == "m" and lossy.loss == loss and lossy.severity == "error"
    assert lossy.details["readers"] == ["m/emb"] and "not an overflow" in lossy.message
    assert lossy.fix == ""  # the rule runs nothing: a fix is shown once the audit ran it


def test_integers_beside_a_16_bit_float_are_not_said_rounded():
    """Old code: a call given int32 labels and float16 probabilities got "2049 becomes
    2048": the float16 was the probabilities', the labels were never cast."""
    loss_layer = _call(
        layer_class="MyLoss",
        builtin=False,
        received=(
            TensorInfo(dtype="int32", max_abs=2049.0),
            TensorInfo(dtype="float16"),
        ),
        outputs=(TensorInfo(dtype="float16"),),
    )
    model = rules.AuditedModel(name="m", policy="float16")
    assert not [
        f for f in rules.find([loss_layer], model=model, policy="float16")
        if f.kind == "precision-loss"
    ]  # fmt: skip


# ----------------------------------------------------------------- real Keras, the cases


def _id_model(floatx: str, rows: int, dim: int):
    """A float keras.Input (floatx's dtype) into an Embedding, built under ``floatx``."""
    before, policy = keras.config.floatx(), keras.config.dtype_policy()
    keras.config.set_floatx(floatx)
    try:
        inputs = keras.Input((3,))
        outputs = keras.layers.Embedding(rows, dim, name="emb")(inputs)
        return keras.Model(inputs, outputs, name="m")
    finally:  # Keras caches its global policy from floatx while a layer is made: put back too
        keras.config.set_floatx(before)
        keras.config.set_dtype_policy(policy)


def _jax_id_audit():
    """In a jax worker: the float16 id case, raw (does jax's take fill NaN for the id rounded
    out of range?) and audited (the findings' kinds and paths, the output's message)."""
    inputs = keras.Input((3,), dtype="float16")  # what floatx="float16" gives a float Input
    model = keras.Model(inputs, keras.layers.Embedding(20000, 4, dtype="float16")(inputs), name="m")
    ids = np.array([[19999, 2049, 5]])
    raw = keras.ops.convert_to_numpy(model(ids)).astype(np.float64)
    report = dx.check_model(model, ids)
    return {
        "raw_nan_rows": [int(j) for j in np.flatnonzero(np.isnan(raw[0]).any(axis=-1))],
        "findings": sorted((f.kind, f.path) for f in report.findings),
        "output": next(f.message for f in report.findings if f.kind == "float16-output"),
        "lossy": next(f.message for f in report.findings if f.kind == "lossy-cast"),
    }


def test_on_jax_the_nan_of_an_id_rounded_out_of_range_is_no_overflow():
    """jax's take fills NaN for 19999 rounded to 20000 (the other backends raise). Old code
    named an overflow "by computing in float16" at the model around the Embedding: the wrong
    cause. The rounding step is the finding; the output's note says what a lookup's NaN is."""
    got = dx.pool.call("jax", _jax_id_audit).result(timeout=600)
    assert got["raw_nan_rows"] == [0]  # raw Keras on jax: the rounded id's row is NaN
    assert ("lossy-cast", "m") in got["findings"]
    assert not [kind for kind, _ in got["findings"] if kind == "overflow"], got
    assert "an id beyond its table" in got["output"]
    assert "or NaN where an id is beyond its table" in got["lossy"]


def _big_id_audit():
    """Ids above float16's 65504 through a float16 ``keras.Input``: what raw Keras does with
    them (its conversion, its call) and what the audit says, in this process's backend."""
    inputs = keras.Input((3,), dtype="float16")  # what floatx="float16" gives a float Input
    table = keras.layers.Embedding(100000, 4, dtype="float16", name="emb")
    model = keras.Model(inputs, table(inputs), name="m")
    ids = np.array([[70000, 2049, 5]])
    with np.errstate(over="ignore"):
        converted = keras.ops.convert_to_numpy(keras.ops.convert_to_tensor(ids, "float16"))
        try:
            raw = np.isnan(keras.ops.convert_to_numpy(model(ids)).astype(np.float64)).any()
            raw = "nan" if raw else "finite"
        except Exception as error:  # tensorflow, torch, numpy: the id is out of range
            raw = type(error).__name__
        report = dx.check_model(model, ids)
    lossy = next(f for f in report.findings if f.kind == "lossy-cast")
    return {
        "converted": [float(v) for v in converted[0]],
        "raw": raw,
        "findings": sorted((f.kind, f.path) for f in report.findings),
        "lossy": lossy.message,
        "counts": (lossy.loss.overflowed, lossy.loss.rounded),
        "proven": lossy.proof is not None and lossy.proof.proven,
        "output": " ".join(f.message for f in report.findings if f.kind == "float16-output"),
    }


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_ids_made_inf_by_a_float16_input_are_one_lossy_cast_with_every_cause(backend):
    """``Embedding(100000, 4)`` fed ``[[70000, 2049, 5]]`` through a float16 Input (a
    vocabulary over 65504: Gemma's, LLaMA's): old code said only "1 of 3 overflowed" (not the
    rounded 2049), named no reader, and added an ``overflow`` at the model for the same cast
    ("a later op hid it: the output looks finite" on tensorflow, whose Embedding raised; "by
    computing in float16" on jax, with a fix tried that could not clear it)."""
    got = _big_id_audit() if backend == "tensorflow" else (
        dx.pool.call("jax", _big_id_audit).result(timeout=600)
    )  # fmt: skip
    assert got["converted"] == [float("inf"), 2048.0, 5.0]  # raw Keras's conversion
    assert got["raw"] == ("nan" if backend == "jax" else "InvalidArgumentError"), got["raw"]
    assert ("lossy-cast", "m") in got["findings"]
    assert not [kind for kind, _ in got["findings"] if kind == "overflow"], got
    assert got["counts"] == (1, 1)
    assert "70000 -> inf" in got["lossy"] and "also 1 of 3 integers rounded" in got["lossy"]
    said = "silently reads other rows" if backend == "jax" else "raised on an id out of its range"
    assert "Embedding 'm/emb'" in got["lossy"] and said in got["lossy"], got["lossy"]
    assert got["proven"]  # keras.Input(dtype="int32"), run on a copy
    if backend == "jax":  # the output holds jax's NaN fill: said to come from the inf ids
        assert "It was given inf/NaN ids, which have no row" in got["output"], got["output"]


def _wrapped_id_audit():
    """Hashed int64 ids through an ``int32`` Input, in this process's backend: raw Keras's
    conversion and the row it reads, and what the audit says and tried."""
    inputs = keras.Input((2,), dtype="int32")
    model = keras.Model(inputs, keras.layers.Embedding(1000, 4, name="emb")(inputs), name="m")
    ids = np.array([[2**32 + 5, 7]], dtype="int64")
    converted = keras.ops.convert_to_numpy(keras.ops.convert_to_tensor(ids, "int32"))
    table = keras.ops.convert_to_numpy(model.get_layer("emb").embeddings)
    row_5 = bool(np.array_equal(keras.ops.convert_to_numpy(model(ids))[0, 0], table[5]))
    report = dx.check_model(model, ids)
    lossy = next(f for f in report.findings if f.kind == "lossy-cast")
    proof = lossy.proof
    return {
        "converted": converted[0].tolist(),
        "raw_read_row_5": row_5,
        "lossy": lossy.message,
        "fix": lossy.fix,
        "proof": (proof.input_dtype, proof.proven, proof.after.raised, proof.after.ids_changed),
        "summary": proof.summary(),
    }


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_int64_ids_wrapped_by_an_int32_input_are_no_fix_of_int32_again(backend):
    """Old code named no reader for wrapped ids, and "tried" ``keras.Input(dtype='int32')``,
    the dtype the Input had already. The fix tried now keeps the ids as they came (int64): on
    tensorflow the Embedding then raises (the id is beyond its 1000 rows), on jax (no int64
    without x64) the ids still wrap: no fix is shown on either, and why is said."""
    got = _wrapped_id_audit() if backend == "tensorflow" else (
        dx.pool.call("jax", _wrapped_id_audit).result(timeout=600)
    )  # fmt: skip
    assert got["converted"] == [5, 7] and got["raw_read_row_5"]  # raw Keras: row 5, silently
    assert "4294967301 -> 5" in got["lossy"]
    assert "The ids are wrapped around here, before Embedding 'm/emb'" in got["lossy"]
    assert "silently reads other rows" in got["lossy"]
    dtype, proven, raised, changed = got["proof"]
    assert dtype == "int64" and not proven and got["fix"] == ""
    if backend == "tensorflow":
        assert raised == "InvalidArgumentError" and changed == 0
    else:
        assert changed == 1 and not raised
    assert "the finding went, but the copy did not run right either" in got["summary"]


def test_on_jax_a_probe_says_the_lookups_nan_is_an_index_beyond_the_axis():
    """The probe of that Embedding on jax, fed the ids already rounded (20000 of 20000 rows):
    its trace flagged ``ops.take`` "first inf/NaN from finite inputs" only."""
    ids = np.array([[19999, 2049, 5]]).astype("float16")  # 20000, 2048, 5
    r = dx.probe("Embedding", values=[ids], kwargs={"input_dim": 20000, "output_dim": 2},
                 policy="float16", backend="jax", use_cache=False)  # fmt: skip
    assert r.status == "ok", r.error
    assert r.numerics.nonfinite_from_finite > 0  # raw Keras gives it: the audit test above
    take = r.first_nonfinite_step()
    assert take.op == "ops.take"
    assert "a lookup computes nothing, so an index beyond the axis" in take.flag_text()


@pytest.mark.parametrize(
    "floatx, rows, dim, ids",
    [
        ("float16", 20000, 4, [[19999, 2049, 5]]),
        ("bfloat16", 4000, 4, [[2909, 3, 5]]),
        ("float32", 16777221, 1, [[16777217, 16777219, 5]]),
    ],
)
def test_ids_through_a_float_input_are_rounded_at_the_input_step(floatx, rows, dim, ids):
    """Old code: float16 blamed an overflow and said nothing of 2049; float32 and bfloat16
    gave no finding at all."""
    model = _id_model(floatx, rows, dim)
    ids = np.array(ids)
    # raw Keras, untraced: Functional converts with ops.convert_to_tensor(x, dtype=Input's)
    converted = keras.ops.convert_to_numpy(keras.ops.convert_to_tensor(ids, dtype=floatx))
    rounded = [(int(b), int(a)) for b, a in zip(ids[0], converted[0].astype(np.float64)) if b != a]
    assert rounded  # the case is real
    report = dx.check_model(model, ids)
    [lossy] = [f for f in report.findings if f.kind == "lossy-cast"]
    assert lossy.path == "m" and lossy.loss.step == "keras-input"
    assert lossy.loss.cause == "rounding" and lossy.loss.target == floatx
    assert [(int(b), int(a)) for b, a in lossy.loss.examples] == rounded
    assert lossy.details["readers"] == ["m/emb"]
    assert not [f for f in report.findings if f.kind == "overflow"]
    assert report.layers[0].losses == (lossy.loss,)
    if all(a < rows for _, a in rounded):  # raw Keras read the rounded rows, silently
        table = keras.ops.convert_to_numpy(model.get_layer("emb").embeddings)
        out = keras.ops.convert_to_numpy(model(ids))
        for i, (_, a) in enumerate(rounded):
            j = int(np.flatnonzero(ids[0] == rounded[i][0])[0])
            np.testing.assert_array_equal(out[0, j], table[a])
        assert "silently reads other rows" in lossy.message
    # the fix, run on a copy by the audit: the Input in int32, the finding gone
    proof = lossy.proof
    assert proof.proven and proof.how == "input-dtype" and proof.input_dtype == "int32"
    assert proof.before.ids_changed == len(rounded) and proof.after.ids_changed == 0
    assert not proof.after.finding and not proof.after.raised
    assert lossy.fix == proof.change and 'keras.Input(shape=(3,), dtype="int32")' in lossy.fix
    # the fix run again by the test with raw Keras: every id reads its own row
    fixed_in = keras.Input((3,), dtype=proof.input_dtype)
    fixed = keras.Model(fixed_in, model.get_layer("emb")(fixed_in))
    table = keras.ops.convert_to_numpy(model.get_layer("emb").embeddings)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(fixed(ids))[0], table[ids[0]])


def test_int32_labels_beside_float16_probabilities_are_no_precision_loss():
    """Old code: SparseCategoricalCrossentropy with int32 labels and float16 probabilities got
    "2049 becomes 2048", twice, for a loss value that is right."""
    labels = np.array([2049, 5], "int32")
    probs = np.full((2, 3000), 0.5 / 2999, "float16")
    probs[0, 2049] = probs[1, 5] = 0.5
    r = dx.probe("losses.SparseCategoricalCrossentropy", values=[labels, probs], backend=None)
    assert not [f for f in r.value_findings() if f.kind == "precision-loss"]
    # raw Keras: the labels were used as they are (row 2049, not 2048): -log(0.5)
    raw = keras.losses.SparseCategoricalCrossentropy()(labels, probs)
    assert float(keras.ops.convert_to_numpy(raw)) == pytest.approx(-np.log(0.5), rel=1e-2)


def test_a_fix_not_run_is_never_shown():
    """Old code: an overflow kept the rule's "this layer in float32" where no copy ran (a
    subclassed model, another mode); now its proof says why and no fix is shown."""
    from dtype_explorer.analyses.audit import _fixes
    from dtype_explorer.records import AuditReport, Finding

    old = Finding(kind="overflow", severity="error", path="m/d", message="m", fix="advice")
    other = Finding(kind="float16-output", severity="warning", path="m/d", message="m", fix="f")
    shown, kept = _fixes.not_tried([old, other], "it ran in mode 'fit'")
    assert shown.fix == "" and shown.proof.not_tried == "it ran in mode 'fit'"
    assert kept == other  # other kinds are not this phase's
    report = AuditReport(model="m", model_class="Functional", backend="numpy", policy="float32",
                         findings=(shown,))  # fmt: skip
    assert AuditReport.from_json(report.to_json()) == report
    assert "not tried, because it ran in mode 'fit'" in str(report) and "advice" not in str(report)

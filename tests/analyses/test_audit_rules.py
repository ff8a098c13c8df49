"""The audit's rules on hand-built records: each rule finds its hazard, and stays quiet on the
case next to it. No Keras here: the rules are pure functions of records (the forward pass,
the reference re-runs and the re-probes that make those records are tested in test_audit*.py;
that the rule modules import no framework, in test_audit_rules_import.py). The fast tier.
"""

from __future__ import annotations

from dtype_explorer.analyses.audit import _fix_choice as choice
from dtype_explorer.analyses.audit import _fixes as fixes
from dtype_explorer.analyses.audit import _rules as rules
from dtype_explorer.analyses.audit import _rules_across as across
from dtype_explorer.analyses.audit import _rules_output as output_rules
from dtype_explorer.analyses.audit._rules import AuditedModel
from dtype_explorer.records import (
    CastLoss,
    ErrorInfo,
    Finding,
    FitReport,
    GradientInfo,
    LayerCall,
    LayerDamage,
    LayerDifference,
    PredictReport,
    ProbeResult,
    ProbeSpec,
    SourceLine,
    TensorInfo,
    TraceStep,
    TraceTensor,
    ValueFinding,
    VariableDtypes,
)

MODEL = AuditedModel(name="m", policy="float32", backend="torch")


def t(dtype: str, finite: bool | None = None) -> TensorInfo:
    return TensorInfo(dtype=dtype, shape=(2, 3), finite=finite)


def call(**fields) -> LayerCall:
    """A Dense call under float32, float32 in and out, with ``fields`` changed."""
    base = {
        "path": "m/dense",
        "layer_class": "Dense",
        "depth": 1,
        "policy": "float32",
        "compute_dtype": "float32",
        "variable_dtype": "float32",
        "received": (t("float32"),),
        "outputs": (t("float32"),),
    }
    return LayerCall(**{**base, **fields})


def found(calls, model: AuditedModel = MODEL, policy: str = "float32") -> dict[str, object]:
    return {f.kind: f for f in rules.find(calls, model=model, policy=policy)}


# --------------------------------------------------------------------------- purity


def test_half_is_the_16_bit_floats_of_dtypes():
    assert sorted(rules.HALF) == ["bfloat16", "float16"]


# --------------------------------------------------------------------------- per-call rules


def test_call_error_unless_the_retry_worked():
    error = ErrorInfo(type="ValueError", message="bad dtype")
    stopped = found([call(error=error)])["call-error"]
    assert stopped.severity == "error" and "ValueError: bad dtype." in stopped.message
    assert "call-error" not in found([call(error=error, retried="re-run: it works")])
    assert "call-error" not in found([call()])


def test_silent_downcast_of_float64_data():
    finding = found([call(given=(t("float64"),))])["silent-downcast"]
    assert (finding.severity, finding.details) == ("warning", {"from": "float64", "to": "float32"})
    assert finding.fix == ""  # the audit runs the model in float64 on a copy first (_fixes)


def test_a_float64_layer_that_received_and_returned_float32_is_one_downcast_per_model():
    f32, f64 = (t("float32"),), (t("float64"),)
    narrowed = dict(policy="float64", compute_dtype="float64", variable_dtype="float64",
                    given=f32, received=f32, outputs=f32)  # fmt: skip
    calls = [call(path="m/a", **narrowed), call(path="m/b", **narrowed)]
    jax = AuditedModel(name="m", policy="float64", backend="jax")
    finding = found(calls, jax, "float64")["silent-downcast"]
    assert (finding.path, finding.severity) == ("m/a", "warning")
    assert finding.details == {"from": "float64", "to": "float32", "kept": False}
    assert "returned float32 (1 more layer alike): jax did not keep float64" in finding.message
    elsewhere = found(calls[:1], MODEL, "float64")["silent-downcast"].message
    assert "float64 was not kept on its way in" in elsewhere and "jax" not in elsewhere
    # float64 kept, or a layer computing in float32 by its own policy: nothing
    kept = dict(narrowed, received=f64, outputs=f64)
    assert "silent-downcast" not in found([call(path="m/a", **kept)], jax, "float64")
    assert "silent-downcast" not in found([call(path="m/a", given=f32, received=f32, outputs=f32)])


def test_float64_data_narrowed_is_given_its_cost_at_the_last_layer_against_float64():
    finding = found([call(given=(t("float64"),))])["silent-downcast"]

    def damage(path: str, rel: float, reference: str = "float64") -> LayerDamage:
        return LayerDamage(path=path, layer_class="Dense", dtype="float32",
                           reference=reference, rel_rms=rel, max_abs_error=rel)  # fmt: skip

    rows = [damage("m/first", 0.5), damage("m/last", 1e-8)]
    measured = output_rules.measured([finding], rows)[0]
    assert measured.message.startswith(finding.message) and measured.message.endswith(
        " Against the same model in float64, at its last layer's output (m/last): relative RMS "
        "error 1e-08 (within float32's tolerance 1.90735e-06), exact, max |err| 1e-08."
    )
    assert measured.severity == "warning" and measured.details["within_tolerance"] is True
    beyond = output_rules.measured([finding], [damage("m/last", 1.0)])[0]
    assert "relative RMS error 1 (beyond float32's tolerance" in beyond.message
    # a float32 reference (a 16-bit model's) says nothing of float64 data's narrowing
    assert output_rules.measured([finding], [damage("m/last", 1.0, "float32")]) == [finding]


def test_a_cast_the_models_own_mixed_policy_asked_for_is_not_a_downcast():
    mixed = call(
        policy="mixed_float16",
        compute_dtype="float16",
        given=(t("float32"),),
        received=(t("float16"),),
        outputs=(t("float16"),),
    )
    assert "silent-downcast" not in found([mixed], policy="mixed_float16")
    other = found([mixed], policy="float32")["silent-downcast"]  # a layer unlike the model
    assert other.severity == "info"


def test_int_into_a_float_layer():
    returned = found([call(received=(t("uint8"),))])["int-into-float-layer"]
    assert returned.severity == "warning" and returned.details == {
        "input": "uint8",
        "raised": False,
    }
    raised = call(
        received=(t("uint8"),),
        error=ErrorInfo(type="TypeError", message="no"),
        retried="re-run with integer inputs cast to float32: it works",
    )
    assert found([raised])["int-into-float-layer"].severity == "error"


def test_integers_into_an_embedding_are_indices_not_data():
    embedding = call(layer_class="Embedding", received=(t("int32"),))
    assert "int-into-float-layer" not in found([embedding])


def test_float32_only_layer_that_raised_on_16_bit_input():
    raised = call(
        policy="mixed_float16",
        compute_dtype="float16",
        received=(t("float16"),),
        error=ErrorInfo(type="TypeError", message="float32 only"),
        retried="re-run with 16-bit float inputs cast to float32: it works",
    )
    assert found([raised], policy="mixed_float16")["float32-only-layer"].severity == "error"


def test_float32_only_layer_that_silently_stays_in_float32():
    stays = call(
        policy="mixed_float16",
        compute_dtype="float16",
        received=(t("float16"),),
        outputs=(t("float32"),),
    )
    assert found([stays], policy="mixed_float16")["float32-only-layer"].severity == "warning"
    keeps = call(
        policy="mixed_float16",
        compute_dtype="float16",
        received=(t("float16"),),
        outputs=(t("float16"),),
    )
    assert "float32-only-layer" not in found([keeps], policy="mixed_float16")


def test_rules_show_no_fix_they_have_not_run():
    """Issue 38 item 3: old code gave each of these rules advice text the tool never ran
    (a LossScaleOptimizer, dtype="float32", Rescaling, float64 end to end, a rewritten
    build()/call()). The rules now give none: the audit runs the change on a copy and shows
    it once it cleared the finding (tested in test_audit_fixes_run.py); a custom layer's
    change is in its own code, which the audit cannot run, and its proof says so."""
    half = {"policy": "mixed_float16", "compute_dtype": "float16"}
    calls = [
        call(given=(t("float64"),)),
        call(path="m/conv", received=(t("uint8"),)),
        call(path="m/only", received=(t("float16"),), outputs=(t("float32"),), **half),
        call(path="m/ids", received=(ti("int32", 2909.0),), outputs=(t("float16"),), **half),
        call(path="m/mine", layer_class="Mine", builtin=False, received=(t("float16"),),
             outputs=(t("float16"),), variables={"w": VariableDtypes(stored="float64")}, **half),
    ]  # fmt: skip
    compiled = AuditedModel(name="m", policy="float32", optimizer="Adam")
    shown = {f.kind: f for f in rules.find(calls, model=compiled, policy="float32")}
    assert set(shown) >= {
        "silent-downcast",
        "int-into-float-layer",
        "float32-only-layer",
        "precision-loss",
        "custom-variable-dtype",
        "no-loss-scaling",
    }
    assert all(f.fix == "" for f in shown.values()), {k: f.fix for k, f in shown.items()}
    custom = shown["custom-variable-dtype"]
    assert "own code" in custom.proof.not_tried and not custom.proof.proven
    assert "no fix shown: not tried" in custom.proof.summary()
    # where no copy is run (another mode, Keras 2), each says why
    said = fixes.not_tried(list(shown.values()), "it ran in mode 'predict'")
    for f in said:
        if f.kind in fixes.PROVEN_KINDS:
            assert f.fix == "" and f.proof.not_tried == "it ran in mode 'predict'", f.kind


def test_custom_layer_storing_and_reading_against_its_policy():
    custom = call(
        layer_class="MyDense",
        builtin=False,
        policy="mixed_float16",
        compute_dtype="float16",
        received=(t("float16"),),
        outputs=(t("float16"),),
        variables={"w": VariableDtypes(stored="float16", read="float32", autocast=False)},
    )
    finding = found([custom], policy="mixed_float16")["custom-variable-dtype"]
    assert len(finding.details["problems"]) == 2
    assert "add_weight(autocast=False)" in finding.message
    fine = custom.model_copy(
        update={"variables": {"w": VariableDtypes(stored="float32", read="float16")}}
    )
    assert "custom-variable-dtype" not in found([fine], policy="mixed_float16")
    builtin = custom.model_copy(update={"builtin": True})  # Keras's own layers are not judged
    assert "custom-variable-dtype" not in found([builtin], policy="mixed_float16")


def test_float16_model_output_and_softmax():
    half = {
        "policy": "mixed_float16",
        "compute_dtype": "float16",
        "received": (t("float16"),),
        "outputs": (t("float16", True),),
    }
    final = found([call(final_output=True, **half)], policy="mixed_float16")["float16-output"]
    assert final.details == {"output": "float16", "final": True, "finite": True}
    # measured, not advised: finite values are a note, and no fix is proposed unproven
    assert final.severity == "info" and final.fix == "" and "float32" not in final.message
    softmax = found([call(softmax=True, **half)], policy="mixed_float16")["float16-output"]
    assert "this softmax" in softmax.message and "Keep the last layer" not in softmax.message
    assert "float16-output" not in found([call(**half)], policy="mixed_float16")
    unread = call(final_output=True, **{**half, "outputs": (t("float16"),)})  # compiled
    assert (
        "its values were not read"
        in found([unread], policy="mixed_float16")["float16-output"].message
    )
    inf = call(final_output=True, **{**half, "outputs": (t("float16", False),)})
    bad = found([inf], policy="mixed_float16")["float16-output"]
    assert bad.severity == "warning" and "inf/NaN" in bad.message


def _step(i, op, din, dout, **kw):
    return TraceStep(
        index=i, op=op, inputs=(TraceTensor(dtype=din, shape=(2, 3)),),
        outputs=(TraceTensor(dtype=dout, shape=(2, 3)),),
        source=SourceLine(file="softmax.py", line=i + 80, text=f"line {i}"), **kw,
    )  # fmt: skip


def test_float16_output_names_the_op_that_made_it_from_the_measurement():
    """Old code: a GPT-2 attention softmax's "first at" was ``backend.numpy.where`` (a mask
    step whose bool input counted as a dtype change), under a fixed warning."""
    where = _step(0, "backend.numpy.where", "float16", "float16", change="promoted")
    exp = _step(1, "ops.exp", "float16", "float16", nonfinite=True, first_nonfinite=True)
    last = _step(2, "ops.divide", "float16", "float16")
    fields = {"policy": "mixed_float16", "compute_dtype": "float16", "softmax": True,
              "received": (t("float16", True),), "given": (t("float16", True),)}  # fmt: skip
    finite = call(outputs=(t("float16", True),), trace=(where, exp, last), **fields)
    note = found([finite], policy="mixed_float16")["float16-output"]
    assert note.step.op == "ops.divide" and "It arrived in float16; made by ops.divide" in (
        note.message
    )
    inf = call(outputs=(t("float16", False),), trace=(where, exp, last), **fields)
    warning = found([inf], policy="mixed_float16")["float16-output"]
    assert warning.step.op == "ops.exp" and "First at ops.exp (softmax.py:81" in warning.message
    cast = _step(0, "backend.cast", "float32", "float16", change="cast", conversions=("downcast",))
    narrowed = call(outputs=(t("float16", True),), trace=(cast, where, last), **fields)
    note = found([narrowed], policy="mixed_float16")["float16-output"]
    assert note.step.op == "backend.cast"
    assert "its values are finite. Narrowed to float16 at backend.cast (softmax.py:80" in (
        note.message
    )  # not "First at", which names where inf/NaN first appeared


def test_float16_output_severity_comes_from_the_error_against_float32():
    half = {"policy": "mixed_float16", "compute_dtype": "float16", "final_output": True,
            "received": (t("float16"),), "outputs": (t("float16", True),)}  # fmt: skip
    finding = found([call(**half)], policy="mixed_float16")["float16-output"]

    def damage(rel: float) -> LayerDamage:
        return LayerDamage(path="m/dense", layer_class="Dense", dtype="float16",
                           reference="float32", rel_rms=rel, max_abs_error=rel)  # fmt: skip

    within = output_rules.measured([finding], [damage(1e-3)])[0]
    assert within.severity == "info" and within.details["within_tolerance"] is True
    assert "relative RMS error 0.001 (within float16's tolerance 0.015625)" in within.message
    beyond = output_rules.measured([finding], [damage(0.2)])[0]
    assert beyond.severity == "warning" and "beyond float16's tolerance" in beyond.message
    elsewhere = damage(0.2).model_copy(update={"path": "m/other"})
    assert output_rules.measured([finding], [elsewhere]) == [finding]
    # every value inf: the error over no value is 0, and it was said "beyond the tolerance"
    all_inf = damage(0.0).model_copy(update={"nonfinite": 6, "compared": 0})
    shown = output_rules.measured([finding], [all_inf])[0]
    assert shown.severity == "warning" and "6 of its values are inf/NaN" in shown.message
    assert "no error is measured" in shown.message and "relative RMS" not in shown.message
    assert "no value finite in both" in all_inf.text() and "rel RMS" not in all_inf.text()


def test_a_layer_casting_its_own_output_up_is_a_note_not_a_warning():
    """A ``ReversibleEmbedding(reverse_dtype="float32")``'s logits: float32 on purpose."""
    fields = {"policy": "mixed_float16", "compute_dtype": "float16", "leaf": True,
              "layer_class": "ReversibleEmbedding", "received": (t("float16"),),
              "outputs": (t("float32"),)}  # fmt: skip
    cast = _step(0, "ops.cast", "float16", "float32", change="cast", cast_to="float32")
    kept = found([call(trace=(cast,), **fields)], policy="mixed_float16")["float32-only-layer"]
    assert kept.severity == "info" and kept.fix == "" and "on purpose" in kept.message
    silent = found([call(**fields)], policy="mixed_float16")["float32-only-layer"]
    assert silent.severity == "warning"


def test_a_variable_read_that_overflowed_is_the_overflows_cause():
    """The matmul is handed the inf the kernel's read made: the finding names the read."""
    read = CastLoss(step="variable-read", where="variable kernel", source="float32",
                    target="float16", count=6, overflowed=1, first_index=(0, 0),
                    examples=((1e5, float("inf")),))  # fmt: skip
    matmul = _step(0, "ops.matmul", "float16", "float16", losses=(read,))
    hot = call(policy="mixed_float16", compute_dtype="float16", given=(t("float32", True),),
               received=(t("float16", True),), outputs=(t("float16", False),),
               losses=(read,), trace=(matmul,))  # fmt: skip
    found_ = found([hot], policy="mixed_float16")
    overflow = found_["overflow"]
    assert "reading the float32 variable kernel in float16 overflowed 1 weight" in (
        overflow.message
    )
    assert overflow.loss == read and overflow.step.op == "ops.matmul"
    assert overflow.details["cause"] == "variable-read"
    assert "lossy-cast" not in found_  # counted once, in the overflow finding
    # a finite output (a later op hid the inf) still names the read
    hidden = hot.model_copy(update={"outputs": (t("float16", True),)})
    assert "later op hid it" in found([hidden], policy="mixed_float16")["overflow"].message
    # a lookup's table read is no overflow finding (lookups are left out): a lossy cast
    table = hot.model_copy(update={"layer_class": "Embedding"})
    lossy = found([table], policy="mixed_float16")["lossy-cast"]
    assert lossy.loss == read and lossy.severity == "error" and lossy.fix == ""
    # tiny weights read as zero only: the call's events say it, no finding
    tiny = read.model_copy(update={"overflowed": 0, "underflowed": 2})
    quiet = hot.model_copy(update={"losses": (tiny,), "outputs": (t("float16", True),),
                                   "trace": ()})  # fmt: skip
    assert not {"overflow", "lossy-cast"} & set(found([quiet], policy="mixed_float16"))
    assert "lost reading variable kernel: float32 -> float16" in quiet.row()["events"]


def test_overflow_inside_and_not_from_inf_input():
    hot = {"policy": "mixed_float16", "compute_dtype": "float16"}
    made = call(
        given=(t("float32", True),),
        received=(t("float16", True),),
        outputs=(t("float16", False),),
        **hot,
    )
    finding = found([made], policy="mixed_float16")["overflow"]
    assert "computing in float16" in finding.message and "65504" in finding.message
    on_entry = made.model_copy(update={"received": (t("float16", False),)})
    assert "on entry" in found([on_entry], policy="mixed_float16")["overflow"].message
    given_inf = made.model_copy(update={"given": (t("float32", False),)})
    assert "overflow" not in found([given_inf], policy="mixed_float16")
    in_float32 = call(given=(t("float32", True),), outputs=(t("float32", False),))
    assert "overflow" not in found([in_float32])


def test_overflow_is_credited_to_the_innermost_layer():
    hot = {
        "compute_dtype": "float16",
        "given": (t("float16", True),),
        "received": (t("float16", True),),
        "outputs": (t("float16", False),),
    }
    outer = call(path="m/block", layer_class="Block", leaf=False, **hot)
    inner = call(path="m/block/dense", **hot)
    overflows = [
        f for f in rules.find([outer, inner], model=MODEL, policy="float32") if f.kind == "overflow"
    ]
    assert [f.path for f in overflows] == ["m/block/dense"]


def test_nan_out_of_a_lookup_is_no_overflow_of_the_model_around_it():
    """jax's ``take`` fills NaN for an id rounded out of range (19999 -> 20000 in float16):
    the Embedding was never flagged, but the model around it was, as an overflow "by
    computing in float16" (the wrong cause, issue 38); the rounding step says what happened
    (``lossy-cast``)."""
    hot = {
        "compute_dtype": "float16",
        "policy": "float16",
        "given": (t("int64", True),),
        "received": (t("float16", True),),
        "outputs": (t("float16", False),),
    }
    model = call(path="m", layer_class="Functional", leaf=False, depth=0, **hot)
    lookup = call(path="m/embedding", layer_class="Embedding", **hot)
    assert "overflow" not in found([model, lookup], policy="float16")
    out = found([model, lookup.model_copy(update={"final_output": True})], policy="float16")
    assert "an id beyond its table" in out["float16-output"].message
    # a layer that computes beside the lookup and overflows is still named, and only it
    dense = call(path="m/dense", **hot)
    overflows = [f for f in rules.find([model, lookup, dense], model=MODEL, policy="float16")
                 if f.kind == "overflow"]  # fmt: skip
    assert [f.path for f in overflows] == ["m/dense"]


def test_ids_made_inf_by_the_input_conversion_are_its_lossy_cast_not_an_overflow():
    """Ids above 65504 through a float16 ``keras.Input`` (``Embedding(100000, 4)`` fed
    ``[[70000, 2049, 5]]``): the conversion makes 70000 inf and 2049 2048. The audit said
    only the overflow (not the rounded id), named no reader, and added an ``overflow`` at the
    model "by computing in float16" (jax) or "a later op hid it: the output looks finite"
    (tensorflow, whose Embedding raised): the same cast, named twice, the second time wrongly
    (issue 38)."""
    loss = CastLoss(step="keras-input", where="input 0", source="int64", target="float16",
                    count=3, overflowed=1, rounded=1, first_index=(0, 0),
                    examples=((70000.0, float("inf")),))  # fmt: skip
    convert = _step(0, "ops.convert_to_tensor", "int64", "float16", change="cast",
                    conversions=("int->float",), nonfinite=True, first_nonfinite=True,
                    losses=(loss.model_copy(update={"step": "cast", "where": "x"}),))  # fmt: skip
    hot = {"compute_dtype": "float16", "policy": "float16"}
    for raised in (False, True):  # jax fills NaN; the other backends raise
        ended = {"error": ErrorInfo(type="IndexError", message="index out of range")}
        model = call(path="m", layer_class="Functional", leaf=False, depth=0,
                     given=(t("int64", True),), received=(t("int64", True),), entry=("float16",),
                     losses=(loss,), trace=(convert,),
                     outputs=() if raised else (t("float16", False),), **hot)  # fmt: skip
        lookup = call(path="m/embedding", layer_class="Embedding", given=(t("float16", False),),
                      received=(t("float16", False),),
                      outputs=() if raised else (t("float16", False),),
                      **(ended if raised else {}), **hot)  # fmt: skip
        kinds = found([model, lookup], policy="float16")
        assert "overflow" not in kinds, kinds["overflow"].message
        lossy = kinds["lossy-cast"]
        assert lossy.path == "m" and lossy.severity == "error"
        assert "70000 -> inf" in lossy.message and "also 1 of 3 integers rounded" in lossy.message
        assert (
            "made inf above 65504" in lossy.message and "Embedding 'm/embedding'" in lossy.message
        )
        said = "raised on an id out of its range" if raised else "silently reads other rows"
        assert said in lossy.message, lossy.message
        if not raised:  # jax's output, a lookup given the inf ids: no "first at ops.take" alone
            last = lookup.model_copy(update={"final_output": True})
            output = found([model, last], policy="float16")["float16-output"]
            assert "It was given inf/NaN ids, which have no row" in output.message


def test_int64_ids_wrapped_by_an_int32_input_name_the_embedding_that_reads_them():
    """Hashed int64 ids through an ``int32`` Input wrap (4294967301 -> 5) and the Embedding
    silently reads row 5: old code gave the lossy-cast but named no reader (only rounding
    did)."""
    loss = CastLoss(step="keras-input", where="input 0", source="int64", target="int32",
                    count=2, wrapped=1, first_index=(0, 0),
                    examples=((4294967301.0, 5.0),))  # fmt: skip
    model = call(path="m", layer_class="Functional", leaf=False, depth=0,
                 given=(t("int64", True),), received=(t("int64", True),), entry=("int32",),
                 losses=(loss,))  # fmt: skip
    lookup = call(path="m/emb", layer_class="Embedding", received=(t("int32", True),))
    lossy = found([model, lookup])["lossy-cast"]
    assert lossy.severity == "error" and lossy.details["readers"] == ["m/emb"]
    assert "The ids are wrapped around here, before Embedding 'm/emb'" in lossy.message
    assert "silently reads other rows" in lossy.message


def test_an_overflow_in_a_call_that_raised_is_not_said_to_be_hidden():
    """A call that raised has no output: its overflow is not one "a later op hid"."""
    hot = {"policy": "mixed_float16", "compute_dtype": "float16",
           "given": (t("float32", True),), "received": (t("float16", True),)}  # fmt: skip
    exp = _step(
        0,
        "ops.exp",
        "float16",
        "float16",
        nonfinite=True,
        first_nonfinite=True,
        float16_overflow=True,
    )
    raised = call(outputs=(), trace=(exp,), error=ErrorInfo(type="ValueError", message="x"), **hot)
    message = found([raised], policy="mixed_float16")["overflow"].message
    assert "hid it" not in message and "computing in float16" in message


def test_no_loss_scaling_for_a_float16_model_compiled_without_it():
    half = call(compute_dtype="float16", policy="mixed_float16")
    compiled = AuditedModel(name="m", policy="float32", optimizer="Adam")
    finding = found([half], model=compiled)["no-loss-scaling"]
    assert finding.path == "m" and finding.details == {"optimizer": "Adam"}
    assert finding.fix == ""  # shown once a training step with loss scaling recovered gradients
    scaled = AuditedModel(
        name="m", policy="mixed_float16", optimizer="LossScaleOptimizer", loss_scaled=True
    )
    assert "no-loss-scaling" not in found([half], model=scaled)
    assert "no-loss-scaling" not in found([half])  # not compiled
    assert "no-loss-scaling" not in found([call()], model=compiled)  # no float16 compute


def test_rules_disagree_where_result_type_answers_otherwise():
    wide = call(
        policy="float64",
        compute_dtype="float64",
        variable_dtype="float64",
        received=(t("float64"),),
        outputs=(t("float64"),),
    )
    assert rules.result_type_questions([wide, call(layer_class="Embedding")]) == [
        ("float64", "float64")
    ]
    said = AuditedModel(
        name="m",
        policy="float64",
        backend="torch",
        result_types={("float64", "float64"): "float32"},
    )
    finding = found([wide], model=said, policy="float64")["rules-disagree"]
    assert finding.severity == "info" and finding.details["result_type"] == "float32"
    assert "on torch" in finding.message
    agrees = AuditedModel(
        name="m", policy="float64", result_types={("float64", "float64"): "float64"}
    )
    assert "rules-disagree" not in found([wide], model=agrees, policy="float64")


def test_findings_are_one_per_kind_and_layer_and_ordered_by_severity():
    error = call(path="m/a", error=ErrorInfo(type="ValueError", message="x"))
    downcast = call(path="m/b", given=(t("float64"),))
    kinds = [
        (f.kind, f.path)
        for f in rules.ordered(
            rules.find([downcast, downcast, error], model=MODEL, policy="float32")
        )
    ]
    assert kinds == [("call-error", "m/a"), ("silent-downcast", "m/b")]


# --------------------------------------------------------------------------- wrong numbers


def test_wrong_numbers_from_a_reference_check():
    wrapped = call(received=(t("uint8"),), outputs=(t("uint8"),), compute_dtype="float32")
    value = ValueFinding(
        kind="wraparound",
        output=0,
        element=(1, 2),
        value=44.0,
        expected=300.0,
        reference_dtype="float64",
        message="44 where 300",
    )
    (finding,) = rules.wrong_numbers([(wrapped, value), (call(path="m/ok"), None)])
    assert (finding.kind, finding.path) == ("wraparound", "m/dense")
    assert "at output 0 [1, 2], 44 where 300." in finding.message
    assert finding.details["reference_dtype"] == "float64"
    # no fix from the rule: the audit runs the cast on a copy of the layer (_fixes_values)
    assert finding.fix == "" and finding.proof is None
    assert rules.wrong_numbers([(call(), None)]) == []


def test_which_calls_compute_on_values():
    assert rules.computes_on_values(call())
    assert not rules.computes_on_values(call(layer_class="Hashing"))
    assert rules.computes_on_values(call(layer_class="MyLayer", builtin=False))


# --------------------------------------------------------------------------- across modes


def test_mode_divergences_in_dtypes():
    report = PredictReport(
        compiled=True,
        execution="model.predict, compiled by jax.jit",
        differences=(
            LayerDifference(
                path="m",
                layer_class="Functional",
                where="received",
                eager=("float64",),
                predict=("float32",),
            ),
            LayerDifference(
                path="m/dense",
                layer_class="Dense",
                where="output",
                eager=("float32",),
                predict=("float16",),
            ),
        ),
    )
    model, layer = across.mode_divergences(report)
    assert (model.path, model.severity) == ("m", "warning")  # a layer inside differs too
    assert "1 layer call(s) inside" in model.message
    assert (layer.path, layer.severity) == ("m/dense", "warning")
    # the cast goes in the user's code, which the audit cannot run compiled: no fix shown
    assert layer.fix == "" and "cannot change" in layer.proof.not_tried
    alone = report.model_copy(update={"differences": report.differences[:1]})
    (only,) = across.mode_divergences(alone)
    assert only.severity == "info"


def test_mode_divergence_when_predict_raised_and_new_inf():
    report = PredictReport(
        compiled=True,
        execution="model.predict, compiled by jax.jit",
        error=ErrorInfo(type="ValueError", message="wrapped"),
        cause=ErrorInfo(type="TypeError", message="no float() of a tracer"),
        failed_at="m/odd",
        nonfinite=(3,),
        eager_nonfinite=(0,),
    )
    raised, inf = across.mode_divergences(report)
    assert raised.path == "m/odd" and "raised TypeError" in raised.message
    assert "re-raised it as ValueError" in raised.message
    assert raised.fix == "" and "m/odd's own code" in raised.proof.not_tried  # nothing run
    assert inf.path == "output 0" and inf.details == {"nonfinite": 3, "eager_nonfinite": 0}


def test_no_mode_divergence_when_predict_agrees():
    same = PredictReport(compiled=True, execution="x", nonfinite=(0,), eager_nonfinite=(0,))
    assert list(across.mode_divergences(same)) == []


def test_step_failed_names_the_step():
    finding = across.step_failed("m", "TypeError: no", "compiled by jax.jit", "mse", "(2,)")
    assert (finding.kind, finding.path) == ("mode-divergence", "m")
    assert "compiled by jax.jit, loss mse, labels (2,)" in finding.message
    assert finding.fix == "" and finding.proof.not_tried  # no advice that was not run


def test_gradient_findings_with_and_without_loss_scaling():
    bad = (
        GradientInfo(name="m/dense/kernel", dtype="float16", variable_dtype="float32", nonfinite=4),
    )
    unscaled = FitReport(loss="mse", optimizer="SGD", gradients=bad)
    (error,) = across.gradient_findings(unscaled, "m")
    assert error.severity == "error" and error.details == {"variables": ["m/dense/kernel"]}
    assert error.fix == "" and "LossScaleOptimizer" in error.proof.not_tried  # not run
    scaled = unscaled.model_copy(
        update={"loss_scaling": True, "loss_scale": 32768.0, "loss_scale_after": 16384.0}
    )
    (note,) = across.gradient_findings(scaled, "m")
    assert note.severity == "info" and "16384" in note.message
    clean = FitReport(
        loss="mse", optimizer="SGD", gradients=(bad[0].model_copy(update={"nonfinite": 0}),)
    )
    assert list(across.gradient_findings(clean, "m")) == []


# --------------------------------------------------------------------------- across backends


def result(backend: str, status: str = "ok", dtype: str | None = "float32") -> ProbeResult:
    spec = ProbeSpec(target="Dense", input_dtypes=("uint8",), backend=backend)
    error = ErrorInfo(type="TypeError", message="no uint8") if status == "error" else None
    return ProbeResult(
        spec=spec,
        status=status,
        backend=backend,
        output_dtype=dtype,
        error=error,
        verdict="error" if error else "as-documented",
    )


def test_backend_divergence_when_backends_part_ways():
    ints = call(received=(t("uint8"),))
    outcomes = {"jax": result("jax"), "tensorflow": result("tensorflow", "error", None)}
    (finding,) = across.backend_divergence(ints, outcomes)
    assert finding.kind == "backend-divergence" and finding.severity == "error"
    assert finding.details == {"jax": "returns float32", "tensorflow": "raises TypeError"}
    other = {"jax": result("jax"), "torch": result("torch", dtype="float64")}
    assert next(across.backend_divergence(ints, other)).severity == "warning"


def test_no_backend_divergence_when_backends_agree():
    agree = {"jax": result("jax"), "torch": result("torch")}
    assert list(across.backend_divergence(call(received=(t("uint8"),)), agree)) == []


def test_reprobe_target_is_a_catalogued_layer_with_odd_input():
    assert rules.reprobe_target(call(received=(t("uint8"),))) == "Dense"
    assert rules.reprobe_target(call(given=(t("float64"),))) == "Dense"
    assert rules.reprobe_target(call()) is None  # float32 in: backends agree
    assert rules.reprobe_target(call(received=(t("uint8"),), leaf=False)) is None
    assert (
        rules.reprobe_target(call(layer_class="MyLayer", builtin=False, received=(t("uint8"),)))
        is None
    )


# ----------------------------------------------------------------- precision-loss (issue 23)


def ti(dtype: str, max_abs: float | None) -> TensorInfo:
    return TensorInfo(dtype=dtype, shape=(2, 3), max_abs=max_abs)


def test_integers_above_a_16_bit_floats_exact_range_are_a_precision_loss():
    """Old code: no finding (2909 rounds to 2908 in float16, inside float16's tolerance)."""
    half = call(
        policy="mixed_float16",
        compute_dtype="float16",
        received=(ti("int32", 2909.0),),
        outputs=(t("float16"),),
    )
    lost = found([half], policy="mixed_float16")["precision-loss"]
    assert lost.details == {"input": "int32", "max_abs": 2909.0, "to": "float16", "rounded": 2908.0}
    assert "2048" in lost.message and "2909" in lost.message
    # bfloat16 holds integers exactly only up to 256
    bf = half.model_copy(update={"compute_dtype": "bfloat16", "received": (ti("int32", 257.0),)})
    assert found([bf])["precision-loss"].details["rounded"] == 256.0


def test_no_precision_loss_within_range_in_float32_or_in_a_lookup():
    within = call(compute_dtype="float16", received=(ti("int32", 2048.0),))
    wide = call(compute_dtype="float32", received=(ti("int32", 1e6),))
    lookup = call(
        layer_class="Embedding",
        compute_dtype="float16",
        received=(ti("int32", 2909.0),),
        outputs=(t("float16"),),
    )
    unread = call(compute_dtype="float16", received=(ti("int32", None),))
    for c in (within, wide, lookup, unread):
        assert "precision-loss" not in found([c]), c


def test_the_float32_set_is_chosen_from_the_measured_ranges():
    """Issue 38 item 3: old code grew the set one re-run at a time from the layer that
    overflowed. Each 16-bit layer whose float32 output or input is beyond float16's range
    is chosen at once, with why; a layer within range, or already in float32, is not."""
    half = {"policy": "mixed_float16", "compute_dtype": "float16"}
    calls = [
        call(path="m/big", **half),
        call(path="m/norm", layer_class="LayerNormalization", **half),
        call(path="m/small", **half),
        call(path="m/wide"),  # float32 already
    ]

    def measured(path: str, out: float, given: float) -> LayerDamage:
        return LayerDamage(path=path, layer_class="Dense", dtype="float16",
                           reference="float32", rel_rms=0.0, max_abs_error=0.0,
                           reference_amax=out, reference_input_amax=given)  # fmt: skip

    damage = [
        measured("m/big", 1e5, 1e3),
        measured("m/norm", 1.5, 1e5),
        measured("m/small", 10.0, 1.0),
        measured("m/wide", 1e6, 1e5),
    ]
    inside = Finding(kind="overflow", severity="error", path="m/block/attn", message="",
                           details={"cause": "compute"})  # fmt: skip
    chosen = choice.float32_candidates(damage, calls, [inside])
    assert list(chosen) == ["m/block/attn", "m/big", "m/norm"]
    assert "an op inside" in chosen["m/block/attn"]
    assert "output reaches 1e+05" in chosen["m/big"] and "65504" in chosen["m/big"]
    assert "receives values up to 1e+05" in chosen["m/norm"]

"""The quantization and round-trip rules on hand-built records: each finds its hazard and stays
quiet on the case next to it. No Keras here (the records come from test_audit_quantize.py's
real runs)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from dtype_explorer.analyses.audit import _rules_quant as rules
from dtype_explorer.analyses.audit._rules import ordered
from dtype_explorer.records import (
    ErrorInfo,
    LayerCall,
    QuantizationReport,
    QuantizedLayer,
    RoundTrip,
    RoundTripReport,
    StoredVariable,
    TraceStep,
    TraceTensor,
)

ROOT = Path(__file__).resolve().parents[2]


def row(**fields) -> QuantizedLayer:
    base = {
        "path": "m/d",
        "layer_class": "Dense",
        "status": "quantized",
        "policy": "int8_from_float32",
        "compute_dtype": "float32",
        "has_weights": True,
        "output_dtypes": ("float32",),
    }
    return QuantizedLayer(**{**base, **fields})


def report(*rows, **fields) -> QuantizationReport:
    return QuantizationReport(mode="int8", asked="int8", layers=rows, **fields)


def kinds(rep, calls=()) -> list[str]:
    return [f.kind for f in rules.quantization_findings(rep, list(calls))]


def tt(dtype, kind="tensor", shape=(2, 3)) -> TraceTensor:
    return TraceTensor(name="x", dtype=dtype, shape=shape, kind=kind)


def step(i, op, ins, outs) -> TraceStep:
    return TraceStep(index=i, op=op, inputs=tuple(ins), outputs=tuple(outs))


def test_the_rules_import_no_keras():
    tree = ast.parse((ROOT / "dtype_explorer/analyses/audit/_rules_quant.py").read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not [m for m in names if m.split(".")[0] == "keras"]


def test_not_quantized_only_for_a_skipped_layer_with_weights():
    conv = row(path="m/conv", layer_class="Conv2D", status="skipped", why="no quantize")
    flatten = row(path="m/flat", layer_class="Flatten", status="skipped", has_weights=False)
    assert kinds(report(conv, flatten, row())) == ["not-quantized"]
    (finding,) = rules.quantization_findings(report(conv), [])
    assert finding.path == "m/conv" and "no quantize" in finding.message
    assert finding.fix == "" and "another layer" in finding.proof.not_tried  # advice not run


def test_quantized_output_dtype_when_a_quantized_layer_returns_another_dtype():
    emb = row(
        path="m/emb",
        layer_class="Embedding",
        policy="int8_from_mixed_bfloat16",
        compute_dtype="bfloat16",
        output_dtypes=("float32",),
    )
    (finding,) = rules.quantization_findings(report(emb), [])
    assert finding.kind == "quantized-output-dtype"
    # a cast after the layer goes in the user's code: not run, so not shown (issue 38 item 3)
    assert finding.fix == "" and "cast after m/emb" in finding.proof.not_tried
    assert kinds(report(emb.model_copy(update={"output_dtypes": ("bfloat16",)}))) == []


def test_quantization_error_beyond_the_threshold_names_the_worst_layer():
    rows = (row(path="m/a", error=0.01), row(path="m/b", error=0.2))
    (finding,) = rules.quantization_findings(report(*rows, output_error=0.1, threshold=0.05), [])
    assert finding.kind == "quantization-error" and finding.path == "m/b"
    # no fix from the rule: the audit quantizes a copy again, worst layers float (_fixes_quant)
    assert finding.fix == "" and finding.proof is None
    assert kinds(report(*rows, output_error=0.04, threshold=0.05)) == []


def test_refusal_under_float16_says_to_quantize_under_bfloat16():
    refused = ErrorInfo(type="ValueError", message="doesn't work well with float16")
    at = row(status="refused", compute_dtype="float16", policy="mixed_float16")
    later = row(path="m/e", status="skipped", why="not reached: quantize() raised first")
    found = rules.quantization_findings(report(at, later, refused=refused), [])
    assert [f.kind for f in found] == ["quantize-refused"]
    assert found[0].fix == "" and "ValueError" in found[0].message  # the copy proves it
    assert rules.refused_under_float16(report(at, later, refused=refused))


def test_a_calibrated_mode_refused_for_want_of_blocks_says_which_structure_to_give():
    said = "For mode='gptq', a valid quantization structure must be provided either via ..."
    refused = ErrorInfo(type="ValueError", message=said)
    (found,) = rules.quantization_findings(
        report(refused=refused).model_copy(update={"mode": "gptq", "asked": "gptq"}), []
    )
    # the blocks are the model's own structure: no placeholder code, the reason instead
    assert found.fix == "" and "quantization_layer_structure" in found.proof.not_tried
    other = ErrorInfo(type="ValueError", message="GPTQ quantization requires a tokenizer")
    (found,) = rules.quantization_findings(
        report(refused=other).model_copy(update={"mode": "gptq", "asked": "gptq"}), []
    )
    assert found.fix == "" and found.proof is None  # Keras's own words say what is missing


def test_a_quantized_policy_on_a_container_layer():
    container = LayerCall(
        path="m",
        layer_class="Functional",
        depth=0,
        leaf=False,
        policy="int8_from_float32",
        compute_dtype="float32",
        variable_dtype="float32",
    )
    leaf = container.model_copy(update={"path": "m/d", "leaf": True, "layer_class": "Dense"})
    assert kinds(report(), [container, leaf]) == ["quantized-container"]
    (found,) = rules.quantization_findings(report(), [container, leaf])
    assert found.fix == "" and "user's own code" in found.proof.not_tried
    assert kinds(report(), [container.model_copy(update={"policy": "float32"}), leaf]) == []


def test_compute_path_of_an_int8_dense_and_a_weight_only_one():
    int8 = [
        step(0, "ops.cast", [tt("float32")], [tt("int8")]),
        step(1, "ops.matmul", [tt("int8"), tt("int8", "variable")], [tt("int32")]),
        step(2, "ops.cast", [tt("int32")], [tt("float32")]),
        step(3, "ops.divide", [tt("float32"), tt("float32")], [tt("float32")]),
        step(4, "ops.add", [tt("float32"), tt("float32", "variable", (3,))], [tt("float32")]),
    ]
    call = LayerCall(
        path="m/d",
        layer_class="Dense",
        depth=1,
        policy="int8_from_float32",
        compute_dtype="float32",
        variable_dtype="float32",
        trace=tuple(int8),
    )
    assert rules.compute_path(call, ["int8"]) == (
        "quantize inputs: float32 → int8",
        "integer matmul: int8 x int8 → int32 (accumulated in int32)",
        "descale: int32 → float32, cast/divide by the scale",
        "bias: add in float32",
    )
    weight_only = [
        step(0, "ops.cast", [tt("int8", "variable")], [tt("float32")]),
        step(1, "ops.matmul", [tt("float32"), tt("float32")], [tt("float32")]),
    ]
    path = rules.compute_path(call.model_copy(update={"trace": tuple(weight_only)}), ["int8"])
    assert path[0] == "kernel stored int8, dequantized to float32 on every call"


def test_relative_error_reads_bfloat16_and_refuses_other_shapes():
    import ml_dtypes

    a = np.array([1.0, 2.0], dtype=ml_dtypes.bfloat16)
    b = np.array([1.0, 2.5], dtype=ml_dtypes.bfloat16)
    assert rules.relative_error([a], [b]) == 0.25
    assert rules.relative_error([a], [np.ones(3)]) is None


def test_roundtrip_findings_for_each_difference():
    trips = RoundTripReport(
        trips=(
            RoundTrip(format=".keras", output_dtypes=("f4",), loaded_output_dtypes=("f4",)),
            RoundTrip(
                format=".h5",
                dtype_changes=("m/d: policy int8_from_float32 → float32",),
                output_dtypes=("float32",),
                loaded_output_dtypes=("float32",),
                max_abs_difference=0.5,
            ),
            RoundTrip(
                format="SavedModel",
                outcome="raised",
                stage="load",
                error=ErrorInfo(type="ValueError", message="bad"),
            ),
            RoundTrip(format="x", outcome="not-applicable", why="no h5py"),
        )
    )
    found = rules.roundtrip_findings(trips, "m")
    assert [(f.kind, f.path) for f in found] == [
        ("roundtrip-dtype", "m/d"),
        ("roundtrip-values", "m"),
        ("roundtrip-error", "m"),
    ]
    assert "ValueError: bad" in found[-1].message


def test_stored_bytes_and_rows():
    rep = report(
        row(
            variables=(StoredVariable(name="kernel", dtype="int8", shape=(4, 2), bytes=8),),
            float_bytes=32,
        )
    )
    assert (rep.bytes, rep.float_bytes) == (8, 32)
    assert "24 saved" in rep.text()


def test_roundtrip_changes_alike_are_one_finding_and_each_format_its_own():
    changes = (
        *tuple(f"m/d{i}: policy (bfloat16) → (float32)" for i in range(5)),
        "m/d0: variables 2 bfloat16 → 2 float32",
        "m/e: variables bfloat16 → float32",
    )
    trips = RoundTripReport(
        trips=(
            RoundTrip(
                format=".keras", output_dtypes=("bfloat16",), loaded_output_dtypes=("bfloat16",)
            ),
            RoundTrip(format="preset", dtype_changes=changes),
            RoundTrip(
                format="preset, dtype=x",
                outcome="raised",
                stage="load",
                error=ErrorInfo(type="ValueError", message="bad"),
            ),
        )
    )
    found = rules.roundtrip_findings(trips, "m")
    dtype = [f for f in found if f.kind == "roundtrip-dtype"]
    assert [f.details["layers"] for f in dtype] == [[f"m/d{i}" for i in range(5)], ["m/d0", "m/e"]]
    assert "5 layers (m/d0, m/d1, m/d2 and 2 more)" in dtype[0].message
    # from_preset with dtype= raised here: the measured fix did not work, so none is shown
    assert all(f.fix == "" and not f.proof.proven for f in dtype)
    error = next(f for f in found if f.kind == "roundtrip-error")
    assert "model.keras" in error.fix and error.proof.proven  # .keras came back unchanged
    assert error.proof.format == ".keras"
    clean = RoundTrip(
        format="preset, dtype=x", output_dtypes=("bfloat16",), loaded_output_dtypes=("bfloat16",)
    )
    fixed = RoundTripReport(trips=(trips.trips[1], clean))
    (shown, _) = rules.roundtrip_findings(fixed, "m")
    assert shown.proof.proven and 'from_preset(preset_dir, dtype="x")' in shown.fix
    kept = ordered([*found, error.model_copy(update={"details": {"format": "preset"}})])
    assert len([f for f in kept if f.kind == "roundtrip-error"]) == 2

"""Records: facts derived once, JSON in and out (computed facts included and recomputed), and
their views reached through the display dispatch."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pydantic import computed_field

from dtype_explorer.records import (
    CastStep,
    ErrorInfo,
    ProbeResult,
    ProbeSet,
    ProbeSpec,
    Survey,
    display,
)
from dtype_explorer.records._base import ComputedRecord, Record


def _result(status="ok", output="float32", error=None, backend="numpy") -> ProbeResult:
    steps = (
        CastStep(stage="input", dtype="uint8", index=0),
        CastStep(stage="converted", dtype="uint8", index=0),
        CastStep(stage="autocast", dtype="uint8", index=0),
        CastStep(stage="variables", dtype="float16", name="kernel", changed=True),
        CastStep(stage="output", dtype="float16", index=0),
    )
    return ProbeResult(
        spec=ProbeSpec(target="Dense", input_dtypes=("uint8",), backend=backend),
        status=status,
        backend=backend,
        output_dtype=output if status == "ok" else None,
        verdict="as-documented" if status == "ok" else "error",
        cast_path=steps if status == "ok" else steps[:3],
        error=error,
    )


@pytest.mark.parametrize(
    ("result", "outcome"),
    [
        (_result(), "float32"),
        (
            _result("error", error=ErrorInfo(type="ValueError", message="bad\nmore")),
            "raises ValueError",
        ),
        (_result("invalid", error=ErrorInfo(type="TypeError", message="x")), "raises TypeError"),
        (_result("timeout", error=ErrorInfo(type="TimeoutError", message="x")), "timeout"),
        (_result("crashed", error=ErrorInfo(type="WorkerCrashed", message="x")), "crashed"),
    ],
)
def test_the_outcome_is_computed_on_the_record(result, outcome):
    assert result.outcome == outcome


def test_computed_facts_travel_in_the_json_and_are_recomputed_on_reading():
    result = _result()
    data = result.to_dict()
    assert data["outcome"] == "float32"
    assert ProbeResult.from_dict(data) == result
    assert ProbeResult.from_json(result.to_json()) == result
    forged = {**data, "outcome": "int8"}  # a forged fact is not taken over
    assert ProbeResult.from_dict(forged).outcome == "float32"
    nested = ProbeSet(results=(result, _result(backend="jax")))
    assert ProbeSet.from_json(nested.to_json()) == nested
    assert json.loads(nested.to_json())["results"][0]["outcome"] == "float32"


def test_notable_steps_leave_out_unchanged_steps_and_variables_unless_asked():
    result = _result()
    assert [s.stage for s in result.notable_steps()] == ["input", "output"]
    assert [s.stage for s in result.notable_steps(variables=True)] == [
        "input",
        "variables",
        "output",
    ]
    assert result.path_text() == "uint8 -> float16 (kernel) -> float16 (output)"


def test_error_text_is_the_first_line():
    result = _result("error", error=ErrorInfo(type="ValueError", message="bad dtype\nmore"))
    assert result.error_text() == "ValueError: bad dtype"
    assert _result().error_text() == ""


def test_records_reach_their_views_through_the_dispatch():
    result = _result()
    assert str(result).startswith("Dense on numpy (cpu), policy float32: ok")
    assert "dx-card" in result._repr_html_()
    spec = result.spec  # no view registered: pydantic's own text, no HTML
    assert str(spec) == spec.__repr_str__(" ")
    assert spec._repr_html_() is None
    with pytest.raises(TypeError, match="no figure view"):
        display.figure(spec)


def test_a_survey_knows_its_cells_without_a_backend():
    results = (_result(), _result(backend="jax"))
    survey = Survey(
        targets=("Dense",),
        input_dtypes=("uint8",),
        policies=("float32",),
        backends=("numpy", "jax"),
        compute_dtypes={"float32": "float32"},
        results=results,
    )
    cell = survey.cell("Dense", "uint8")
    assert cell.classification == "casts-to-compute"
    assert Survey.from_json(survey.to_json()).cell("Dense", "uint8").classification == (
        "casts-to-compute"
    )


def _traced(backend, *ops):
    from dtype_explorer.records import SourceLine, TraceStep, TraceTensor

    steps = []
    for i, (op, ins, out) in enumerate(ops):
        steps.append(
            TraceStep(
                index=i,
                op=op,
                inputs=tuple(TraceTensor(dtype=d, shape=(2,)) for d in ins),
                outputs=() if out.startswith("!") else (TraceTensor(dtype=out, shape=(2,)),),
                error=out[1:] if out.startswith("!") else None,
                change="promoted" if set(ins) != {out} and not out.startswith("!") else "kept",
                source=SourceLine(file="/x/keras/src/layers/a.py", line=i + 1, text="y = f(x)"),
                first_nonfinite=op == "ops.exp",
                nonfinite=op == "ops.exp",
            )
        )
    return ProbeResult(
        spec=ProbeSpec(target="Conv1D"), status="ok", backend=backend, trace=tuple(steps)
    )


def test_trace_facts_and_json_round_trip():
    r = _traced(
        "jax",
        ("backend.convert_to_tensor", ("uint8",), "uint8"),
        ("ops.nn.conv", ("uint8", "float32"), "float32"),
        ("ops.exp", ("float32",), "float32"),
    )
    assert r.first_dtype_change().op == "ops.nn.conv"
    assert r.first_nonfinite_step().op == "ops.exp"
    back = ProbeResult.from_json(r.to_json())
    assert back == r and back.trace[1].source.short == "keras/src/layers/a.py:2"
    assert ProbeResult.from_dict(r.to_dict()) == r


def test_nan_out_of_a_lookup_is_flagged_as_an_index_beyond_the_axis():
    """jax's ``take`` fills NaN for an index beyond the axis (an Embedding fed an id rounded
    out of range): the flag said only "first inf/NaN from finite inputs" of a step that
    computes nothing that could overflow."""
    from dtype_explorer.records import TraceStep

    take = TraceStep(index=4, op="ops.take", nonfinite=True, first_nonfinite=True)
    assert take.flags[0].kind == "first-nonfinite"
    assert take.flag_text() == (
        "first inf/NaN from finite inputs: a lookup computes nothing, so an index beyond the "
        "axis (filled with NaN)"
    )
    later = TraceStep(index=5, op="ops.take_along_axis", nonfinite=True)
    assert "an index beyond the axis" in later.flag_text()
    exp = TraceStep(index=3, op="ops.exp", nonfinite=True, first_nonfinite=True)
    assert exp.flag_text() == "first inf/NaN from finite inputs"


def test_first_divergence_names_the_first_step_where_traces_part():
    jax = _traced(
        "jax",
        ("backend.convert_to_tensor", ("uint8",), "uint8"),
        ("ops.nn.conv", ("uint8", "float32"), "float32"),
        ("ops.add", ("float32", "float32"), "float32"),
    )
    torch = _traced(
        "torch",
        ("backend.convert_to_tensor", ("uint8",), "uint8"),
        ("ops.nn.conv", ("uint8", "float32"), "!RuntimeError: Byte"),
    )
    part = ProbeSet(results=(jax, torch)).first_divergence()
    assert part.op == "ops.nn.conv"
    assert part.steps == {"jax": 1, "torch": 1}
    assert part.outcomes == {"jax": "float32", "torch": "raises RuntimeError"}
    assert (
        ProbeSet(results=(jax, jax.model_copy(update={"backend": "tensorflow"}))).first_divergence()
        is None
    )
    # an op one backend ran and the other did not parts them too
    extra = _traced(
        "numpy",
        ("backend.convert_to_tensor", ("uint8",), "uint8"),
        ("ops.cast", ("uint8",), "float32"),
        ("ops.nn.conv", ("float32", "float32"), "float32"),
    )
    part = ProbeSet(results=(jax, extra)).first_divergence()
    assert part.op in ("ops.cast", "ops.nn.conv") and part.steps["jax"] in (1, None)


def test_a_probe_set_of_one_backend_has_no_across_backends_line():
    one = ProbeSet(results=(_result(),))
    assert "across backends" not in one.summary()
    two = ProbeSet(results=(_result(), _result(backend="jax")))
    assert two.summary().endswith("across backends: as-documented")


def test_warnings_travel_with_the_result_and_are_shown():
    said = "UserWarning: Do not pass an `input_shape`/`input_dim` argument to a layer."
    result = _result().model_copy(update={"warnings": (said,)})
    assert ProbeResult.from_json(result.to_json()).warnings == (said,)
    assert f"  warning: {said}" in str(result)


def test_a_record_builds_its_validator_at_first_use_not_at_import():
    """``defer_build``: importing the records builds no model; the first validation builds the
    one it needs (and what it nests), and a bad input is refused as clearly as ever."""
    code = (
        "from dtype_explorer.records import AuditReport, ProbeResult, ProbeSpec\n"
        "assert not ProbeSpec.__pydantic_complete__ and not AuditReport.__pydantic_complete__\n"
        "spec = ProbeSpec(target='Dense', input_dtypes=('float32',), policy='float32',"
        " backend='numpy', shapes=((2, 3),))\n"
        "assert ProbeSpec.__pydantic_complete__ and not AuditReport.__pydantic_complete__\n"
        "assert ProbeSpec.from_json(spec.to_json()) == spec\n"
        "try:\n"
        "    ProbeSpec.model_validate({'target': 'Dense', 'polcy': 'float32'})\n"
        "except ValueError as error:\n"
        "    assert 'polcy' in str(error) and 'Extra inputs are not permitted' in str(error)\n"
        "else:\n"
        "    raise AssertionError('an unknown field was accepted')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_only_a_computed_record_carries_computed_facts():
    """The validator that drops computed facts read back is a ComputedRecord's alone (a
    Python call per record otherwise, thousands per traced answer); a plain Record that
    declares one is refused when its class is made, before any of its JSON fails to read."""
    with pytest.raises(TypeError, match="Loose declares computed fields \\(twice\\)"):

        class Loose(Record):
            a: int = 1

            @computed_field  # type: ignore[prop-decorator]
            @property
            def twice(self) -> int:
                return 2 * self.a

    class Kept(ComputedRecord):
        a: int = 1

        @computed_field  # type: ignore[prop-decorator]
        @property
        def twice(self) -> int:
            return 2 * self.a

    kept = Kept(a=3)
    assert json.loads(kept.to_json())["twice"] == 6
    assert Kept.from_json(kept.to_json()) == kept
    assert Kept.from_dict({"a": 3, "twice": 7}).twice == 6  # recomputed, not taken over
    assert "_drop_computed" not in ProbeSpec.__pydantic_decorators__.model_validators
    assert "_drop_computed" in ProbeResult.__pydantic_decorators__.model_validators

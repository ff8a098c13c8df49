"""A worker's answer (``runtime._worker.answer_of``, read by ``read_answer``) with hand-built
records: the record read back is the record sent, its computed facts recomputed at every depth,
whatever its values hold (an overflow's inf, a NaN, a lone surrogate in a message). The same
with real probes on real workers: ``tests/runtime/test_pool.py``."""

from __future__ import annotations

import json
import math

import pytest

from dtype_explorer.records import (
    CastLoss,
    ErrorInfo,
    ProbeResult,
    ProbeSpec,
    TraceStep,
    TraceTensor,
)
from dtype_explorer.records._base import ComputedRecord
from dtype_explorer.runtime import _worker

F16 = (TraceTensor(dtype="float16", shape=(2, 2)),)
#: The question and who answered, as a worker's answer holds them (a hand-built record: no
#: worker runs here).
ASKED = {
    "spec": {"target": "Dense", "input_dtypes": ["float32"], "backend": "numpy"},
    "backend": "numpy",
}


def _traced(*, example: float = 6e4) -> ProbeResult:
    """A traced answer: a cast that lost values (``example`` its value after the cast), and a
    step whose child left float16's range while the step's own output stayed finite."""
    loss = CastLoss(
        step="autocast",
        where="input 0",
        source="float32",
        target="float16",
        count=4,
        rounded=1,
        first_index=(0, 1),
        examples=((60001.0, example),),
    )
    child = TraceStep(index=2, op="backend.numpy.add", float16_overflow=True, outputs=F16)
    return ProbeResult(
        **ASKED,
        status="ok",
        output_dtype="float16",
        verdict="as-documented",
        trace=(
            TraceStep(
                index=0,
                op="ops.cast",
                change="cast",
                conversions=("downcast",),
                losses=(loss,),
                outputs=F16,
            ),
            TraceStep(
                index=1, op="ops.add", change="kept", inputs=F16, outputs=F16, children=(child,)
            ),
        ),
    )


def _everything(record: ProbeResult) -> str:
    """Every field and every computed fact at every depth, as text (a NaN equals itself)."""
    return json.dumps(record.model_dump(mode="json"), sort_keys=True)


def test_an_answer_travels_as_json_without_its_computed_facts():
    result = _traced()
    answer = _worker.answer_of(result)
    assert set(answer) == {_worker.ANSWER}
    sent = json.loads(answer[_worker.ANSWER])
    assert "headline" not in sent and "outcome" not in sent
    assert all("flags" not in step for step in sent["trace"])
    back = _worker.read_answer(answer)
    assert back == result and _everything(back) == _everything(result)
    assert [[f.kind for f in s.flags] for s in back.trace] == [["lost-values"], ["hidden-overflow"]]
    assert back.trace[1].children[0].flags[0].kind == "float16-overflow"


@pytest.mark.parametrize(
    "result",
    [
        pytest.param(_traced(example=math.inf), id="an overflow's inf"),
        pytest.param(_traced(example=-math.inf), id="-inf"),
        pytest.param(_traced(example=math.nan), id="NaN"),
        pytest.param(
            ProbeResult(
                **ASKED,
                status="error",
                error=ErrorInfo(type="FileNotFoundError", message="no file b'\udcff.npy'"),
            ),
            id="a lone surrogate",
        ),
    ],
)
def test_what_json_cannot_hold_travels_as_the_records_fields(result):
    """pydantic writes inf/NaN as ``null`` (a float field then fails to read back) and refuses
    a lone surrogate: such an answer travels as its fields, and arrives as it was sent."""
    answer = _worker.answer_of(result)
    assert set(answer) == {_worker.ANSWER_FIELDS}
    back = _worker.read_answer(answer)
    assert _everything(back) == _everything(result)
    if result.error:
        assert back.error.message == result.error.message
    else:
        sent, got = result.trace[0].losses[0].examples[0][1], back.trace[0].losses[0].examples[0][1]
        assert repr(got) == repr(sent)  # inf, -inf, nan: not None


def test_computed_facts_read_back_are_recomputed_at_every_depth():
    """A record's JSON with stale computed facts (a step's flags, a nested child's, the
    headline): read back, each is recomputed from the fields, not taken from the text."""
    result = _traced()
    stale = json.loads(result.to_json())
    assert stale["headline"] and stale["trace"][1]["flags"]
    stale["headline"] = "stale"
    stale["trace"][1]["flags"] = []
    stale["trace"][1]["children"][0]["flags"] = [{"kind": "nonfinite", "text": "stale"}]
    for back in (ProbeResult.from_json(json.dumps(stale)), ProbeResult.from_dict(stale)):
        assert back == result and _everything(back) == _everything(result)


def test_only_records_with_computed_facts_carry_the_validator_that_drops_them():
    for record in (ProbeResult, TraceStep):
        assert issubclass(record, ComputedRecord)
        assert "_drop_computed" in record.__pydantic_decorators__.model_validators
    for record in (ProbeSpec, TraceTensor, CastLoss, ErrorInfo):
        assert not record.__pydantic_computed_fields__
        assert "_drop_computed" not in record.__pydantic_decorators__.model_validators

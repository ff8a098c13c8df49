"""The explorer's page turned hostile, driven through a recording comm as the widget manager
drives it, with real workers: the page may write only what the contract gives it, junk in a
request is refused into ``error``, nothing from the page is evaluated, and a burst of quick
changes runs only the newest request per backend. The kernel always goes on answering."""

from __future__ import annotations

import json
import time
from typing import Any

import comm
import keras
import pytest
from keras.src.saving import serialization_lib
from page_comm import PageComm, request

from dtype_explorer import pool
from dtype_explorer.frontends import _contract
from dtype_explorer.frontends import widget as widget_module
from dtype_explorer.frontends.widget import PENDING, DtypeExplorer
from dtype_explorer.records import ProbeSpec
from dtype_explorer.shapes import SHAPE_SYNTAX

WAIT = 240


@pytest.fixture(scope="module", autouse=True)
def page_comms():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(comm, "create_comm", PageComm)
        yield


@pytest.fixture(scope="module", autouse=True)
def _stop_workers():
    yield
    pool.shutdown(zygotes=False)


@pytest.fixture(scope="module")
def answered(page_comms) -> DtypeExplorer:
    widget = DtypeExplorer(backends=["jax"])
    widget.wait(WAIT)
    return widget


def good(widget: DtypeExplorer) -> dict[str, Any]:
    """A valid request, whatever the page sent before."""
    nonce = widget.request.get("nonce", 0) if isinstance(widget.request, dict) else 0
    return {
        "target": "Dense",
        "kwargs": "",
        "shape": "",
        "input_dtypes": ["float32"],
        "preset": "default",
        "policy": "float32",
        "backends": ["jax"],
        "nonce": (nonce if isinstance(nonce, int) else 0) + 1,
    }


#: Junk the page may write into each kind of trait.
JUNK = {
    "object": [{"jax": {"status": "pending"}}, {"jax": "junk"}, {}, "junk", 5],
    "array": [["not-a-backend"], [], "junk", 5],
    "string": ["junk", "", 5],
    "integer": [123456, -1, "junk"],
}
KERNEL_CASES = [
    (name, value)
    for name in sorted(_contract.KERNEL_WRITES)
    for value in JUNK[_contract.TRAITS[name]["type"]]
]


@pytest.mark.parametrize(("name", "junk"), KERNEL_CASES)
def test_page_writes_to_kernel_traits_are_undone(answered, name, junk):
    before = json.loads(json.dumps(getattr(answered, name)))
    answered.comm.page_sends(**{name: junk})
    assert json.loads(json.dumps(getattr(answered, name))) == before  # the kernel kept its own
    assert answered.comm.last_sent(name) == before  # and put the page's copy back
    answered.wait(WAIT)  # never left pending
    assert PENDING not in answered.results.values()


def test_junk_results_from_the_page_never_leave_the_explorer_pending(answered):
    answered.comm.page_sends(request=request(answered, input_dtypes=["float16"]))
    answered.comm.page_sends(results={"jax": PENDING, "torch": PENDING})
    answers = answered.wait(WAIT)
    assert set(answers) == {"jax"} and answers["jax"].spec.input_dtypes == ("float16",)


@pytest.mark.parametrize("junk", [5, "junk", [1, 2], None])
def test_a_request_of_the_wrong_type_is_refused_into_error(answered, junk):
    answered.comm.page_sends(request=junk)
    assert answered.error
    answered.comm.page_sends(request=good(answered))
    assert answered.wait(WAIT)["jax"].status == "ok"


HUGE = "x" * 10_000_000
HOSTILE_REQUESTS = [
    ({"target": HUGE}, "unknown target"),
    ({"policy": HUGE}, "unknown dtype policy"),
    ({"input_dtypes": [HUGE]}, "unknown dtype"),
    ({"input_dtypes": ["float32"] * 10_000}, "input_dtype"),
    ({"backends": ["jax"] * 10_000 + [HUGE]}, "unknown backend"),
    ({"kwargs": HUGE}, "the limit is"),
    ({"kwargs": "[" * 15_000 + "]" * 15_000}, "kwargs"),
    ({"kwargs": '{"units": ' + "[" * 5_000 + "]" * 5_000 + "}"}, "deeper than 32 levels"),
    ({"kwargs": '{"units": ' + "[" * 100 + "]" * 100 + "}"}, "deeper than 32 levels"),
    ({"shape": json.dumps([[2, 4]] * 1_000)}, "shape"),
    # the shape parser's words: what is wrong, where, what was received and what is valid
    (
        {"shape": '[[2, "4"]]'},
        f"'\"' at character 6 is not part of a shape; received: '[[2, \"4\"]]'; "
        f"valid: {SHAPE_SYNTAX}",
    ),
    ({"preset": HUGE}, "unknown value preset"),
    ({"nonce": HUGE}, "nonce must be an integer"),
    ({"target": "Lambda"}, "cannot be probed standalone"),
    ({HUGE[:1000]: 1}, "unknown request field"),
]


@pytest.mark.parametrize(("changes", "phrase"), HOSTILE_REQUESTS)
def test_hostile_requests_are_refused_with_a_short_message(answered, changes, phrase):
    # from a good request, so an earlier case that failed leaves none of its junk in this one
    answered.comm.page_sends(request={**good(answered), **changes})
    assert phrase in answered.error, answered.error[:300]
    assert len(answered.error) < 1_000  # nothing huge goes back to the page
    assert answered.comm.last_sent("error") == answered.error
    answered.comm.page_sends(request=good(answered))
    assert answered.wait(WAIT)["jax"].status == "ok"  # the kernel goes on answering


def test_a_keras_error_about_a_long_value_is_cut(answered):
    """Keras echoes a bad kwarg in its error ("Received: units=..."): the page gets it cut."""
    answered.comm.page_sends(
        request=request(answered, kwargs=json.dumps({"units": "u" * 19_000}), backends=["jax"])
    )
    answer = answered.wait(WAIT)["jax"]
    assert answer.status == "invalid"
    assert len(answer.error.message) < 2_100  # engine._probe cuts at 2,000


def test_a_lambda_payload_from_the_page_is_never_evaluated(answered, tmp_path):
    """A Lambda layer config holding a Python lambda, sent as a sub-layer, after this session
    turned Keras's safe mode off: refused, nothing runs, the session's setting unchanged."""
    marker = tmp_path / "evaluated"
    function = eval(f"lambda x: (__import__('pathlib').Path({str(marker)!r}).touch(), x)[1]")
    config = keras.saving.serialize_keras_object(keras.layers.Lambda(function))
    before = serialization_lib.in_safe_mode()
    keras.config.enable_unsafe_deserialization()
    try:
        answered.comm.page_sends(
            request=request(
                answered,
                target="TimeDistributed",
                kwargs=json.dumps({"layer": config}),
                input_dtypes=["float32"],
                backends=["jax"],
            )
        )
        answers = answered.wait(WAIT)
        assert answers["jax"].status == "invalid"
        assert "arbitrary code execution" in answers["jax"].error.message
        assert not marker.exists()
        assert serialization_lib.in_safe_mode() is False
    finally:
        serialization_lib.global_state.set_global_attribute("safe_mode_saving", before)


def test_a_burst_of_changes_runs_only_the_newest_request(monkeypatch):
    """Twelve quick changes while a heavy probe runs: the running one finishes (cancelling it
    would kill and restart the worker), the ten in between are dropped, the newest runs."""
    widget = DtypeExplorer(backends=["jax"], use_cache=False)
    widget.wait(WAIT)
    submitted: list[ProbeSpec] = []
    real_submit = pool.submit

    def counting_submit(spec, **options):
        submitted.append(spec)
        return real_submit(spec, **options)

    monkeypatch.setattr(widget_module.pool, "submit", counting_submit)
    heavy = {"target": "LSTM", "kwargs": '{"units": 64}', "shape": "[[8, 64, 32]]"}
    for seed_units in range(12):
        widget.comm.page_sends(
            request=request(widget, **{**heavy, "kwargs": json.dumps({"units": 64 + seed_units})})
        )
    answers = widget.wait(WAIT)
    time.sleep(0.5)  # let any straggler arrive, if one were to run
    units = [spec.kwargs["units"] for spec in submitted if spec.target == "LSTM"]
    assert units[0] == 64 and units[-1] == 75  # the first ran, then only the newest
    assert len(units) <= 2, units  # (promotion tables submit ops.add probes too)
    assert answers["jax"].spec.kwargs["units"] == 75
    assert widget.results["jax"]["spec"]["kwargs"]["units"] == 75

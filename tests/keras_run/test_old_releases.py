"""Issue 23.6: the probe works on the old releases it claims (3.1.x-3.5.x lack
``keras.tree.flatten_with_path``), using only what each release has; a failure of
dtype-explorer's own code is ``invalid`` with ``where="tool"``, never Keras's answer; and a
bisection never calls a tool failure a change.

The engines are real Keras releases over the installed backends (tests/conftest.py), made in
this session's cache directory; making one needs the package index: without it these tests
fail, never skip.
"""

import pytest

import dtype_explorer as dx
from dtype_explorer.analyses._bisect import answered
from dtype_explorer.keras_run import _compat
from dtype_explorer.keras_run._tool_error import is_tool_error
from dtype_explorer.keras_run.probe._observe import device, error_info
from dtype_explorer.keras_run.probe._run import tool_failure_invalid
from dtype_explorer.records import BisectProbe, BisectResult, ErrorInfo, ProbeResult, ProbeSpec

OLD = ["keras_3_2_engine", "keras_3_4_engine", "keras_3_5_engine"]


@pytest.mark.parametrize("engine_fixture", OLD)
@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_layer_probes_answer_on_releases_without_flatten_with_path(
    engine_fixture, backend, request
):
    """The old code answered every layer probe on these releases with its own
    ``AttributeError: module 'keras.api.tree' has no attribute 'flatten_with_path'``, as a
    Keras call error (status ``error``)."""
    engine = request.getfixturevalue(engine_fixture)
    for target, kwargs, inputs in [
        ("Dense", {"units": 2}, "float32"),
        ("MultiHeadAttention", {"num_heads": 2, "key_dim": 2}, "float32"),
    ]:
        r = dx.probe(
            target,
            inputs,
            policy="mixed_float16",
            backend=backend,
            kwargs=kwargs,
            engine=engine.spec,
            use_cache=False,
        )
        assert r.versions["keras"] == engine.version
        assert r.status == "ok", r.error
        assert r.output_dtype == "float16"
        assert r.verdict == "as-documented"
        received = [s for s in r.cast_path if s.stage == "autocast"]
        assert received and all(s.dtype == "float16" for s in received)


def test_bisect_over_an_old_release_finds_no_change(keras_3_4_engine, keras_3_11_engine):
    """The old code answered "first changed in Keras 3.11.3: raises AttributeError (3.4.1) ->
    float32 (3.11.3)", a change Keras never made."""
    b = dx.bisect(
        "Dense",
        "float32",
        backend="tensorflow",
        kwargs={"units": 2},
        versions=["3.4.1", "3.11.3"],
        progress=False,
        use_cache=False,
    )
    assert b.answers() == {"3.4.1": "float32", "3.11.3": "float32"}
    assert b.first_change is None


def test_flatten_with_path_matches_the_release_flatten():
    """The compat helper gives the leaves in ``keras.tree.flatten``'s order."""
    import keras

    nest = {"b": [1, (2, None)], "a": {"y": 3, "x": 4}}
    pairs = _compat.flatten_with_path(nest)
    assert [leaf for _, leaf in pairs] == keras.tree.flatten(nest)
    assert [path for path, _ in pairs] == [
        ("a", "x"),
        ("a", "y"),
        ("b", 0),
        ("b", 1, 0),
        ("b", 1, 1),
    ]
    assert _compat._walk(nest, ()) == pairs  # the walk old releases use agrees


class _NoDevices:
    devices = None  # not callable: the tool's device() fails on it


def test_a_failure_of_the_tools_own_code_is_told_from_keras():
    """The old code had no such distinction: both were ``where="call"``, status ``error``."""
    import keras

    with pytest.raises(TypeError) as tool:
        device(_NoDevices())
    with pytest.raises(ValueError) as from_keras:
        keras.layers.Dense(units=-1)
    assert is_tool_error(tool.value)
    assert not is_tool_error(from_keras.value)
    assert error_info(tool.value, "call").where == "tool"
    assert error_info(from_keras.value, "construct").where == "construct"
    fields = tool_failure_invalid({"status": "error", "error": error_info(tool.value, "call")})
    assert fields["status"] == "invalid"


def _answer(version, **fields):
    return BisectProbe(
        version=version,
        result=ProbeResult(spec=ProbeSpec(target="Dense"), backend="numpy", **fields),
    )


def test_bisect_record_compares_no_tool_failure():
    failed = ErrorInfo(type="AttributeError", message="no flatten_with_path", where="tool")
    b = BisectResult(
        spec=ProbeSpec(target="Dense"),
        versions=("3.4.1", "3.5.0", "3.11.3"),
        probes=(
            _answer("3.4.1", status="ok", output_dtype="float32"),
            _answer("3.5.0", status="invalid", error=failed),
            _answer("3.11.3", status="ok", output_dtype="float32"),
        ),
    )
    assert b.changes == ()
    assert b.result("3.5.0").outcome == "tool failure (AttributeError)"
    assert not answered(b.result("3.5.0"))


def test_an_operator_that_raises_under_the_trace_is_the_backends_error():
    """A built-in layer's operator (``x -= mean``: torch's C ``Tensor.__isub__``) passed on by
    the operator hook (``call_operator``, outside a recorded step) raises in the backend; the
    old code called that a failure of the tool's own code (its frame was the innermost)."""
    import operator

    import torch

    from dtype_explorer.keras_run.trace._op_trace import call_operator

    with pytest.raises(RuntimeError) as raised:
        y = torch.zeros(2, dtype=torch.uint8)
        call_operator(operator.iadd, "operator.iadd", "binary", (y, torch.ones(2)), {})
    assert not is_tool_error(raised.value)


def test_batchnorm_on_uint8_in_3_4_is_keras_answer_not_a_tool_failure(keras_3_4_engine):
    """Keras 3.4.1's BatchNormalization raises on uint8 on torch (3.15 casts it): the old code
    answered ``invalid`` (where="tool"), as if dtype-explorer had failed."""
    r = dx.probe(
        "BatchNormalization",
        "uint8",
        shape=(2, 784),
        values="image",
        backend="torch",
        engine=keras_3_4_engine.spec,
        use_cache=False,
    )
    assert r.versions["keras"] == "3.4.1"
    assert r.status == "error" and r.error.where == "call", r.error
    assert "can't be cast to the desired output type Byte" in r.error.message

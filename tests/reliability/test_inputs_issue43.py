"""Careless input, round three (issue 43): every backend named is answered, never dropped."""

from __future__ import annotations

import pytest

import dtype_explorer as dx
from dtype_explorer import pool
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.records import ProbeSet


@pytest.mark.parametrize("asked", ["jax,numpy", " jax , numpy ", ["jax", "numpy"]])
def test_a_comma_list_of_backends_answers_for_each(asked):
    """On main ``backend="jax,numpy"`` returned jax's result alone: numpy was dropped."""
    found = dx.probe("Dense", backend=asked, timeout=240)
    assert isinstance(found, ProbeSet), type(found)
    assert [r.backend for r in found] == ["jax", "numpy"]
    assert all(r.output_dtype == "float32" for r in found), found.summary()


@pytest.mark.parametrize("asked", ["all ", " all", "all,"])
def test_all_with_spaces_is_every_installed_backend(asked):
    found = dx.probe("ReLU", backend=asked, timeout=240)
    assert isinstance(found, ProbeSet), type(found)
    assert [r.backend for r in found] == pool.installed_backends()


@pytest.mark.parametrize("asked", ["jax,nump", "all,jax", ","])
def test_a_bad_backend_list_is_refused_with_what_is_valid(asked):
    with pytest.raises(InvalidSpecError, match="backend") as raised:
        dx.probe("Dense", backend=asked)
    assert "numpy" in str(raised.value)


def test_one_backend_with_spaces_is_still_one_result():
    found = dx.probe("Dense", backend=" numpy ", timeout=240)
    assert not isinstance(found, ProbeSet) and found.backend == "numpy"


ESCAPE = "\x1b[2J\x1b]0;owned\x07"


def test_control_sequences_never_reach_the_terminal_from_text_views():
    """str(), summary() and the rich tables escape control characters (one function owns it:
    ``errors.printable``), as the HTML views escape markup."""
    import io

    from rich.console import Console

    from dtype_explorer.records import ErrorInfo, ProbeResult, ProbeSpec
    from dtype_explorer.views import probe_set_table

    spec = ProbeSpec(target=f"d{ESCAPE}", input_dtypes=("float32",))
    result = ProbeResult(
        spec=spec,
        status="error",
        backend="numpy",
        error=ErrorInfo(type="ValueError", message=f"bad {ESCAPE}"),
    )
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(probe_set_table(ProbeSet(results=(result,))))
    for text in (str(result), result.summary(), console.file.getvalue()):
        assert "\x1b" not in text and "\x07" not in text, repr(text)
    assert "\\x1b[2J" in str(result)


def test_the_cli_check_of_a_model_with_an_escape_in_a_layer_name(tmp_path):
    """On main ``dtype-explorer check m.keras`` wrote the layer name's ESC sequences raw."""
    import os
    import subprocess
    import sys

    import keras

    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(2, name=f"d{ESCAPE}")(inputs))
    path = tmp_path / "m.keras"
    model.save(path)
    done = subprocess.run(
        [sys.executable, "-m", "dtype_explorer", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "KERAS_BACKEND": "numpy"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout, repr(done.stdout[-2000:])
    assert "\\x1b[2J" in done.stdout


def test_the_widget_refuses_a_shape_as_probe_does():
    """On main ``DtypeExplorer(shape=5)`` was accepted while ``dx.probe(shape=5)`` refused."""
    from dtype_explorer.frontends.widget import DtypeExplorer

    with pytest.raises(InvalidSpecError, match="shape") as probe_said:
        dx.probe("Dense", backend="numpy", shape=5)
    with pytest.raises(InvalidSpecError, match="shape") as widget_said:
        DtypeExplorer("Dense", shape=5)
    assert str(widget_said.value) == str(probe_said.value)


def test_a_huge_int4_block_size_is_refused_naming_it():
    """On main NumPy's "Maximum allowed dimension exceeded" came back, naming no parameter."""
    asked = "int4/10000000000"
    try:
        result = dx.probe("Dense", backend="numpy", quantize=asked, timeout=240)
    except InvalidSpecError as exc:
        said = str(exc)
    else:
        assert result.status == "invalid", result.summary()
        said = result.error.message
    assert "block size" in said and "10000000000" in said, said
    assert "Maximum allowed dimension" not in said


def test_an_audit_that_quantized_nothing_is_not_headed_quantized():
    """On main a GPTQ audit without data was headed "quantized gptq" though no layer was."""
    from dtype_explorer.records import AuditReport, QuantizationReport

    nothing = QuantizationReport(mode="gptq", asked="gptq")
    report = AuditReport(
        model="m", model_class="Functional", backend="numpy", policy="float32", quantization=nothing
    )
    assert "quantized gptq" not in report.summary()
    assert "quantize('gptq'): nothing quantized" in report.summary()

"""``%dtype_check`` used carelessly, through a real IPython shell: every misuse is a
``UsageError`` with one clear message (no traceback), and the shell goes on working."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from IPython.core.error import UsageError
from keras import layers

from dtype_explorer.records import AuditReport


class FixedDtypeDense(layers.Layer):
    """A user layer that always computes in float32: its config cannot carry another policy."""

    def __init__(self, units: int = 3, **kwargs):
        kwargs.pop("dtype", None)
        super().__init__(dtype="float32", **kwargs)
        self.units = units

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units))

    def call(self, x):
        return keras.ops.matmul(x, self.kernel)

    def get_config(self):
        return {**super().get_config(), "units": self.units}


@pytest.fixture
def namespace(shell):
    model = keras.Sequential([keras.Input((4,), name="x"), layers.Dense(3, name="out")], name="net")
    inputs = keras.Input((4,), name="x")
    fixed = keras.Model(inputs, FixedDtypeDense(name="fixed")(inputs), name="fixed_net")
    names = {
        "model": model,
        "fixed": fixed,
        "as_dict": {"y": np.ones((2, 4))},
        "as_text": "not an array",
        "as_strings": np.array([["a", "b", "c", "d"]]),
        "ragged": [[1.0, 2.0], [3.0]],
        "huge_name": "x" * 1_000_000,
        "an_object": object(),
    }
    shell.user_ns.update(names)
    yield shell.user_ns
    for name in names:
        shell.user_ns.pop(name, None)


#: (line, what the message says): each is one hostile or careless use.
CASES = [
    ('model --sample "batch', "cannot read the arguments"),
    ("model --policy 'mixed_float16", "cannot read the arguments"),
    ("model --sample as_dict", "a dict sample needs the input names"),
    ("model --sample as_text", r"the sample does not fit input 'x'.*got \(\) \(string\)"),
    ("model --sample ragged", "the sample must hold arrays"),
    ("model --sample an_object", "sample must hold"),
    ("model --sample 1+", "could not evaluate --sample"),
    ("model --sample huge_name[0]+", "could not evaluate --sample"),
    ("model --policy " + "p" * 5000, "unknown dtype policy"),
    ("model --backends ,", "backend"),
    ("as_dict", "needs a Keras model or layer"),
]


@pytest.mark.parametrize(("line", "message"), CASES)
def test_misuse_is_a_usage_error_and_the_shell_survives(shell, namespace, line, message):
    with pytest.raises(UsageError, match=message) as caught:
        shell.run_line_magic("dtype_check", line)
    assert len(str(caught.value)) < 2_000  # nothing huge is echoed back
    report = shell.run_line_magic("dtype_check", "model")  # the shell still works
    assert isinstance(report, AuditReport)


def test_a_layer_fixing_its_own_dtype_is_audited_as_raw_keras_builds_it(shell, namespace):
    """A layer that fixes its own dtype keeps it when raw Keras builds the model under the
    policy, so the audit runs the rebuilt model and names the layer it did not change (issue
    39 item 15; it was a usage error)."""
    before = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        raw = FixedDtypeDense(name="fixed")
    finally:
        keras.config.set_dtype_policy(before)
    raw(np.ones((2, 4), "float32"))
    report = shell.run_line_magic("dtype_check", "fixed --policy mixed_float16")
    assert report.policy_override == "mixed_float16"
    [row] = [c for c in report.layers if c.path.endswith("/fixed")]
    assert row.compute_dtype == raw.compute_dtype
    [note] = [n for n in report.notes if "were not changed" in n]
    assert "fixed (FixedDtypeDense, still float32)" in note


def test_misuse_in_a_cell_shows_no_traceback(shell, namespace, capsys):
    for line, _ in CASES:
        result = shell.run_cell(f"%dtype_check {line}")
        assert isinstance(result.error_in_exec, UsageError), line
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err


def test_a_string_sample_for_a_numeric_model_is_answered_with_keras_own_refusal(shell, namespace):
    """A NumPy string sample is a sample ``model(...)`` can take (issue 23.8), so it is no
    misuse of the magic: the audit runs it, and where Keras refuses to cast the strings to the
    model's float32 input, the report says so in Keras's own words (a call-error finding)."""
    model, sample = namespace["model"], namespace["as_strings"]
    with pytest.raises(Exception) as raw:  # what raw Keras raises is the answer
        model(sample)
    report = shell.run_line_magic("dtype_check", "model --sample as_strings")
    assert isinstance(report, AuditReport)
    assert [t.dtype for t in report.sample] == ["string"]
    errors = [f for f in report.findings if f.kind == "call-error"]
    assert errors and type(raw.value).__name__ in errors[0].message, report.findings
    assert report.layers[0].error is not None and report.layers[0].error.where != "tool"


def test_a_dict_sample_keyed_by_the_input_name_is_accepted(shell, namespace):
    namespace["by_name"] = {"x": np.ones((2, 4), dtype="float32")}
    report = shell.run_line_magic("dtype_check", "model --sample by_name")
    assert isinstance(report, AuditReport)
    assert report.layers[-1].path.endswith("out")


def test_policy_on_a_rebuildable_model_is_honoured(shell, namespace):
    report = shell.run_line_magic("dtype_check", "model --policy mixed_float16")
    assert report.policy_override == "mixed_float16"
    assert report.layers[-1].policy == "mixed_float16"

"""A right dtype with wrong numbers (issue 14): integer wraparound, truncation, error against a
wider reference, values that part across backends; and verdicts judged against an independent
expectation, one per output. Real Keras on every installed backend, through the worker pool."""

from __future__ import annotations

import math

import keras
import pytest
from keras import ops
from swept import SWEPT

import dtype_explorer as dx
from dtype_explorer import pool

#: The swept backends (tests/swept.py): the test command installs them, so one missing fails here.
BACKENDS = pool.usable(SWEPT)


def flat(finding, shape) -> int:
    """The row-major position of a finding's element in an output of ``shape``."""
    position = 0
    for i, dim in zip(finding.element, shape):
        position = position * dim + i
    return position


def test_uint8_addition_wraps_around_named_at_its_first_element():
    for r in dx.probe("ops.add", "uint8", backend=BACKENDS, values="image"):
        assert r.output_dtype == "uint8", r.backend  # the dtype is right ...
        [found] = r.value_findings()  # ... the numbers are not
        assert found.kind == "wraparound", (r.backend, found)
        assert found.expected > 255 and found.value == found.expected % 256
        out = r.numerics.outputs[0]
        assert out.head[flat(found, out.shape)] == found.value
        before = out.head[: flat(found, out.shape)]  # the first element that shows it
        assert all(x is not None and x <= 255 for x in before)
    # in a wide enough type the same sum holds: no finding
    assert not dx.probe("ops.add", "int32", values="image").value_findings()


def test_layer_normalization_on_int32_returns_truncated_values():
    for r in dx.probe("LayerNormalization", "int32", backend=BACKENDS):
        assert r.output_dtype == "float32", r.backend
        found = r.value_findings()[0]
        assert found.kind == "truncation", (r.backend, found)
        assert float(found.value).is_integer() and not float(found.expected).is_integer()
        assert abs(found.value - found.expected) < 1
        assert all(x is None or float(x).is_integer() for x in r.numerics.outputs[0].head)
    assert not dx.probe("LayerNormalization", "float32").value_findings()


def test_error_against_the_reference_for_integer_input():
    # gelu of int32: NumPy-backed Keras returns whole numbers, JAX the right values
    sets = dx.probe("ops.gelu", "int32", backend=[b for b in BACKENDS if b in ("numpy", "jax")])
    if "numpy" in BACKENDS:
        found = sets["numpy"].value_findings()[0]
        assert found.kind in ("truncation", "reference-error")
        assert abs(found.expected - found.value) > 0.1
    if "jax" in BACKENDS:
        assert sets["jax"].numerics.reference_dtype == "float32"
        assert not sets["jax"].value_findings()


def test_values_that_part_across_backends_are_named():
    probes = dx.probe("ops.gelu", "int32", backend=["numpy", "jax"])
    parted = probes.value_divergence()
    assert parted is not None
    numpy_value, jax_value = parted.values["numpy"], parted.values["jax"]
    out = probes["jax"].numerics.outputs[0]
    assert jax_value == out.head[flat(parted, out.shape)]
    assert abs(numpy_value - jax_value) > parted.tolerance
    assert "numbers diverge" in probes.summary()


def test_one_dtype_and_numbers_apart():
    # uint8 ** uint8: every backend says uint8, and they do not agree on the numbers
    probes = dx.probe("ops.power", "uint8", backend=["numpy", "jax"], values="image")
    assert {r.output_dtype for r in probes} == {"uint8"} and probes.verdict != "diverges"
    parted = probes.value_divergence()
    assert parted is not None and parted.tolerance == 0.0  # integers agree exactly or not at all
    assert parted.values["numpy"] != parted.values["jax"]


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_same_inputs_and_weights_give_the_same_numbers_everywhere(policy):
    # weights drawn by each backend's generator are made the same before call() computes,
    # also under a mixed policy (set outside the autocast scope the call runs in: on torch an
    # assignment inside it did not reach the variable, and torch's numbers stood apart)
    probes = dx.probe("Dense", "float64", policy, backend=BACKENDS, kwargs={"units": 3})
    assert len({r.numerics.outputs[0].head for r in probes}) >= 1
    assert probes.value_divergence() is None
    heads = [r.numerics.outputs[0].head for r in probes]
    tolerance = 1e-5 if policy == "float32" else 1e-2
    assert all(
        math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance)
        for h in heads
        for a, b in zip(heads[0], h)
    ), heads


def test_torch_float64_dense_is_not_a_deviation_and_the_rules_disagree():
    r = dx.probe("Dense", "float64", policy="float64", backend="torch", kwargs={"units": 2})
    assert r.output_dtype == "float64"
    assert r.verdict == "as-documented", r.expectations
    assert r.expected_by == "policy" and r.expectation("policy").dtype == "float64"
    assert r.expectation("result_type").dtype == "float32"  # Keras's rule on torch
    assert r.rules_disagree().startswith("Keras's rules disagree here")
    assert [x.source for x in r.disagreements()] == ["result_type"]


def test_maximum_narrowing_float64_is_not_as_documented():
    r = dx.probe("ops.maximum", "float64", backend="torch")
    assert r.output_dtype == "float32" and r.expectation("result_type").dtype == "float32"
    assert r.expectation("torch").dtype == "float64" and r.expectation("numpy").dtype == "float64"
    assert r.verdict == "deviates" and r.expected_by == "torch"
    assert r.rules_disagree()


def test_every_expectation_side_by_side_for_an_op():
    r = dx.probe("ops.add", ("int8", "uint8"))  # tensorflow, in this process
    by = {x.name: x.dtype for x in r.expectations}
    assert by == {"result_type": "int16", "np": "int16", "tnp": "int16", "declared": "int16"}
    assert r.verdict == "as-documented" and r.disagreements() == []
    text = str(r)
    assert "expected: *result_type int16  np int16  tnp int16  declared int16" in text


def test_a_custom_layer_wrapping_an_op_is_judged_by_the_op():
    class Doubled(keras.layers.Layer):
        def call(self, x):
            return ops.add(x, x)

    r = dx.probe(Doubled(), "int8")
    assert r.output_dtype == "int8"
    # not "a custom layer returns its compute dtype (float32)": ops.add of int8 is int8
    assert r.verdict == "as-documented", r.expectations
    assert r.documented_dtype == "int8" and r.expected_by == "result_type"
    assert "ops.add" in r.expectation("result_type").basis
    assert r.expectation("policy").dtype == "float32"  # shown beside it, not used


def test_multi_output_targets_get_a_verdict_per_output():
    for r in dx.probe("ops.top_k", "float32", backend=BACKENDS):
        values, indices = r.output_dtypes
        assert values == "float32" and len(r.output_verdicts) == 2
        assert r.output_verdicts[0] == "as-documented"
        if indices == r.declared_dtype or indices == "int32":  # jax, tensorflow
            assert r.output_verdicts[1] == "undocumented" and r.verdict == "as-documented"
        else:  # torch, numpy: int64 indices where Keras declares int32
            assert r.output_verdicts[1] == "declared-mismatch", r.backend
            assert r.verdict == "declared-mismatch", r.backend

"""Issue 39, item 7: Keras 2 has documented expectations of its own. tf_keras states its policy
rule in its docstrings (``tf.keras.mixed_precision.Policy``: "A layer casts its inputs to its
compute dtype. This causes the layer's computations and output to also be in the compute
dtype."; only floating-point inputs, only the first argument of ``call``); the Keras 2 probe
quotes it and judges by it, with the compute dtype read from the tf_keras layer.

Each question is asked as a tf.keras user asks it (``keras2_documented_script.py``): through
``dx`` under ``dtype-explorer run --engine tf_keras`` and, for a built-in layer, from this
Keras 3 process with ``engine="tf_keras"``; every answer is compared with the same code run
as plain tf_keras (the engine's site first, ``TF_USE_LEGACY_KERAS=1``, no dtype-explorer).

Creating the engine needs the package index: without it these tests fail, never skip.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from keras2_runs import in_engine, plain_tf_keras

import dtype_explorer as dx

pytestmark = pytest.mark.timeout(900)

SCRIPT = Path(__file__).with_name("keras2_documented_script.py")
#: The sentence of tf_keras's ``Policy`` docstring the rule rests on.
RULE = (
    "A layer casts its inputs to its compute dtype. This causes the layer's computations and "
    "output to also be in the compute dtype."
)


@pytest.fixture(scope="module")
def plain(tf_keras_engine) -> dict:
    out = plain_tf_keras(tf_keras_engine, str(SCRIPT), "raw")
    assert out.pop("module") == "tf_keras"
    return out


@pytest.fixture(scope="module")
def asked(tf_keras_engine) -> dict:
    """The same questions through ``dx``, in the Keras 2 engine's own process."""
    return in_engine(tf_keras_engine, str(SCRIPT), "dx")


def _as_raw(answer: dict | str, raw: list) -> None:
    """The tool ran the layer and its outputs are raw tf_keras's (``raw``: outputs, compute
    dtype)."""
    assert isinstance(answer, dict), answer
    assert answer["error"] is None
    assert answer["outputs"] == raw[0]


def test_the_rule_is_quoted_from_tf_keras_own_docstring(plain, asked):
    assert RULE in plain["policy_doc"]  # raw tf_keras states it
    quoted = [b for b in asked["dense_mixed"]["basis"] if "mixed_precision.Policy" in b]
    assert any(RULE in b for b in quoted)


@pytest.mark.parametrize("case", ["dense_mixed", "model", "own"])
def test_a_layer_in_its_compute_dtype_is_as_documented(plain, asked, case):
    """Dense under mixed_float16, a subclassed tf.keras.Model on float64 (``Model.__call__``
    casts), a Dense instance with its own ``dtype="float64"``: documented in the compute dtype
    raw tf_keras gives the layer, which is what raw tf_keras returns."""
    answer, (outputs, compute) = asked[case], plain[case]
    _as_raw(answer, plain[case])
    assert outputs == [compute]
    assert answer["documented"] == compute and answer["policy"] == [compute]
    assert (answer["verdict"], answer["expected_by"]) == ("as-documented", "policy")


def test_a_layer_leaving_its_compute_dtype_deviates(plain, asked):
    """A user's tf.keras layer returning float32 under mixed_float16: raw gives float32 where
    tf_keras documents the compute dtype float16."""
    answer, (outputs, compute) = asked["back"], plain["back"]
    _as_raw(answer, plain["back"])
    assert outputs == ["float32"] and compute == "float16"
    assert (answer["documented"], answer["verdict"]) == ("float16", "deviates")


def test_a_second_argument_is_undocumented_as_tf_keras_says(plain, asked):
    """tf_keras's own docstring example: only the first argument of ``call`` is cast, so raw
    gives float64 and float32; the tool claims no documented dtype and says why."""
    answer = asked["two"]
    _as_raw(answer, plain["two"])
    assert plain["two"][0] == ["float64", "float32"]
    assert (answer["documented"], answer["verdict"], answer["policy"]) == (
        None,
        "undocumented",
        [],
    )
    assert any("after its first argument" in b for b in answer["basis"])


def test_from_keras3_a_tf_keras_dense_is_judged_by_the_keras2_rule(plain, tf_keras_engine):
    """``engine="tf_keras"`` from this Keras 3 process: the same documented dtype; an int
    input (not cast) and ``autocast=False`` (Embedding) stay undocumented."""
    x = np.full((2, 3), 0.5, "float32")
    r = dx.probe("Dense", values=x, kwargs={"units": 2}, policy="mixed_float16", engine="tf_keras")
    outputs, compute = plain["dense_mixed"]
    assert r.ok, r.error
    assert list(r.output_dtypes) == outputs
    assert (r.documented_dtype, r.verdict, r.expected_by) == (compute, "as-documented", "policy")
    assert sum("result_type" in b for b in r.basis) == 1  # what Keras 2 lacks, said once
    ints = dx.probe("BatchNormalization", "int32", "mixed_float16", engine="tf_keras")
    assert ints.ok and ints.documented_dtype is None and ints.verdict == "undocumented"
    assert any("only floating-point inputs are cast" in b for b in ints.basis)
    ids = np.array([[0, 1, 2]], "int32")
    off = dx.probe(
        "Embedding",
        values=ids,
        kwargs={"input_dim": 4, "output_dim": 2},
        policy="mixed_float16",
        engine="tf_keras",
    )
    assert off.ok and off.verdict == "undocumented"
    assert any("autocast=False" in b for b in off.basis)

"""openvino, Keras's fifth backend (inference only), on its own: the general tests sweep the
four array backends (``tests/swept.py``); here ``backend="all"`` answers five columns, the
dtypes openvino's worker reports equal raw ``KERAS_BACKEND=openvino`` scripts run beside (one
subprocess for the whole raw table), and what Keras does not implement there (``fit``, an op)
is its own answer in its words, drawn as not supported, never a divergence.
"""

from __future__ import annotations

import importlib.util
import json

import keras
import pytest
from on_backend import json_on
from swept import SWEPT

import dtype_explorer as dx
from dtype_explorer import pool
from dtype_explorer.analyses._probe import resolve_backends
from dtype_explorer.backends import BACKENDS
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import make_spec
from dtype_explorer.runtime import _allowed

#: Each case: target, constructor kwargs, input shape (the tool's and the raw script's).
TARGETS = {
    "Dense": ({"units": 4}, (2, 3)),
    "Conv1D": ({"filters": 2, "kernel_size": 3}, (2, 8, 3)),
    "Embedding": ({"input_dim": 10, "output_dim": 3}, (2, 5)),
    "ops.softmax": ({}, (2, 3)),
}
POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")
DTYPES = ("uint8", "int32", "float64")
CASES = [(t, p, d) for t in TARGETS for p in POLICIES for d in DTYPES]
#: The op set's answer the tool sets beside Keras's: ``ops.add`` of these pairs.
PAIRS = [("int32", "int32"), ("int8", "uint8"), ("float16", "float16")]

#: Raw Keras on openvino, one process for every case: each target's output dtype (or the type
#: it raised), Keras's own words for model.fit and ops.svd, and OpenVINO's op set's add.
RAW = r"""
import json, keras, numpy as np
import openvino.opset16 as opset
from keras.src.backend.openvino.core import ov_to_keras_type
cases, targets, pairs = json.loads({payload!r})
found = {{}}
for target, policy, dtype in cases:
    kwargs, shape = targets[target]
    keras.config.set_dtype_policy(policy)
    try:
        x = (np.arange(np.prod(shape)) % 10).reshape(shape).astype(dtype)
        if target.startswith("ops."):
            y = getattr(keras.ops, target[4:])(x)
        else:
            y = getattr(keras.layers, target)(**kwargs)(x)
        found[f"{{target}} {{policy}} {{dtype}}"] = keras.backend.standardize_dtype(y.dtype)
    except Exception as error:
        found[f"{{target}} {{policy}} {{dtype}}"] = "raises " + type(error).__name__
    finally:
        keras.config.set_dtype_policy("float32")
said = {{}}
inputs = keras.Input((3,))
model = keras.Model(inputs, keras.layers.Dense(4)(inputs))
model.compile(optimizer="sgd", loss="mse")
for name, run in (
    ("fit", lambda: model.fit(np.ones((2, 3), "float32"), np.ones((2, 4), "float32"), verbose=0)),
    ("svd", lambda: keras.ops.svd(np.eye(3, dtype="float32"))),
):
    try:
        run()
        said[name] = None
    except NotImplementedError as error:
        said[name] = str(error)
opset_add = {{}}
for lhs, rhs in pairs:
    a, b = (opset.constant(np.ones(3, d)) for d in (lhs, rhs))
    try:
        opset_add[f"{{lhs}} {{rhs}}"] = ov_to_keras_type(opset.add(a, b).get_output_element_type(0))
    except Exception as error:
        opset_add[f"{{lhs}} {{rhs}}"] = "raises " + type(error).__name__
matmul = keras.ops.matmul(np.ones((2, 4), "uint8"), np.ones((4, 8), "float32"))
scaled = keras.ops.convert_to_tensor(np.ones((3, 3), "float32")) * 2.0
print(json.dumps({{"dtypes": found, "said": said, "opset_add": opset_add,
                  "matmul": keras.backend.standardize_dtype(matmul.dtype),
                  "scaled": keras.backend.standardize_dtype(scaled.dtype)}}))
"""


@pytest.fixture(scope="module")
def raw() -> dict:
    """The raw table, from one ``KERAS_BACKEND=openvino`` process."""
    payload = json.dumps([CASES, TARGETS, PAIRS])
    return json_on("openvino", RAW.format(payload=payload))


@pytest.fixture(scope="module", autouse=True)
def openvino_installed() -> None:
    """openvino is in the project's ``all`` extra: missing, these tests fail, never skip."""
    assert "openvino" in pool.installed_backends(), (
        "openvino is not installed (or not allowed by $DTYPE_EXPLORER_BACKENDS): "
        "pip install 'dtype-explorer[openvino]'"
    )


def test_all_answers_five_columns():
    """The issue's question: ``dx.probe("Dense", "uint8", backend="all")``, one column per
    installed backend, openvino's too, each in the comparison."""
    rs = dx.probe("Dense", "uint8", backend="all")
    assert list(rs.backends) == pool.installed_backends() == list(BACKENDS)
    assert rs["openvino"].ok and rs["openvino"].output_dtype == "float32"
    assert rs["openvino"].device == "cpu"
    assert "openvino" in str(rs) and "openvino" in rs._repr_html_()


def test_dtypes_equal_raw_openvino(raw):
    """Dense, Conv1D, Embedding and ops.softmax under three policies on uint8, int32 and
    float64: each output dtype (or the error's type) as raw Keras on openvino gives it."""
    futures = {
        f"{t} {p} {d}": pool.submit(
            make_spec(t, d, p, "openvino", kwargs=TARGETS[t][0], shape=TARGETS[t][1])
        )
        for t, p, d in CASES
    }
    got = {}
    for case, future in futures.items():
        r = future.result()
        assert r.status in ("ok", "error"), (case, r.summary())
        got[case] = r.output_dtype if r.ok else f"raises {r.error.type}"
    assert got == raw["dtypes"]


def test_the_op_trace_reads_openvinos_tensors(raw):
    """Every op of Dense's call on uint8, with its tensors' dtypes (Keras's OpenVINO tensors
    carry their dtype per instance), the promotion at matmul as raw Keras gives it."""
    r = dx.probe("Dense", "uint8", kwargs={"units": 8}, backend="openvino")
    matmul = next(s for s in r.trace if s.op == "ops.matmul")
    assert [t.dtype for t in matmul.inputs] == ["uint8", "float32"]
    assert [t.dtype for t in matmul.outputs] == [raw["matmul"]]
    assert not any("ov_" in s.op or "get_ov_output" in s.op for s in r.trace)  # graph helpers


class Scaled(keras.layers.Layer):
    """A user's layer with a Python operator on the tensor (``x * 2.0``)."""

    def call(self, x):
        return x * 2.0


class Decomposed(keras.layers.Layer):
    """A user's layer calling an op Keras's openvino backend does not implement."""

    def call(self, x):
        return keras.ops.svd(x)[1]


def test_a_users_layer_on_openvino(raw):
    """In the user-code worker: the user's operator on Keras's OpenVINO tensor is a step of the
    trace; an op Keras does not implement there, re-raised by Keras around the layer's build,
    is still its refusal: not supported, its words kept."""
    scaled = dx.probe(Scaled, "float32", shape=(3, 3), backend="openvino")
    step = next(s for s in scaled.trace if s.op == "operator.mul")
    assert [t.dtype for t in step.outputs] == [raw["scaled"]] == [scaled.output_dtype]
    refused = dx.probe(Decomposed, "float32", shape=(3, 3), backend="openvino")
    assert refused.unsupported, refused.summary()
    assert raw["said"]["svd"] in refused.error.message


def test_fit_is_keras_own_refusal_drawn_not_supported(raw):
    """``mode="fit"``: Keras's openvino trainer refuses, in its words; not supported (⊘),
    and the verdict across backends does not call it a divergence."""
    rs = dx.probe("Dense", "float32", kwargs={"units": 4}, mode="fit", backend=["jax", "openvino"])
    refused = rs["openvino"]
    assert refused.unsupported and refused.shown_verdict == "unsupported"
    assert refused.error.message == raw["said"]["fit"]
    assert refused.headline == f"not supported here: {raw['said']['fit']}"
    assert rs["jax"].ok and rs.verdict == rs["jax"].verdict != "diverges"
    grid = rs.comparison()
    assert any(row.cells["openvino"].tone == "unsupported" for row in grid.rows)


def test_an_op_openvino_does_not_implement_is_not_supported(raw):
    """``ops.svd``: Keras's openvino backend raises NotImplementedError; shown as not
    supported with its message, and numpy's answer stands alone."""
    rs = dx.probe("ops.svd", "float32", backend=["numpy", "openvino"])
    assert rs["openvino"].unsupported, rs["openvino"].summary()
    assert rs["openvino"].error.message == raw["said"]["svd"]
    assert rs["numpy"].ok and rs.verdict != "diverges"


def test_the_op_set_is_openvinos_reference(raw):
    """On openvino an op is set beside OpenVINO's op set, run raw beside: ``add`` of i8 and u8
    raises there (the op set does not promote), of the same dtypes it answers that dtype."""
    for lhs, rhs in PAIRS:
        r = dx.probe("ops.add", [lhs, rhs], backend="openvino")
        reference = r.expectation("openvino")
        expected = raw["opset_add"][f"{lhs} {rhs}"]
        assert reference.basis == "openvino.opset16.add", reference
        if expected.startswith("raises"):
            assert reference.shown == "raises" and reference.error.startswith(expected[7:])
        else:
            assert reference.dtype == expected
        assert r.expected_by != "openvino"  # the op set never decides the verdict
    svd = dx.probe("ops.svd", "float32", backend="openvino").expectation("openvino")
    assert svd.shown == "no counterpart" and "no op named svd" in svd.no_counterpart


def test_openvino_not_installed_starts_no_worker(monkeypatch):
    """Where ``openvino`` is not installed, no worker is started for it: ``"all"`` leaves it
    out and asking it by name is refused, saying what is installed."""
    real = importlib.util.find_spec

    def hidden(name, *args, **kwargs):
        return None if name == "openvino" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", hidden)
    _allowed.installed.cache_clear()
    try:
        assert pool.installed_backends() == [b for b in BACKENDS if b != "openvino"]
        assert resolve_backends("all") == pool.installed_backends()
        with pytest.raises(InvalidSpecError, match="installed and allowed"):
            pool.usable("openvino")
        assert set(SWEPT) <= set(pool.installed_backends())
    finally:
        monkeypatch.undo()
        _allowed.installed.cache_clear()
    assert "openvino" in pool.installed_backends()

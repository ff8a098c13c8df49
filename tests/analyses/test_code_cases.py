"""The cases of docs/guide/code.md ("My own code"), each run traced by ``dx.trace`` and untraced
under raw Keras in the same fresh process, on the backend the guide names: the dtypes and the
values the trace shows are what the code gives untraced. The cases of one backend share one
process (one Keras import each, not one per case)."""

from __future__ import annotations

import functools

import pytest

from tests.on_backend import json_on

_COMMON = r"""
import json, keras, numpy as np
import dtype_explorer as dx

def both(fn, truth):
    keras.utils.set_random_seed(0)
    raw = fn()
    keras.utils.set_random_seed(0)
    r = dx.trace(fn)
    got = r.value
    if isinstance(raw, str):  # a text model's generate(): the text is the value
        raw_dtype, equal, raw_values = None, raw == got, raw
    else:
        raw_np, got_np = (np.asarray(keras.ops.convert_to_numpy(v)) for v in (raw, got))
        raw_dtype = keras.backend.standardize_dtype(raw.dtype)
        equal = raw_np.dtype == got_np.dtype and raw_np.tobytes() == got_np.tobytes()
        raw_values = raw_np.reshape(-1)[:8].astype("float64").tolist()
    return {
        "raw_dtype": raw_dtype,
        "dtype": r.returned_dtype,
        "equal": equal,
        "raw_values": raw_values,
        "ops": [s.op for s in r.steps],
        "steps": [(s.op, [t.dtype for t in s.inputs], s.outcome, s.inside) for s in r.steps],
        "first_nonfinite": getattr(r.first_nonfinite_step(), "op", None),
        "changes": [(s.op, s.inputs[0].dtype if s.inputs else None, s.outcome)
                    for s in r.dtype_changes()],
        "status": r.status,
        "truth": truth() if truth is not None else None,
    }

def run(cases):
    out = {}
    for name, code in cases.items():
        namespace = {**globals()}
        exec(code, namespace)
        out[name] = both(namespace["case"], namespace.get("truth"))
    print(json.dumps(out))
"""

CASES = {
    "to_categorical": (
        "jax",
        "def case():\n    return keras.utils.to_categorical(np.ones(2), 2)\n",
    ),
    "scale_loss": (
        "jax",
        "def case():\n"
        "    opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD())\n"
        "    loss = keras.ops.convert_to_tensor(np.full((), 4.0, 'float16'))\n"
        "    return opt.scale_loss(loss)\n",
    ),
    "train_step": (
        "tensorflow",
        "import tensorflow as tf\n"
        "def case():\n"
        "    keras.config.set_dtype_policy('mixed_float16')\n"
        "    try:\n"
        "        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8),\n"
        "                                  keras.layers.Dense(1, dtype='float32')])\n"
        "        opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.01))\n"
        "        x, y = np.ones((2, 4), 'float32'), np.zeros((2, 1), 'float32')\n"
        "        with tf.GradientTape() as tape:\n"
        "            pred = model(x, training=True)\n"
        "            loss = keras.ops.mean(keras.ops.square(y - pred))\n"
        "            scaled = opt.scale_loss(loss)\n"
        "        grads = tape.gradient(scaled, model.trainable_variables)\n"
        "        opt.apply(grads, model.trainable_variables)\n"
        "        return loss\n"
        "    finally:\n"
        "        keras.config.set_dtype_policy('float32')\n",
    ),
    # a tiny GPT-2 made in code (a 6-token BPE vocabulary, one layer), bfloat16 weights;
    # torch's generate() runs eagerly, so the sampler's steps carry values
    "generate_bfloat16": (
        "torch",
        "import keras_hub\n"
        "VOCAB = {'<|endoftext|>': 0, 'a': 1, 'b': 2, 'Ġ': 3, 'Ġa': 4, 'Ġb': 5}\n"
        "def tiny_lm():\n"
        "    tokenizer = keras_hub.models.GPT2Tokenizer(vocabulary=VOCAB, merges=['Ġ a', 'Ġ b'])\n"
        "    preprocessor = keras_hub.models.GPT2CausalLMPreprocessor(\n"
        "        tokenizer, sequence_length=6)\n"
        "    backbone = keras_hub.models.GPT2Backbone(\n"
        "        vocabulary_size=6, num_layers=1, num_heads=1, hidden_dim=4, intermediate_dim=8,\n"
        "        max_sequence_length=8, dtype='bfloat16')\n"
        "    lm = keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=preprocessor)\n"
        "    lm.compile(sampler='greedy')\n"
        "    return lm\n"
        "def case():\n"
        "    return tiny_lm().generate('a b', max_length=5, stop_token_ids=None)\n"
        "def truth():  # raw keras-hub: the logits' dtype, the sampler's probabilities' dtype\n"
        "    keras.utils.set_random_seed(0)\n"
        "    lm = tiny_lm()\n"
        "    x, _, _ = lm.preprocessor(['a b'])\n"
        "    logits = lm(x)\n"
        "    probs = lm.sampler.compute_probabilities(logits)\n"
        "    token = lm.sampler.get_next_token(probs)\n"
        "    return [keras.backend.standardize_dtype(t.dtype) for t in (logits, probs, token)]\n",
    ),
    # a mixed_float16 model exported as a SavedModel and called back through TFSMLayer
    "export_tfsmlayer": (
        "tensorflow",
        "import os, tempfile\n"
        "def case():\n"
        "    model = keras.Sequential([keras.Input((4,)),\n"
        "                              keras.layers.Dense(3, dtype='mixed_float16')])\n"
        "    with tempfile.TemporaryDirectory() as tmp:\n"
        "        model.export(os.path.join(tmp, 'm'), verbose=False)\n"
        "        reloaded = keras.layers.TFSMLayer(os.path.join(tmp, 'm'), call_endpoint='serve')\n"
        "        return reloaded(np.ones((2, 4)))\n"
        "def truth():  # raw Keras: the reloaded layer's own policy\n"
        "    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])\n"
        "    with tempfile.TemporaryDirectory() as tmp:\n"
        "        model.export(os.path.join(tmp, 'm'), verbose=False)\n"
        "        layer = keras.layers.TFSMLayer(os.path.join(tmp, 'm'), call_endpoint='serve')\n"
        "        return [layer.compute_dtype]\n",
    ),
}


@functools.cache
def _ran(backend: str) -> dict:
    """Every case of ``backend``, traced and raw, in one fresh process."""
    cases = {name: code for name, (b, code) in CASES.items() if b == backend}
    return json_on(backend, _COMMON + f"run({cases!r})")


@pytest.mark.parametrize("name", list(CASES))
def test_the_guides_case_traced_equals_raw_keras(name):
    out = _ran(CASES[name][0])[name]
    assert out["status"] == "ok", out
    assert out["equal"] and out["dtype"] == out["raw_dtype"], out
    if name == "to_categorical":  # NumPy's path in Keras 3: float64, no Keras op at all
        assert out["raw_dtype"] == "float64" and out["ops"] == []
    elif name == "scale_loss":  # the float16 loss times the 2**15 scale overflows
        assert out["raw_dtype"] == "float16" and out["raw_values"] == [float("inf")]
        assert out["first_nonfinite"] is not None
    elif name == "train_step":  # the float16 Dense's output goes float32 at the float32 head
        assert out["raw_dtype"] == "float32"
        assert "Dense.__call__" in out["ops"] and "LossScaleOptimizer.__call__" not in out["ops"]
        assert any(i == "float16" and o == "float32" for _, i, o in out["changes"]), out
        ops = out["ops"]  # the loss scaling and the optimizer's step, named
        scale, apply = (
            ops.index("LossScaleOptimizer.scale_loss"),
            ops.index("LossScaleOptimizer.apply"),
        )
        assert scale < apply < ops.index("SGD.apply")
    elif name == "generate_bfloat16":
        _the_samplers_dtypes_are_raw_keras_hubs(out)
    else:
        _the_reloaded_layer_casts_in_and_the_saved_model_answers_float16(out)


def _the_samplers_dtypes_are_raw_keras_hubs(out: dict) -> None:
    """The sampler (inside ``ops.while_loop``) casts the model's logits to float32 before its
    softmax and takes the argmax: the dtypes raw keras-hub gives, the text the same."""
    logits, probs, token = out["truth"]
    assert (logits, probs) == ("bfloat16", "float32") and out["raw_dtype"] is None
    in_loop = [(op, ins, outcome) for op, ins, outcome, inside in out["steps"]
               if inside == "ops.while_loop"]  # fmt: skip
    cast = next(i for i, (op, ins, _) in enumerate(in_loop) if op == "ops.cast" and ins == [logits])
    assert in_loop[cast][2] == probs, in_loop[cast]
    assert ("ops.nn.softmax", [probs], probs) in in_loop[cast:]
    assert any(op == "ops.argmax" and outcome == token for op, _, outcome in in_loop[cast:])


def _the_reloaded_layer_casts_in_and_the_saved_model_answers_float16(out: dict) -> None:
    """TFSMLayer (its own policy float32, raw) casts the NumPy float64 input to float32; the
    exported mixed_float16 model's serving function answers float16 through it."""
    (policy,) = out["truth"]
    assert policy == "float32" and out["raw_dtype"] == "float16"
    steps = out["steps"]
    call = next(i for i, s in enumerate(steps) if s[0] == "TFSMLayer.__call__")
    assert steps[call][1:3] == [["float64"], "float16"]
    inside = [s for s in steps[call + 1 :] if s[3] == "TFSMLayer.__call__"]
    assert any(ins == ["float64"] and outcome == policy for _, ins, outcome, _ in inside), inside

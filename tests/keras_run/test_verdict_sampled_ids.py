"""A user's layer returning ``keras.random.categorical`` ids (issue 39 item 19): the policy's
compute dtype (float32) is the dtype of a layer's float computations, not of sampled ids, so
the int32 ids raw Keras returns are not a deviation from it. Raw Keras runs beside the tool:
the same sampler, called bare, gives the dtype the probe observes; a float computation in the
same kind of layer is still judged by the policy rule."""

from __future__ import annotations

import keras
import numpy as np
import pytest

import dtype_explorer as dx


class Sample(keras.layers.Layer):
    def call(self, logits):
        return keras.random.categorical(logits, 2, seed=1)


class Sampled(keras.layers.Layer):
    def call(self, logits):
        return keras.ops.cast(keras.random.categorical(logits, 2, seed=1), "float16")


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_sampled_ids_are_not_judged_by_the_policy_rule(policy):
    logits = np.zeros((2, 3), "float32")
    raw = keras.backend.standardize_dtype(keras.random.categorical(logits, 2, seed=1).dtype)
    r = dx.probe(Sample, policy=policy, values=[logits])
    assert r.status == "ok", r.error
    assert r.output_dtype == raw == "int32"
    assert r.verdict != "deviates"
    assert "policy" not in {e.source for e in r.expectations}
    assert any("sampled ids" in b for b in r.basis)


def test_a_float_output_made_from_ids_is_still_judged_by_the_policy_rule():
    # raw Keras: the cast gives float16, the layer's compute dtype is float32
    r = dx.probe(Sampled, values=[np.zeros((2, 3), "float32")])
    assert r.status == "ok", r.error
    assert r.output_dtype == "float16"
    assert r.verdict == "deviates"

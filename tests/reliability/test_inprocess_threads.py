"""In-process probes and audits from several threads at once. Keras keeps floatx and the
global dtype policy per process, so each probe sets them for its own run: without taking
turns, threads saw each other's settings and answered wrongly. The answers from threads must
equal the answers given one at a time, and the kernel's own settings must be as they were.
"""

from __future__ import annotations

import concurrent.futures
import time

import keras

import dtype_explorer as dx


class SlowDoubles(keras.layers.Layer):
    """Doubles its input, slowly (while it waits, other threads run): in ``__init__`` before
    the policy is read, and in ``call``."""

    def __init__(self, **kwargs):
        time.sleep(0.03)
        super().__init__(**kwargs)

    def call(self, x):
        time.sleep(0.03)
        return x * 2


#: (policy, floatx) per thread: every answer depends on one or the other.
QUESTIONS = [
    ("float32", None),
    ("mixed_float16", None),
    ("bfloat16", None),
    (None, "float16"),
    (None, "float64"),
    ("mixed_bfloat16", "float64"),
]


def ask(policy, floatx):
    r = dx.probe(SlowDoubles, input_dtype="float32", policy=policy, floatx=floatx)
    return r.output_dtype, r.documented_dtype, [s.dtype for s in r.cast_path], r.status


def model() -> keras.Model:
    inputs = keras.Input((4,), dtype="float32")
    hidden = keras.layers.Dense(3)(inputs)
    return keras.Model(inputs, keras.layers.Dense(2)(hidden))


def audit(net: keras.Model):
    report = dx.check_model(net, policy="mixed_float16")
    return [call.row() for call in report.layers], [f.kind for f in report.findings]


def test_threads_probing_in_process_get_the_answers_of_one_at_a_time():
    floatx, policy = keras.config.floatx(), keras.config.dtype_policy().name
    serial = [ask(*q) for q in QUESTIONS]
    net = model()
    serial_audit = audit(net)
    with concurrent.futures.ThreadPoolExecutor(len(QUESTIONS) + 1) as threads:
        for _ in range(2):
            audited = threads.submit(audit, net)
            futures = [threads.submit(ask, *q) for q in QUESTIONS]
            assert [f.result(timeout=300) for f in futures] == serial
            assert audited.result(timeout=300) == serial_audit
    assert (keras.config.floatx(), keras.config.dtype_policy().name) == (floatx, policy)

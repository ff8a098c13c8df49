"""A layer that takes float32 only (a ``TFSMLayer`` around a SavedModel whose signature is
float32) in a ``mixed_float16`` model: its fix, the layer in float32, is run on a copy and shown
proven. Keras refuses to make a ``TFSMLayer`` from a config in safe mode; the copy is made from
the user's own live layers, outside it (``model/_proven_fix.remade_as_built``). Raw Keras beside
it: the model as built raises, the fixed one by hand runs."""

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).with_name("tfsm_fix_script.py")


def test_a_float32_only_savedmodel_layer_gets_a_proven_fix_raw_keras_confirms():
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert facts["raw_as_built"].startswith("raised"), facts  # the bug is real
    assert facts["raw_fixed"] == "float32", facts  # the fix works by hand
    assert facts["proven"] and facts["layers"] == ["transfer/pretrained"], facts
    assert 'dtype="float32"' in facts["fix"] and facts["after"] is False, facts

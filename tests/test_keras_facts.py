"""The snapshot of Keras's facts the front ends validate with: every fact is Keras's own."""

import json

import keras
import pytest
from keras.src.backend.common import dtypes as keras_dtypes

from dtype_explorer import keras_facts

#: Names Keras accepts and refuses, of every kind its rule knows.
POLICIES = (
    "float32",
    "bfloat16",
    "mixed_float16",
    "mixed_bfloat16",
    "int",
    "uint8",
    "string",
    "float8_e4m3fn",
    "int8_from_float32",
    "int8_from_float16",
    "int8_from_mixed_bfloat16",
    "float8_from_float32",
    "int4_from_float32",
    "int4/128_from_float32",
    "gptq_from_float32",
    "awq_from_mixed_float16",
    "torch.float32",
    "mixed_flaot16",
    "float33",
    "FLOAT32",
    "",
)


def _keras_accepts(name):
    try:
        keras.dtype_policies.get(name)
    except (ValueError, TypeError):
        return False
    return True


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv(keras_facts.ENV_DIR, str(tmp_path))
    monkeypatch.setattr(keras_facts, "_made", {})
    return tmp_path


def test_the_snapshot_says_what_keras_says(fresh):
    assert keras_facts.allowed_dtypes() == tuple(keras_dtypes.ALLOWED_DTYPES)
    said = {name: keras_facts.policy_accepted(name) for name in POLICIES}
    assert said == {name: _keras_accepts(name) for name in POLICIES}
    (written,) = fresh.glob("keras-facts-*.json")
    assert json.loads(written.read_text())["keras"] == keras.__version__


def test_a_tampered_snapshot_is_ignored_and_replaced(fresh):
    path = keras_facts.snapshot_path()
    path.write_text(json.dumps({"format": 1, "keras": keras.__version__, "allowed_dtypes": [1]}))
    assert keras_facts.allowed_dtypes() == tuple(keras_dtypes.ALLOWED_DTYPES)
    path.write_text("{not json")
    assert keras_facts.policy_accepted("mixed_float16")
    assert json.loads(path.read_text())["allowed_dtypes"] == list(keras_dtypes.ALLOWED_DTYPES)


def test_the_keras_version_follows_what_is_installed(tmp_path, monkeypatch):
    """The version asked before every probe is read once, and read again (as importlib.metadata
    finds it) when another Keras comes first on sys.path, is reinstalled in place, or goes."""
    import importlib.metadata

    assert keras_facts.keras_version() == keras.__version__
    info = tmp_path / "keras-9.9.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: keras\nVersion: 9.9.1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert keras_facts.keras_version() == importlib.metadata.version("keras") == "9.9.1"
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: keras\nVersion: 9.10.22\n")
    assert keras_facts.keras_version() == importlib.metadata.version("keras") == "9.10.22"
    (info / "METADATA").unlink()
    info.rmdir()
    importlib.invalidate_caches()
    assert keras_facts.keras_version() == importlib.metadata.version("keras") == keras.__version__

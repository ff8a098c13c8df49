"""Test session setup: the in-process backend is TensorFlow (Keras's default) unless
KERAS_BACKEND says otherwise; the other backends are reached through real worker processes.
Each session gets a fresh, empty result cache, removed at the end."""

import os
import shutil
import tempfile

import pytest

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# One worker per backend unless a test asks for more (tests/runtime/test_pool_scale.py): the
# fault tests name the one worker's log, whatever the machine's cores.
os.environ.setdefault("DTYPE_EXPLORER_WORKERS_PER_BACKEND", "1")
_CACHE_DIR = tempfile.mkdtemp(prefix="dx-test-cache-")
os.environ["DTYPE_EXPLORER_CACHE_DIR"] = _CACHE_DIR


@pytest.fixture(scope="session", autouse=True)
def _fresh_cache_and_workers():
    yield
    from dtype_explorer import pool

    pool.shutdown()
    shutil.rmtree(_CACHE_DIR, ignore_errors=True)


@pytest.fixture(scope="module")
def shell():
    """A real IPython shell with ``%load_ext dtype_explorer`` done (``%dtype_check`` tests)."""
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "dtype_explorer")
    return ip

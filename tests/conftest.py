"""Test session setup: the in-process backend is TensorFlow (Keras's default) unless
KERAS_BACKEND says otherwise; the other backends are reached through real worker processes.
Each session gets a fresh, empty result cache and cache key, removed at the end."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# One worker per backend unless a test asks for more (tests/runtime/test_pool_scale.py): the
# fault tests name the one worker's log, whatever the machine's cores.
os.environ.setdefault("DTYPE_EXPLORER_WORKERS_PER_BACKEND", "1")
_CACHE_DIR = tempfile.mkdtemp(prefix="dx-test-cache-")
os.environ["DTYPE_EXPLORER_CACHE_DIR"] = _CACHE_DIR
# The cache's signing key too: never the real user's (in their config directory).
_KEY_DIR = tempfile.mkdtemp(prefix="dx-test-key-")
os.environ["DTYPE_EXPLORER_CACHE_KEY_FILE"] = os.path.join(_KEY_DIR, "cache.key")
# The Keras 2 engine registers a Jupyter kernel (user=True): into a temporary data dir, never
# the real user's.
_JUPYTER_DIR = tempfile.mkdtemp(prefix="dx-test-jupyter-")
os.environ["JUPYTER_DATA_DIR"] = _JUPYTER_DIR
# The browser tests' Chromium (tests/frontends/browser, tests/docs): Debian's, never downloaded.
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session", autouse=True)
def _fresh_cache_and_workers():
    yield
    from dtype_explorer import pool

    pool.shutdown()
    shutil.rmtree(_CACHE_DIR, ignore_errors=True)
    shutil.rmtree(_KEY_DIR, ignore_errors=True)
    shutil.rmtree(_JUPYTER_DIR, ignore_errors=True)


@pytest.fixture(scope="module")
def shell():
    """A real IPython shell with ``%load_ext dtype_explorer`` done (``%dtype_check`` tests)."""
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "dtype_explorer")
    return ip


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium (never a downloaded one), headless, driven by Playwright; a missing
    Chromium or playwright fails the test, never skips it."""
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: apt-get install -y chromium"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        yield chromium
        chromium.close()


def _created_engine(spec: str):
    """An engine created once per session (in the session's cache dir); creating one needs the
    package index: when it cannot be reached the test fails (never skips), saying so."""
    from dtype_explorer import engines

    try:
        return engines.create(spec, progress=False)
    except engines.EngineError as exc:
        pytest.fail(f"creating the engine {spec} needs the package index (pip): {exc}")


@pytest.fixture(scope="session")
def keras_3_11_engine():
    """Keras 3.11.3 layered over the installed backends: the last release before 3.12.0, whose
    Discretization(dtype="float32") answers float32 where 3.12.0 on answer int32."""
    return _created_engine("keras==3.11.3")


@pytest.fixture(scope="session")
def tf_keras_engine():
    """Keras 2: the tf_keras release matching the installed tensorflow (installed in CI:
    a missing tensorflow fails here, never skips)."""
    import tensorflow  # noqa: F401

    return _created_engine("tf_keras")


@pytest.fixture(scope="session")
def keras_3_2_engine():
    """Keras 3.2.1: a release whose ``keras.tree`` lacks ``flatten_with_path`` (3.1.x-3.5.x)
    and whose tree lives in ``keras.src.utils.tree``."""
    return _created_engine("keras==3.2.1")


@pytest.fixture(scope="session")
def keras_3_4_engine():
    """Keras 3.4.1: ``keras.src.tree`` without ``flatten_with_path``."""
    return _created_engine("keras==3.4.1")


@pytest.fixture(scope="session")
def keras_3_5_engine():
    """Keras 3.5.0: the last release without ``keras.tree.flatten_with_path``."""
    return _created_engine("keras==3.5.0")


# Scripts the tests run in other processes (a Keras 2 engine's Python, a plain tf_keras run):
# never imported here, not even by --doctest-modules.
collect_ignore_glob = ["*_script.py"]

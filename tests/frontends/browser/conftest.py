"""A real JupyterLab server and a real marimo server on localhost, for Debian's Chromium driven
by Playwright (the ``browser`` fixture of tests/conftest.py, shared with the docs site's tests).

The servers run from this virtual environment (so their kernels run this Python, with
dtype_explorer importable), in throwaway directories. Screenshots and timings go to
``test-artifacts/`` at the repository root.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
STARTUP_S = 90


@dataclass(frozen=True)
class Lab:
    url: str
    token: str
    root: Path

    def open_url(self, path: str, workspace: str | None = None) -> str:
        """The URL that opens notebook ``path`` in JupyterLab (in a workspace of its own, with
        only that notebook's tab, when ``workspace`` is named)."""
        lab = f"/lab/workspaces/{workspace}" if workspace else "/lab"
        return f"{self.url}{lab}/tree/{path}?token={self.token}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def _served(
    what: str, command: list[str], env: dict, base: Path, health: str, cwd: Path | None = None
) -> Iterator[None]:
    """``command`` run as a server (its output in ``base/server.log``) until ``health``
    answers, or a ``RuntimeError`` with the log's end when it exits or takes longer than
    :data:`STARTUP_S`; stopped on exit."""
    log = (base / "server.log").open("w")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=cwd)
    deadline = time.monotonic() + STARTUP_S
    while True:
        try:
            with urllib.request.urlopen(health, timeout=2):
                break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                log.close()
                raise RuntimeError(
                    f"{what} did not start:\n{(base / 'server.log').read_text()[-3000:]}"
                ) from None
            time.sleep(0.5)
    try:
        yield
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    path = ROOT / "test-artifacts"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """JupyterLab 4 from this environment, on a free port with a random token."""
    base = tmp_path_factory.mktemp("lab")
    root, config = base / "root", base / "config"
    (config / "labconfig").mkdir(parents=True)
    root.mkdir()
    # No news pop-up, no update check: the page shows only what the test opens.
    (config / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(config),
        "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        "JUPYTER_DATA_DIR": str(base / "data"),  # no user kernelspecs: the kernel is this Python
        "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"),
        "KERAS_BACKEND": "jax",  # the kernel's own Keras; probes run in the workers
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
        "--ServerApp.allow_root=True", "--LabApp.extension_manager=readonly",
        f"--LabApp.workspaces_dir={base / 'workspaces'}",
        # ``window.jupyterapp``, in JupyterLab and in Notebook 7: a test waits on a notebook's
        # kernel being connected, rather than guessing it from the status bar
        "--LabApp.expose_app_in_browser=True", "--JupyterNotebookApp.expose_app_in_browser=True",
    ]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    with _served("JupyterLab", command, env, base, f"{url}/api/status?token={token}"):
        yield Lab(url=url, token=token, root=root)


@dataclass(frozen=True)
class Marimo:
    url: str
    token: str

    def open_url(self, query: str = "") -> str:
        return f"{self.url}/?access_token={self.token}{query}"


#: The marimo example notebook, as a user runs it.
MARIMO_NOTEBOOK = ROOT / "notebooks" / "explorer_marimo.py"


@pytest.fixture(scope="module")
def marimo_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Marimo]:
    """``marimo run notebooks/explorer_marimo.py`` from this environment, headless, on a free
    port with a random token, its probes on numpy only (``$DTYPE_EXPLORER_BACKENDS``). A
    missing marimo fails the test (the ``test`` extra installs it), never skips it."""
    assert importlib.util.find_spec("marimo") is not None, (
        "marimo is missing: pip install -e '.[test]' installs it (the marimo extra)"
    )
    base = tmp_path_factory.mktemp("marimo")
    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(base / "config"),  # no user's marimo.toml: its defaults
        "XDG_STATE_HOME": str(base / "state"),
        "XDG_CACHE_HOME": str(base / "cache"),
        "KERAS_BACKEND": "numpy",  # the kernel's own Keras; probes run in the workers
        "DTYPE_EXPLORER_BACKENDS": "numpy",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    command = [
        sys.executable, "-m", "marimo", "run", str(MARIMO_NOTEBOOK), "--headless",
        f"--port={port}", "--host=127.0.0.1", "--token", f"--token-password={token}",
        "--no-sandbox",
    ]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    with _served("marimo", command, env, base, f"{url}/health", cwd=base):
        yield Marimo(url=url, token=token)

"""Run a short script under another Keras backend in a fresh process (Keras fixes its backend
at import) and read the JSON line it prints last: what tests that compare backends share.

A script runs as ``python -c script`` would, with ``KERAS_BACKEND`` set, in a process of its
own, but that process is forked from a *raw-Keras server*: a plain Python (no dtype-explorer)
that imported Keras on that backend once and then only forks, one child per script. A test
file that asks for raw Keras twenty times pays Keras's import (2 to 5 s of CPU) once, not
twenty times. The child is a fresh process as far as Keras can tell: nothing has run in the
server but ``import keras``, each child exits as a script does (``atexit`` and all), and
its output, exit status and time limit are a subprocess's. A script that runs another
release (``site``), or on openvino, still gets a process started from nothing.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = str(Path(__file__).resolve().parents[1])
#: Backends whose raw-Keras server forks children; others start each script from nothing.
FORKED = frozenset({"jax", "numpy", "tensorflow", "torch"})

#: What the command line of a raw-Keras server (and of each child it forks) holds: its first
#: line.
SERVER_MARK = "# dtype-explorer's tests: a raw-Keras server"
# The server: imports Keras, then for each request line ({"script", "cwd", "env", "out",
# "err"}) forks a child that runs the script as `python -c` would, in that folder and
# environment, and answers its pid, then its exit status. Requests come on stdin; answers go
# out on the stdout it had at start (the children write to files of their own).
SERVER = (
    f"{SERVER_MARK}\n"
    + r"""import json, os, sys
answers = os.fdopen(os.dup(1), "w")
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 1)
import keras  # the one import the children share
answers.write("ready\n"); answers.flush()

def child(request):
    answers.close()
    os.dup2(null, 0)
    for fd, path in ((1, request["out"]), (2, request["err"])):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = ["-c"]
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    exec(compile(request["script"], "<string>", "exec"), namespace)

for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        child(request)
        sys.exit(0)  # as the script's own end: atexit handlers run, streams are flushed
    answers.write(f"{pid}\n"); answers.flush()
    _, status = os.waitpid(pid, 0)
    answers.write(f"{os.waitstatus_to_exitcode(status)}\n"); answers.flush()
"""
)


def is_raw_server(command_line: str) -> bool:
    """Whether a process with ``command_line`` is a raw-Keras server of these tests (or its
    child): a helper of the tests, never a process the tool started."""
    return SERVER_MARK in command_line


def tool_children() -> list[psutil.Process]:
    """Child processes of this process (at any depth) that the tool started: all but Python's
    multiprocessing resource tracker (one per interpreter, ending with it; not a worker) and
    the raw-Keras servers of these tests."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            line = " ".join(child.cmdline())
        except psutil.NoSuchProcess:
            continue
        if "resource_tracker" not in line and not is_raw_server(line):
            found.append(child)
    return found


class _Server:
    """One raw-Keras server: a process that imported Keras under ``env`` and forks."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.lock = threading.Lock()
        self.pending = b""  # what was read of the answers past the last whole line
        try:
            ready = self._line(300)
        except (TimeoutError, RuntimeError):
            ready = "no answer"
        if ready != "ready":
            self.close()
            raise RuntimeError(f"the raw-Keras server did not start: {ready!r}")

    def _line(self, timeout: float) -> str:
        """The server's next answer line, read from its pipe unbuffered (a buffered read could
        hold the next line where ``select`` does not see it); ``TimeoutError`` past
        ``timeout`` seconds, ``RuntimeError`` when the server has ended."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self.pending:
            readable, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not readable:
                raise TimeoutError
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError(f"the raw-Keras server ended ({self.process.wait()})")
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode().strip()

    def run(self, script: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
        """``script`` run in a forked child with environment ``env``; raises
        ``subprocess.TimeoutExpired`` (the child killed) as ``subprocess.run`` does."""
        assert self.process.stdin is not None
        args = [sys.executable, "-c", script]
        with self.lock, tempfile.TemporaryDirectory(prefix="dx-raw-") as folder:
            out, err = Path(folder, "out"), Path(folder, "err")
            request = {
                "script": script,
                "cwd": os.getcwd(),
                "env": env,
                "out": str(out),
                "err": str(err),
            }
            self.process.stdin.write(json.dumps(request).encode() + b"\n")
            self.process.stdin.flush()
            pid = int(self._line(60))
            try:
                code = int(self._line(timeout))
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                self._line(60)
                raise subprocess.TimeoutExpired(args, timeout) from None
            read = {"errors": "replace"}
            return subprocess.CompletedProcess(
                args, code, out.read_text(**read), err.read_text(**read)
            )

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


#: This process's servers, one per backend (the newest environment asked for).
_servers: dict[str, tuple[dict[str, str], _Server]] = {}


def _import_env(env: dict[str, str]) -> dict[str, str]:
    """What of ``env`` Keras's import may read: all but pytest's own per-test variables and
    dtype-explorer's settings (a test's own cache folder, say), which raw Keras never reads.
    The child gets the whole of ``env``."""
    return {k: v for k, v in env.items() if not k.startswith(("PYTEST_", "DTYPE_EXPLORER_"))}


def _server(backend: str, env: dict[str, str]) -> _Server:
    """The server that imported Keras on ``backend`` under ``env`` (as its import reads it)."""
    key = _import_env(env)
    held = _servers.get(backend)
    if held is not None and held[0] == key and held[1].alive():
        return held[1]
    if held is not None:
        held[1].close()
    server = _Server(key)
    _servers[backend] = (key, server)
    return server


@atexit.register
def _close_servers() -> None:
    for _, server in _servers.values():
        server.close()
    _servers.clear()


def json_on(backend: str, script: str, timeout: float = 300, *, site: str | None = None) -> Any:
    """``script`` run with ``KERAS_BACKEND=backend`` (this checkout first on the path, then
    the session's own ``PYTHONPATH``; with ``site``, an engine's directory alone instead: that
    Keras release, raw, no dtype-explorer); the JSON document on its last line of output. A
    failed run fails the test with its stderr."""
    path = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": path if site is None else site}
    if site is None and backend in FORKED:
        done = _server(backend, env).run(script, env, timeout)
    else:
        done = subprocess.run(
            [sys.executable, "-c", script],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])

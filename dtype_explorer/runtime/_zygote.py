"""Worker starts without importing a backend again: a *zygote* per backend (and per engine), a
process that imported Keras on that backend once and forks each new worker from there.

A spawned worker spends its start importing its backend: 2-2.5 s of CPU for jax or numpy,
4-5.5 s for torch or TensorFlow (``python -c "import keras"``), which a kernel pays again for
every worker it replaces (the user's traced code, a changed setting, a memory budget) and
every new group. A worker forked from a zygote starts in ~0.1 s: it inherits the imported
modules and still runs ``_worker.init`` itself (its log, its device, its baseline of Keras's
settings, its parent watch), so what it answers is what a spawned worker answers.

What the zygote is and is not:

- It imports (the worker's own imports: Keras on its backend, kept from pandas and IPython,
  and dtype-explorer's ``keras_run``) and then only forks: it never runs a probe, user code,
  a backend's device set-up or a first op (no backend runtime, no thread pools of its own).
- One per *key*: the backend, the engine (``None``: the installed Keras), the environment
  (all of it but dtype-explorer's own ``DTYPE_EXPLORER_*`` and pytest's ``PYTEST_*``, which
  no import reads), the ``sys.path`` and the settings Keras reads at import
  (``versions.settings()``). A worker asked under
  another key gets another zygote, and each worker takes the kernel's environment as it was
  when the worker was asked for (as a spawned one does), so a fork starts under exactly what
  a spawn would have started under.
- It exits when the kernel does (it watches a pipe only the kernel holds), and on
  ``pool.shutdown()`` once every worker is stopped; a worker watches its zygote (its parent)
  and exits with it.
- An engine's workers (a Keras release, ``tf_keras``) have their own zygote per engine and
  backend (the engine is part of the key: a recreated engine gets a new one), made at the
  second worker start of that key, the first being spawned: an engine's workers often start
  once (a bisect asks each release once), and a zygote beside a worker that is never replaced
  is memory spent for nothing (98-294 MiB PSS a backend, ``benchmarks/README.md``). It enters the
  engine as a spawned engine worker does, before importing anything: nothing of Keras or
  TensorFlow imported yet, the engine's files checked against its signed record, its
  directory first on ``sys.path`` (``TF_USE_LEGACY_KERAS=1`` for ``tf_keras``); then imports
  the engine's Keras and checks it came from there (``_site.enter_in_zygote``). Each
  worker it forks checks the engine's files again at its own start, as a spawned one does.
- Linux only, where ``fork`` after these imports is what multiprocessing itself did by
  default until Python 3.14; on macOS and Windows, under Python 3.14 and later (whose
  forkserver protocol differs), when the zygote's imports fail or do not finish within the
  start deadline (a changed engine file among them: the spawned worker then reports it), and
  with ``DTYPE_EXPLORER_WORKER_START=spawn``, workers are spawned as before
  (:data:`WORKER_START` names the choice).

The protocol between the kernel and the zygote is the standard library's forkserver (its
``main`` serves, a ``ForkServer``'s ``connect_to_new_process`` asks, ``popen_forkserver``
reads the worker's pid and exit code), so the pickling of pebble's channels and the
preparation data (``sys.path``, the working directory, the process name) are multiprocessing's
own; only the zygote's launch is ours: its environment, its imports, and its ready signal.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import select
import socket
import subprocess
import sys
import threading
import weakref
from multiprocessing import (
    connection,
    context,
    forkserver,
    popen_forkserver,
    reduction,
    resource_tracker,
    spawn,
    util,
)
from pathlib import Path
from typing import Any

from dtype_explorer import keras_run
from dtype_explorer.runtime import _site as site_files
from dtype_explorer.runtime import _worker as worker
from dtype_explorer.runtime._gpu import share_gpu
from dtype_explorer.versions import settings

#: How workers start: ``"zygote"`` (forked from a zygote where that works) or ``"spawn"``.
WORKER_START_VARIABLE = "DTYPE_EXPLORER_WORKER_START"
#: The environment variables no import reads (dtype-explorer's own, read when used; pytest's):
#: left out of a zygote's key, and the worker gets the kernel's own values (``_worker.init``).
_NOT_READ_BY_KERAS = ("DTYPE_EXPLORER_", "PYTEST_")
#: At most this many zygotes at once; beyond it (and none of them idle), workers spawn.
MAX_ZYGOTES = 6
#: What a zygote says on its ready pipe once its imports are done, or failed (:func:`serve`).
READY, FAILED = b"R", b"F"


def available() -> bool:
    """Whether workers can start from a zygote here (see the module docstring)."""
    if sys.platform != "linux" or sys.version_info >= (3, 14):
        return False
    return os.environ.get(WORKER_START_VARIABLE, "zygote").strip().lower() != "spawn"


# ------------------------------------------------------------------------ in the zygote


def serve(
    listener_fd: int,
    alive_r: int,
    ready_w: int,
    backend: str,
    path: list[str],
    engine: str | None = None,
) -> None:
    """A zygote's life (its ``python -c`` entry): import what a worker imports (from the
    kernel's ``sys.path``, ``path``; an engine's Keras from its directory, ``engine``: its
    ``Engine`` as JSON), say ready (or failed) on ``ready_w``, then fork workers until the
    kernel's end of ``alive_r`` closes."""
    sys.path[:] = path
    os.environ[worker.ZYGOTE_VARIABLE] = str(os.getpid())
    # 1. The imports a worker makes (``_worker.init``), no more: no device, no first op.
    os.environ["KERAS_BACKEND"] = backend
    share_gpu(backend)
    try:
        with worker.kept_out_of_workers():
            if engine is not None:  # entered as a spawned engine worker enters it
                site_files.enter_in_zygote(json.loads(engine), backend)
            else:
                import keras

                if keras.backend.backend() != backend:
                    raise ImportError(f"Keras imported on {keras.backend.backend()}")
    except BaseException:  # the worker's own start reports it: spawned, as before
        os.write(ready_w, FAILED)
        os._exit(1)
    # 2. What the imports left is shared by every worker forked from here: frozen, so that
    # neither this process's collections nor the workers' walk (and copy) it.
    keras_run.freeze_for_good()
    os.write(ready_w, READY)
    os.close(ready_w)
    # 3. Serve: the standard library's forkserver loop; it exits when ``alive_r`` reaches EOF.
    forkserver.main(listener_fd, alive_r, [], main_path=None, sys_path=None)


# ------------------------------------------------------------------------ in the kernel


class Zygote:
    """One running zygote: its process, its address, the kernel's end of its alive pipe."""

    def __init__(
        self, key: str, backend: str, log: Path, engine: dict[str, Any] | None = None
    ) -> None:
        self.key = key
        self.backend = backend
        self.engine = engine
        #: It said its imports failed (:func:`serve`): its key's workers spawn from then on.
        self.failed = False
        self.children: weakref.WeakSet[Any] = weakref.WeakSet()
        self._server = forkserver.ForkServer()
        self._dummy_alive = os.open(os.devnull, os.O_RDONLY)
        self._ready: bool | None = None
        self._ready_lock = threading.Lock()
        #: The kernel's descriptors of it still open (:meth:`_close_fds`), and whether
        #: :meth:`ready` is reading ``_ready_r`` now (closed by it, then).
        self._open: set[int] = {self._dummy_alive}
        self._fds_lock = threading.Lock()
        self._reading = self._closed = False
        resource_tracker.ensure_running()
        with socket.socket(socket.AF_UNIX) as listener:
            address = connection.arbitrary_address("AF_UNIX")
            listener.bind(address)
            if not util.is_abstract_socket_namespace(address):
                os.chmod(address, 0o600)
            listener.listen()
            alive_r, self._alive_w = os.pipe()
            self._ready_r, ready_w = os.pipe()
            self._open |= {self._alive_w, self._ready_r}
            fds = [listener.fileno(), alive_r, ready_w]
            command = (
                "from dtype_explorer.runtime._zygote import serve; "
                f"serve({listener.fileno()}, {alive_r}, {ready_w}, "
                f"{backend!r}, {sys.path!r}, "
                f"{None if engine is None else json.dumps(engine)!r})"
            )
            log.parent.mkdir(parents=True, exist_ok=True)
            python = spawn.get_executable()
            try:
                with log.open("ab") as out:
                    self.process = subprocess.Popen(
                        [python, *util._args_from_interpreter_flags(), "-c", command],
                        pass_fds=fds,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=out,
                        env={**os.environ, "KERAS_BACKEND": backend},
                    )
            finally:
                os.close(alive_r)
                os.close(ready_w)
        # What ``ForkServer.connect_to_new_process`` reads. The alive fd it hands every worker
        # is a placeholder: the real one is the kernel's alone, so the zygote exits with it.
        self._server._forkserver_address = address
        self._server._forkserver_alive_fd = self._dummy_alive
        self._server._forkserver_pid = self.process.pid

    def ready(self, timeout: float | None) -> bool:
        """Whether the zygote finished its imports (waits up to ``timeout`` seconds); ``False``
        once it is closed."""
        with self._ready_lock:
            if self._ready is None:
                with self._fds_lock:  # not once closed: its number may be another pipe's
                    self._reading = self._ready_r in self._open
                readable, said = [], b""
                try:
                    if self._reading:  # a close meanwhile kills it: this read ends at EOF
                        readable, _, _ = select.select([self._ready_r], [], [], timeout)
                        said = os.read(self._ready_r, 1) if readable else b""
                except (OSError, ValueError):
                    readable, said = [], b""
                finally:
                    with self._fds_lock:
                        self._reading = False
                    if self._closed or not readable:
                        self.close()  # closed meanwhile: its pipe now; still importing: given up
                self._ready = said == READY
                self.failed = said == FAILED
            return self._ready and self.process.poll() is None

    def connect(self, fds: list[int]) -> tuple[int, int]:
        return self._server.connect_to_new_process(fds)

    def _close_fds(self) -> None:
        """Close the kernel's descriptors of the zygote that are still open, each once; the
        ready pipe is left to :meth:`ready` while it reads it."""
        with self._fds_lock:
            self._closed = True
            closing = {fd for fd in self._open if not (self._reading and fd == self._ready_r)}
            self._open -= closing
        for fd in closing:
            with contextlib.suppress(OSError):
                os.close(fd)

    def idle(self) -> bool:
        """Whether every worker it forked is known to have ended (their exit codes, read by the
        pool that owns them; reading them here could race that pool for the one message)."""
        return all(child.returncode is not None for child in list(self.children))

    def close(self) -> None:
        """End the zygote (its workers, if any are left, exit with it). Called again (a zygote
        given up on while importing, then replaced, then shut down), it closes no descriptor:
        their numbers may be other pipes' by then (a pool's channels: closed twice, that pool
        broke and the next worker "died before answering")."""
        self._close_fds()
        with contextlib.suppress(OSError):
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)


_lock = threading.Lock()
_zygotes: dict[str, Zygote] = {}
#: The keys of the engines' workers started so far in this process (a shutdown keeps them):
#: the second start of one makes its zygote.
_engine_keys_started: set[str] = set()
#: The keys whose zygote said its imports failed: their workers spawn (and report why).
_failed_keys: set[str] = set()


def key_of(backend: str, engine: dict[str, Any] | None = None) -> str:
    """The key of the zygote a worker of ``backend`` (and ``engine``, an ``Engine``'s dict)
    started now would come from."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(_NOT_READ_BY_KERAS)}
    facts = [backend, sorted(environment.items()), sys.path, settings(), engine]
    return hashlib.sha256(json.dumps(facts, default=str).encode()).hexdigest()[:16]


def zygote_for(backend: str, log: Path, engine: dict[str, Any] | None = None) -> Zygote | None:
    """The zygote for a worker of ``backend`` (and ``engine``) started now: a running one of
    this key, a new one, or ``None`` (the worker spawns): for the first worker of an engine's
    key in this process, for a key whose zygote said its imports failed (a changed engine
    file, a backend that does not import: the spawned worker reports it, and no zygote is
    made again for it), and when :data:`MAX_ZYGOTES` run and none is idle."""
    key = key_of(backend, engine)
    with _lock:
        if key in _failed_keys:
            return None
        found = _zygotes.get(key)
        if found is not None and found.process.poll() is None:
            return found
        if engine is not None and key not in _engine_keys_started:
            _engine_keys_started.add(key)
            return None
        if found is not None:
            _zygotes.pop(key).close()
            if found.failed:
                _failed_keys.add(key)
                return None
        if len(_zygotes) >= MAX_ZYGOTES:
            idle = [k for k, z in _zygotes.items() if z.idle()]
            if not idle:
                return None
            _zygotes.pop(idle[0]).close()
        made = _zygotes[key] = Zygote(key, backend, log, engine)
        return made


def close_all(engine: str | None = None) -> None:
    """End every zygote (``pool.shutdown``, also run at exit, after stopping the workers; a
    zygote left running would still end with this process: its alive pipe closes); with
    ``engine`` (a pinned spec), only that engine's (``pool.stop_engine``, and before the
    engine is removed)."""
    with _lock:
        doomed = {
            key: found
            for key, found in _zygotes.items()
            if engine is None or (found.engine or {}).get("spec") == engine
        }
        for key in doomed:
            del _zygotes[key]
        if engine is None:  # a full shutdown starts over: a failed key is tried again
            _failed_keys.clear()
    for zygote in doomed.values():
        zygote.close()


class ZygotePopen(popen_forkserver.Popen):
    """A worker forked by ``zygote``: the standard forkserver launch, asking that zygote."""

    def __init__(self, process_obj: Any, zygote: Zygote) -> None:
        self.zygote = zygote
        super().__init__(process_obj)

    def _launch(self, process_obj: Any) -> None:
        prep_data = spawn.get_preparation_data(process_obj._name)
        buf = io.BytesIO()
        context.set_spawning_popen(self)
        try:
            reduction.dump(prep_data, buf)
            reduction.dump(process_obj, buf)
        finally:
            context.set_spawning_popen(None)
        self.sentinel, w = self.zygote.connect(self._fds)
        parent_w = os.dup(w)
        self.finalizer = util.Finalize(self, util.close_fds, (parent_w, self.sentinel))
        with open(w, "wb", closefd=True) as f:
            f.write(buf.getbuffer())
        self.pid = forkserver.read_signed(self.sentinel)
        self.zygote.children.add(self)

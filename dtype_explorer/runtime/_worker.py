"""Code that runs inside a worker process: one Keras backend per process, for its whole life.

Keras fixes its backend when it is first imported, so :func:`init` sets ``KERAS_BACKEND`` and
the GPU-sharing settings before anything imports Keras; this module itself imports Keras only
inside functions. The kernel talks to it through :mod:`dtype_explorer.runtime.pool`.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import pickle
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dtype_explorer import keras_facts, keras_run
from dtype_explorer.records import Engine, ErrorInfo, ProbeResult, ProbeSpec
from dtype_explorer.runtime import _call_trust as call_trust
from dtype_explorer.runtime import _site as site_files
from dtype_explorer.runtime import _sizing as sizing
from dtype_explorer.runtime import _user_source as user_source
from dtype_explorer.runtime import _worker_log as worker_log
from dtype_explorer.runtime._gpu import share_gpu
from dtype_explorer.runtime._kept_warnings import kept_warnings
from dtype_explorer.versions import versions

_state: dict[str, Any] = {
    "backend": None,
    "device": "unknown",
    "init_error": None,
    "init_where": "worker",  # where the init error is: "engine" for an engine's changed files
    "baseline": None,  # Keras's and the backend's global settings once the backend imported
    "unrestorable": (),  # settings a probe changed that could not be put back
    "engine": None,  # the Engine this worker runs (None: the installed Keras)
    # Tainted: this worker ran user code (a custom layer, an untrusted pool.call). Keras's
    # objects as they were just before (keras_run.keras_snapshot) are put back before every
    # built-in probe, and none of its answers is stored (see ``TAINTED``).
    "tainted": False,
    "snapshot": None,
}

#: The key of a result dict that holds the ``ProbeResult`` (:func:`answer_of`).
ANSWER = "answer"
#: The key that holds its fields instead, when JSON cannot carry them (:func:`answer_of`).
ANSWER_FIELDS = "answer_fields"
#: The key of a result dict that asks the pool to replace this worker (removed by the pool).
REPLACE_ME = "_replace_worker"
#: The key of a result dict that says a tainted worker answered: never stored (by the pool).
TAINTED = "_tainted"
#: A zygote's pid, set there (``runtime._zygote``): its workers watch it, not the kernel.
ZYGOTE_VARIABLE = "DTYPE_EXPLORER_ZYGOTE_PID"
#: Keras's optional imports for fitting on DataFrames and for notebook display, which a worker
#: never does: kept out while Keras imports, they save each worker ~33 MB.
_NOT_FOR_WORKERS = ("pandas", "IPython")


def init(
    backend: str,
    parent_pid: int,
    log_path: str,
    start_timeout: float | None,
    engine: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> None:
    """Fix this process's Keras backend (pebble calls it once per worker start).

    ``environ``: the kernel's environment when the worker was asked for, which a worker forked
    from a zygote (``runtime._zygote``) takes instead of the zygote's.

    With ``engine`` (an ``Engine``'s dict), its directory goes first on ``sys.path`` before
    anything imports TensorFlow or Keras (TensorFlow imports Keras itself; spawn gives the
    child the parent's ``sys.path``, so ``PYTHONPATH`` would not do), and the Keras 2 engine
    sets ``TF_USE_LEGACY_KERAS=1``, so that ``tf.keras`` is ``tf_keras`` too. (A worker forked
    from the engine's zygote finds them imported already: the zygote entered the engine the
    same way before its imports; its files are checked again here.)

    The worker's output (backend chatter, a crash's traceback) goes to ``log_path``, not into
    the notebook. An import failure is kept and reported by :func:`run`, so the kernel sees it.
    An import that hangs (a GPU driver that never answers) ends the worker after
    ``start_timeout`` seconds (``None``: no deadline), its threads' tracebacks written to the
    log: faulthandler's watchdog needs no GIL, so it fires even while C code holds it. (The
    user's ``__main__`` is never imported here: see ``_spawn.WorkerContext``.)
    """
    zygote = os.environ.pop(ZYGOTE_VARIABLE, None)  # forked from one: its parent
    if environ is not None:
        os.environ.clear()
        os.environ.update(environ)
    os.environ["KERAS_BACKEND"] = backend
    share_gpu(backend)  # several workers share one GPU (runtime._gpu)
    _state["backend"] = backend
    if engine is not None:
        _enter_engine(Engine.from_dict(engine))
    with contextlib.suppress(OSError):  # else the output stays where it was
        _redirect_output(Path(log_path), backend)
    _exit_with_parent(os.getppid() if zygote == str(os.getppid()) else parent_pid)  # or kernel
    if start_timeout is not None:
        faulthandler.dump_traceback_later(start_timeout, exit=True)
    try:
        with kept_out_of_workers():
            if _state["init_error"] is None:
                _import_backend(backend)
    finally:
        faulthandler.cancel_dump_traceback_later()
    # What the imports left (the backend's modules: ~400k objects with TensorFlow) lives as
    # long as this process; frozen, a full collection no longer walks it again every few
    # probes (an LSTM's answer allocates enough to start one: ~20 ms each on TensorFlow).
    keras_run.freeze_for_good()
    with contextlib.suppress(OSError):
        os.write(2, worker_log.ready_line(backend))


def kept_out_of_workers() -> contextlib.AbstractContextManager[None]:
    """The block in which a worker imports its backend (and a zygote, ``runtime._zygote``):
    Keras's optional imports a worker never uses (pandas, IPython) fail there."""
    return _kept_out(_NOT_FOR_WORKERS)


@contextlib.contextmanager
def _kept_out(modules: tuple[str, ...]) -> Iterator[None]:
    """Make ``import`` of ``modules`` fail (as if not installed) inside the block; afterwards a
    user's layer may import them as usual."""
    absent = [name for name in modules if name not in sys.modules]
    sys.modules.update(dict.fromkeys(absent))
    try:
        yield
    finally:
        for name in absent:
            if sys.modules.get(name, "") is None:
                del sys.modules[name]


def _enter_engine(engine: Engine) -> None:
    """Put the engine's directory first on ``sys.path``, unless Keras or TensorFlow was
    imported already (then this worker would answer with the installed Keras: it refuses,
    and says why; not where its zygote entered this engine before its imports) or its files
    changed (``runtime._site.enter``). Never raises: a pool respawns a worker whose
    initializer raised."""
    _state["engine"] = engine
    error, where = site_files.enter(engine)
    if error is not None:
        _state["init_error"], _state["init_where"] = error, where


def _import_engine_keras2() -> None:
    """The Keras 2 engine: tensorflow, then tf_keras from the engine (no Keras 3 at all)."""
    import tensorflow as tf

    for gpu in tf.config.list_physical_devices("GPU"):
        tf.config.experimental.set_memory_growth(gpu, True)
    import tf_keras

    _check_from_engine(tf_keras)
    _state["device"] = _device("tensorflow")


def _check_from_engine(module: Any) -> None:
    site_files.check_from(module, _state["engine"])


def _import_backend(backend: str) -> None:
    """Import Keras on ``backend`` (TensorFlow told to grow GPU memory as needed) and find the
    device it computes on; a failure is kept for :func:`run` to report with each probe."""
    engine: Engine | None = _state["engine"]
    if engine is not None and engine.package == "tf_keras":
        try:
            _import_engine_keras2()
        except Exception as exc:
            _state["init_error"] = f"{type(exc).__name__}: {exc}"
        return
    try:
        if backend == "tensorflow":
            import tensorflow as tf

            for gpu in tf.config.list_physical_devices("GPU"):
                tf.config.experimental.set_memory_growth(gpu, True)
        import keras

        if engine is not None:
            _check_from_engine(keras)

        if keras.backend.backend() != backend:  # something imported Keras before init
            with warnings.catch_warnings():  # nothing was built with the old backend yet
                warnings.simplefilter("ignore")
                keras.config.set_backend(backend)
        _state["device"] = _device(backend)
        _state["baseline"] = keras_run.global_settings()
        # The op trace's wrappers stay in place (a passthrough outside a trace: opening one
        # costs a check instead of re-binding ~1,700 names), put in place before any snapshot
        # of Keras's objects reads them. A patch of Keras's functions made meanwhile (the
        # random draws' recorder) patches what they wrap (tests/keras_run/test_trace_resident).
        with contextlib.suppress(Exception):  # else each trace puts them in place itself
            keras_run.keep_trace_installed()
        if engine is None:
            with contextlib.suppress(Exception):  # a fact for the front ends, never to fail
                keras_facts.write_snapshot()
    except Exception as exc:
        _state["init_error"] = f"{type(exc).__name__}: {exc}"


def describe() -> dict[str, Any]:
    """This worker: pid, backend, device and whether its backend imported."""
    engine: Engine | None = _state["engine"]
    return {
        "pid": os.getpid(),
        "backend": _state["backend"],
        "device": _state["device"],
        "init_error": _state["init_error"],
        "engine": None if engine is None else engine.spec,
    }


def run(spec: dict[str, Any], payload: bytes | None = None) -> dict[str, Any]:
    """Run one probe here and return the ``ProbeResult`` as an answer (:func:`answer_of`)."""
    probe_spec = ProbeSpec.from_dict(spec)
    backend = _state["backend"]
    engine: Engine | None = _state["engine"]
    if _state["init_error"] is not None:
        if _state["init_where"] == "engine":
            error = ErrorInfo(type="EngineError", message=_state["init_error"], where="engine")
            return _failure(probe_spec, error)
        what = f"the {backend} backend" if engine is None else f"engine {engine.spec} on {backend}"
        message = f"{what} could not be imported: {_state['init_error']}"
        return _failure(probe_spec, ErrorInfo(type="ImportError", message=message, where="worker"))
    target = None
    if payload is not None:
        taint()  # unpickling a custom layer already runs the user's code
        try:
            target = unpack_target(payload)
        except BaseException as exc:  # unpickling runs the user's code
            message = (
                f"the custom layer could not be sent to the {backend} worker ({exc}). Define it "
                "in an importable module or a notebook cell, and give a layer instance a "
                "get_config() that from_config() accepts (an instance travels as a .keras "
                "archive)."
            )
            return _failure(
                probe_spec, ErrorInfo(type=type(exc).__name__, message=message, where="transfer")
            )
    if engine is not None and engine.package == "tf_keras":
        return _run_keras2(probe_spec, target, payload is not None, engine)
    if payload is None:
        _clean_for_builtin()
    if _state["unrestorable"]:
        return _failure(probe_spec, _unrestorable_error(), replace=True)
    with kept_warnings() as said:
        try:
            result: ProbeResult = keras_run.run_probe(probe_spec, target=target)
        except BaseException as exc:  # a user layer's SystemExit, KeyboardInterrupt...
            result = _raised(probe_spec, exc)
    if said:
        result = result.model_copy(update={"warnings": tuple(said)})
    if engine is not None:  # the Keras that answered: the engine's release
        result = result.model_copy(update={"versions": {**result.versions, **engine.versions()}})
    if result.status != "ok":  # no output tensor told inprocess.run where it ran
        result = result.model_copy(update={"device": _state["device"]})
    restored, lost = _restore_baseline(objects=payload is not None)
    if restored or lost:
        result = result.model_copy(update={"state_changed": tuple(sorted({*restored, *lost}))})
    answer = _marked(answer_of(result))
    if lost:
        answer[REPLACE_ME] = True
    return answer


def _run_keras2(spec: ProbeSpec, target: Any, user_code: bool, engine: Engine) -> dict[str, Any]:
    """A probe in the Keras 2 engine's worker; one that ran the user's code (a tf.keras class)
    replaces the worker afterwards: Keras 2's global state is not snapshotted, so no later
    probe may meet what that code changed."""
    with kept_warnings() as said:
        try:
            result = keras_run.run_keras2(
                spec, {**versions(_state["backend"]), **engine.versions()}, target=target
            )
        except BaseException as exc:  # a user layer's SystemExit, KeyboardInterrupt...
            result = _raised(spec, exc)
    if said:
        result = result.model_copy(update={"warnings": tuple(said)})
    answer = _marked(answer_of(result))
    if user_code:
        answer[REPLACE_ME] = True
    return answer


def taint() -> None:
    """Mark this worker as having run user code (once): Keras's objects are read first, to be
    put back before each later built-in probe."""
    if not _state["tainted"] and _state["baseline"] is not None:
        _state["snapshot"] = keras_run.keras_snapshot()
    _state["tainted"] = True


def _clean_for_builtin() -> None:
    """In a tainted worker, before a built-in probe: put back the settings and every Keras
    object user code changed since :func:`taint` (what cannot be put back makes the worker
    refuse and be replaced)."""
    if not _state["tainted"] or _state["baseline"] is None:
        return
    _restore_baseline(objects=True)


def answer_of(result: ProbeResult) -> dict[str, Any]:
    """What a worker sends back for ``result``: its compact JSON (fields at their defaults
    and computed facts left out: the front recomputes those), one string for the pipe, which
    the front validates with pydantic's JSON reader (:func:`read_answer`). A dict of the
    record's fields would be built here, pickled, rebuilt there and validated: two Python
    objects per value, and as many for the garbage collector to visit on both sides.

    JSON cannot hold everything a record may: pydantic writes an inf or NaN (an overflow's
    example in a ``CastLoss``, a diverged fit's loss) as ``null``, which reads back as
    ``None`` or fails, and refuses a lone surrogate (a path decoded with ``surrogateescape``
    in the user's error message). An answer whose JSON holds a ``null`` or could not be
    written travels as its fields instead (``ANSWER_FIELDS``, as every answer did before):
    it arrives as it was, never as a serialisation error of the tool's. A ``null`` that was
    a ``None`` only costs that answer the faster path.
    """
    try:
        text = result.to_json(exclude_computed_fields=True)
    except ValueError:  # pydantic's PydanticSerializationError
        text = None
    if text is not None and "null" not in text:
        return {ANSWER: text}
    return {ANSWER_FIELDS: result.model_dump(mode="json", exclude_computed_fields=True)}


def read_answer(answer: dict[str, Any]) -> ProbeResult:
    """The ``ProbeResult`` of a worker's answer (:func:`answer_of`), validated."""
    if ANSWER in answer:
        return ProbeResult.from_json(answer[ANSWER])
    return ProbeResult.from_dict(answer[ANSWER_FIELDS])


def _marked(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer marked for the pool: tainted (never stored), over its memory budget (the
    worker is replaced once it has answered; why, in its log and in ``REPLACE_ME``)."""
    _state["answered"] = _state.get("answered", 0) + 1
    if _state["tainted"]:
        answer[TAINTED] = True
    over = _over_budget()
    if over:
        answer[REPLACE_ME] = over
        with contextlib.suppress(OSError):
            os.write(2, f"dtype-explorer worker {os.getpid()}: {over}\n".encode())
    return answer


def _over_budget() -> str | None:
    """Why this worker must be replaced for its memory, or ``None``: it holds more than a
    worker of its backend may (``_sizing.memory_budget``, worked out once per worker: the
    machine and the environment it started with), checked after each probe, between
    tasks (a user's layer kept arrays, a framework's caches grew)."""
    rss = sizing.resident_bytes()
    budget = _state.get("budget")
    if budget is None:  # the machine and $DTYPE_EXPLORER_WORKER_MIB, as this worker started
        budget = _state["budget"] = sizing.memory_budget(_state["backend"])
    if rss is None or rss <= budget:
        return None
    return (
        f"resident memory {rss >> 20} MiB is over the budget of {budget >> 20} MiB after "
        f"{_state.get('answered', 0)} answers; replaced (${sizing.ENV_WORKER_MIB} sets it)"
    )


def call(payload: bytes, trusted: bool, fresh: bool = False) -> Any:
    """Run ``pool.call``'s function, shipped by value (cloudpickle) with its arguments; unless
    the payload holds a registered entry and plain data only (``_call_trust``: checked here,
    whatever the caller said), it is user code: it taints this worker, and the Keras settings
    and objects it changed are put back once it has returned or raised (not for a ``fresh``
    call: the pool replaces this worker after it).

    Raises:
        RuntimeError: this worker could not start as asked (its backend did not import, or
            its engine's Keras could not be put first), saying why; nothing runs.
    """
    if _state["init_error"] is not None:
        engine: Engine | None = _state["engine"]
        what = f"the {_state['backend']} backend" if engine is None else f"engine {engine.spec}"
        raise RuntimeError(f"this worker cannot run {what}: {_state['init_error']}")
    function, args, entry = call_trust.load(payload, trusted=trusted, before_user_code=taint)
    try:
        return function(*args)
    finally:  # else the next probe here runs under it and names it in its state_changed
        if not entry and not fresh:
            _restore_baseline(objects=True)


def _raised(spec: ProbeSpec, exc: BaseException) -> ProbeResult:
    """The answer when the probe raised what ``run_probe`` lets through: a user layer's
    ``SystemExit``, ``KeyboardInterrupt`` or ``GeneratorExit`` (or a bug of ours), reported as
    this probe's error rather than ending the worker or pebble's message thread (``where`` is
    ``worker``: not an answer Keras gave, never cached)."""
    message = str(exc) or repr(exc)
    return ProbeResult(
        spec=spec,
        status="error",
        backend=_state["backend"],
        device=_state["device"],
        verdict="error",
        error=ErrorInfo(type=type(exc).__name__, message=message[:2000], where="worker"),
    )


def _restore_baseline(*, objects: bool) -> tuple[list[str], list[str]]:
    """Put back every global setting of Keras and its backend that differs from this worker's
    start (a user's layer changed it), and with ``objects`` every Keras object changed since
    :func:`taint`: ``(restored, unrestorable)``. A worker with unrestorable settings refuses
    later probes and asks the pool to replace it."""
    if _state["baseline"] is None:
        return [], []
    try:
        restored, lost = keras_run.restore_settings(_state["baseline"])
        if objects and _state["snapshot"] is not None:  # a user's code ran: Keras's objects
            put_back, unrestorable = keras_run.restore_keras(_state["snapshot"])
            restored, lost = restored + put_back, lost + unrestorable
    except Exception as exc:  # reading the settings failed: assume the worst
        restored, lost = [], [f"settings unreadable: {type(exc).__name__}: {exc}"]
    if lost:
        _state["unrestorable"] = tuple(sorted({*_state["unrestorable"], *lost}))
    return restored, lost


def _unrestorable_error() -> ErrorInfo:
    names = ", ".join(_state["unrestorable"])
    return ErrorInfo(
        type="WorkerStateChanged",
        message=(
            f"an earlier probe changed this {_state['backend']} worker's global settings "
            f"({names}) and they could not be put back; the worker is replaced, run the probe "
            "again"
        ),
        where="worker",
    )


def unpack_target(payload: bytes) -> Any:
    """The custom target sent by ``pool.target_payload``: a class or factory, or an instance
    as its ``.keras`` archive (``keras_run.Packed``: ``run_probe`` loads it under safe mode,
    its custom classes registered for that load only)."""
    kind, value, *source = pickle.loads(payload)
    if kind == "unpicklable":
        raise TypeError(f"it could not be pickled in the kernel: {value}")
    if source:  # the user's file names and lines, which cloudpickle does not keep
        user_source.restore(value, source[0])
    return value


def _failure(spec: Any, error: Any, *, replace: bool = False) -> dict[str, Any]:
    engine: Engine | None = _state["engine"]
    result = ProbeResult(
        spec=spec,
        status="error",
        backend=_state["backend"],
        device=_state["device"],
        verdict="error",
        error=error,
        versions={} if engine is None else engine.versions(),
    )
    answer = answer_of(result)
    if replace:
        answer[REPLACE_ME] = True
    return answer


def _device(backend: str) -> str:
    """The device this backend computes on, named as ``inprocess.run`` names an output's device."""
    if backend == "jax":
        import jax

        device = jax.devices()[0]
        return f"{device.platform}:{device.id}"
    if backend == "tensorflow":
        import tensorflow as tf

        return "gpu:0" if tf.config.list_logical_devices("GPU") else "cpu:0"
    if backend == "torch":
        try:
            from keras.src.backend.torch.core import get_device
        except ImportError:  # keras-nightly keeps it in ``ops``
            from keras.src.backend.torch.ops.core import get_device

        return str(get_device())
    if backend == "openvino":  # Keras compiles its ops for this OpenVINO device ("CPU")
        from keras.src.backend.openvino.core import get_device as openvino_device

        return str(openvino_device()).lower()
    return "cpu"


def _redirect_output(log_path: Path, backend: str) -> None:
    with worker_log.open_for_worker(log_path, backend) as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    faulthandler.enable()


def _exit_with_parent(parent_pid: int) -> None:
    """Leave no orphan: exit when the kernel (or the zygote, which exits with the kernel) is
    gone, even in the middle of a hung probe."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="dx-parent-watch", daemon=True).start()

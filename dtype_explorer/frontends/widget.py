"""The explorer widget: pick a target, input dtypes, policy and backends; see each backend's
answer as it arrives.

This side is thin. It validates every value the page sends (nothing from the page is
evaluated), hands the probes to :mod:`dtype_explorer.runtime.pool` and publishes the
``ProbeResult`` dicts as they come back; the front end (``js/``, bundled into ``static/``) only
draws them. What the two sides share is written once, in ``widget_contract.json``.

>>> import dtype_explorer as dx
>>> dx.DtypeExplorer("Conv1D", input_dtype="uint8", backends=["jax", "torch"])  # doctest: +SKIP
"""

from __future__ import annotations

import json
import pathlib
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from functools import partial
from typing import Any

import anywidget
import traitlets
from packaging.version import Version

from dtype_explorer import dtypes
from dtype_explorer.analyses import promotion_table
from dtype_explorer.errors import InvalidSpecError, listed, received, unknown
from dtype_explorer.frontends import _contract
from dtype_explorer.frontends._request import engine_choices, parse_request
from dtype_explorer.keras_run import COMMON_POLICIES, catalog, make_spec, uncalibrated_modes
from dtype_explorer.records import (
    MODES,
    PRECISIONS,
    TF_KERAS_BACKEND,
    UNSUPPORTED,
    ErrorInfo,
    ProbeResult,
    ProbeSet,
    ProbeSpec,
    engine_spec,
)
from dtype_explorer.runtime import engines, pool
from dtype_explorer.timing import ms
from dtype_explorer.versions import library_version

_STATIC = pathlib.Path(__file__).parents[1] / "static"
#: The keys of a request from the page (the contract's); anything else is refused.
REQUEST_KEYS = _contract.REQUEST_KEYS
#: The input dtype a picker starts at for each input role of the catalog.
ROLE_DTYPES = {"float": "float32", "index": "int32", "string": "string", "any": "float32"}
PENDING: dict[str, str] = {"status": "pending"}
#: The first marimo that sends a widget's updates made in another thread than a cell's: the
#: explorer's answers arrive from its workers' threads (older ones drop them, unseen).
MARIMO_SENDS_FROM_THREADS = "0.23.14"


class DtypeExplorer(_contract.ContractTraits, anywidget.AnyWidget):
    """Probe a Keras layer or op on several backends at once and draw what happened.

    ``target``: a catalog name (``"Dense"``, ``"ops.add"``) or a user ``Layer`` class or
    instance. ``mode``: how the target runs at first (``"call"``, ``"training"``, ``"model"``,
    ``"predict"``, ``"fit"``, ``"dataset"``); the page's "runs as" picker changes it.
    ``engine``: which Keras answers at first (``None``: the installed Keras; a created engine,
    ``"keras==3.11.3"`` or ``"tf_keras"``); the page's Keras picker offers the installed Keras
    and every created engine (the widget never creates one: ``dx.engines.create`` does).
    ``precision``: the float32 matmul precision at first (``None``: as the backends have it;
    ``"highest"``, ``"tf32"``, ``"default"``); the page's "matmul" picker changes it.
    ``quantize``: the layer quantized before the call as ``Model.quantize`` does, at first
    (``None``: the float layer; ``"int8"``, ``"int4"``, ``"float8"``: the installed Keras's
    modes that need no calibration); the page's "quantize" picker changes it.
    ``custom_layers``: more user layers to offer in the picker. ``backends``: the
    backends probed at first (default: every installed one). Raises ``InvalidSpecError`` for a
    bad initial value; later bad values from the page only set :attr:`error`.
    """

    _esm = _STATIC / "widget.js"
    _css = _STATIC / "widget.css"

    def __init__(
        self,
        target: Any = "Dense",
        *,
        input_dtype: str | Sequence[str] | None = None,
        policy: str = "float32",
        backends: Sequence[str] | None = None,
        kwargs: dict[str, Any] | None = None,
        shape: Sequence[int] | Sequence[Sequence[int]] | None = None,
        values: str = "default",
        mode: str = "call",
        engine: str | None = None,
        precision: str | None = None,
        quantize: str | None = None,
        custom_layers: Iterable[Any] = (),
        use_cache: bool = True,
        timeout: float | None = None,
        **widget_kwargs: Any,
    ) -> None:
        _check_marimo()
        installed = pool.installed_backends()
        custom = [*custom_layers, *([] if isinstance(target, str) else [target])]
        self._custom = {make_spec(c, backend=installed[0]).target: c for c in custom}
        self._payloads = {name: pool.target_payload(layer) for name, layer in self._custom.items()}
        self._use_cache = use_cache
        self._timeout = pool.time_limit(timeout)  # refused here, not at the first probe
        self._lock = threading.RLock()
        self._generation = 0
        #: Per backend: whether this widget has a probe running there, and the newest request
        #: waiting for it (older waiting requests are dropped: only the newest is answered).
        self._running: set[str] = set()
        self._waiting: dict[str, tuple[int, ProbeSpec, float]] = {}
        self._promotion_thread: threading.Thread | None = None
        name = target if isinstance(target, str) else list(self._custom)[-1]
        defaults = _all_defaults(self._custom)
        if name not in defaults:
            raise unknown("target", name, defaults)
        start = defaults[name]
        if shape is not None:  # checked as dx.probe checks it: refused here, not on the page
            make_spec(self._custom.get(name, name), backend=installed[0], shape=shape)
        offered = engine_choices()
        chosen = input_dtype or start["input_dtypes"]
        first = {
            "target": name,
            "kwargs": json.dumps(start["kwargs"] if kwargs is None else kwargs),
            "input_dtypes": list(chosen)
            if isinstance(chosen, list | tuple)
            else [dtypes.standardize(chosen, "input_dtype")],
            "preset": values,
            "shape": json.dumps(start["shapes"] if shape is None else shape),
            "policy": policy,
            "mode": mode,
            "engine": engines.pin(engine),
            "precision": precision,
            "quantize": quantize,
            "backends": list(
                _default_backends(installed, engine)
                if backends is None
                else listed(backends, "backends")  # (a string is one backend)
            ),
            "nonce": 0,
        }
        # A bad initial value raises here, in the caller's cell; later ones only set `error`.
        specs, refused, nonce = parse_request(first, self._custom, defaults, offered)
        first["engine"] = specs[0].engine  # pinned: "tf_keras" -> "tf_keras==2.X.Y"
        super().__init__(
            catalog=_catalog(self._custom),
            defaults=defaults,
            dtypes=list(dtypes.all_input_dtypes()),
            dtype_families={name: dtypes.family(name) for name in dtypes.all_input_dtypes()},
            policies=list(COMMON_POLICIES),
            presets=dict(dtypes.PRESETS),
            modes=list(MODES),
            precisions=list(PRECISIONS),
            quantize_modes=list(uncalibrated_modes()),
            available_backends=installed,
            engines=_offered_with(offered, specs[0].engine),
            request=first,
            results={spec.backend: PENDING for spec in specs},
            **widget_kwargs,
        )
        self.observe(self._on_request, names="request")
        self._start(specs, nonce, refused)

    # -------------------------------------------------------------------------- the page

    def set_state(self, sync_data: dict[str, Any]) -> None:
        """An update from the page. The page may write only the traits the contract gives it
        (``writer: page``): its writes to kernel traits (``results``, ``error``, ...) are
        undone by sending the kernel's values back, so junk from the page can never leave the
        explorer pending. A value of the wrong type is refused into :attr:`error`."""
        refused = [name for name in sync_data if name in _contract.KERNEL_WRITES]
        allowed = {k: v for k, v in sync_data.items() if k not in _contract.KERNEL_WRITES}
        try:
            if allowed:
                super().set_state(allowed)
        except traitlets.TraitError as error:
            with self._lock:
                self.error = f"the page sent a value of the wrong type: {received(str(error))}"
            refused.extend(name for name in allowed if name in _contract.TRAITS)
        if refused:
            self.send_state(sorted(set(refused)))

    # -------------------------------------------------------------------------- requests

    def _on_request(self, change: dict[str, Any]) -> None:
        """A new request from the page: refuse it with a message, or probe it."""
        try:
            parsed = parse_request(change["new"], self._custom, self.defaults, self.engines)
        except (InvalidSpecError, ValueError, TypeError) as error:
            with self._lock:
                self._generation += 1
                with self.hold_sync():
                    self.error = str(error)
                    self.results, self.timings, self.verdict, self.promotion = {}, {}, "", {}
                    self.trace_divergence, self.comparison, self.code = {}, {}, {}
            return
        engine = parsed[0][0].engine
        if engine not in (choice["engine"] for choice in self.engines):
            self.engines = _offered_with(self.engines, engine)  # created since the list was made
        specs, refused, nonce = parsed
        self._start(specs, nonce, refused)

    def refresh_engines(self) -> list[dict[str, Any]]:
        """Read the created engines again (after ``dx.engines.create`` or ``remove``) and
        offer them in the page's Keras picker.

        Returns:
            The engines offered (:attr:`engines`).

        >>> explorer.refresh_engines()[0]["label"]       # doctest: +SKIP
        'installed Keras 3.15.1'
        """
        self.engines = engine_choices()
        return self.engines

    def _start(
        self,
        specs: list[ProbeSpec],
        nonce: int,
        refused: dict[str, InvalidSpecError] | None = None,
    ) -> None:
        """Show each backend as pending and submit its probe; older probes' answers are dropped.
        A backend in ``refused`` (it cannot run this request) gets its "not supported here"
        card at once, in the order the page asked for the backends.

        A backend still running this widget's previous probe gets the new one when it answers:
        requests arriving meanwhile replace each other, so only the newest runs (a running
        probe is not cancelled: pebble cancels a running task by killing its worker, which
        then has to import its backend again, slower than letting one probe finish)."""
        with self._lock:
            self._generation += 1
            generation = self._generation
            results: dict[str, Any] = {spec.backend: PENDING for spec in specs}
            for backend, why in (refused or {}).items():
                results[backend] = unsupported_result(specs[0], backend, why).to_dict()
            order = list(self.available_backends)
            with self.hold_sync():
                self.error = ""
                self.request_id = nonce
                self.results = dict(sorted(results.items(), key=lambda kv: _rank(order, kv[0])))
                self.timings, self.verdict, self.promotion = {}, "", {}
                self.trace_divergence, self.code = {}, {}
                self.comparison = _comparison(self.results)
            self._promotion_thread = None
            started = time.perf_counter()
            ready = []
            for spec in specs:
                if spec.backend in self._running:
                    self._waiting[spec.backend] = (generation, spec, started)
                else:
                    self._running.add(spec.backend)
                    ready.append(spec)
        for spec in ready:
            self._submit(generation, spec, started)

    def _submit(self, generation: int, spec: ProbeSpec, started: float) -> None:
        try:
            future = pool.submit(
                spec,
                target_payload=self._payloads.get(spec.target),
                timeout=self._timeout,
                use_cache=self._use_cache,
            )
        except Exception as exc:  # the pool refused: report it in that backend's card
            future = Future()
            future.set_exception(exc)
        future.add_done_callback(partial(self._arrived, generation, spec, started))

    def _next(self, backend: str, answered: ProbeResult) -> None:
        """``backend`` answered this widget's probe: run the newest request waiting for it (or,
        when the workers were shut down meanwhile, answer it with that)."""
        with self._lock:
            waiting = self._waiting.pop(backend, None)
            if waiting is None or waiting[0] != self._generation:
                self._running.discard(backend)
                return
        if answered.error is not None and answered.error.type == "WorkerShutdown":
            generation, spec, started = waiting
            shut = Future()
            shut.set_result(answered.model_copy(update={"spec": spec}))
            self._arrived(generation, spec, started, shut)
            return
        self._submit(*waiting)

    def _arrived(self, generation: int, spec: ProbeSpec, started: float, future: Future) -> None:
        """One backend answered: publish it, unless a newer request superseded this one; then
        run the newest request waiting for that backend."""
        result = _result_of(future, spec)
        try:
            self._publish(generation, spec, started, result)
        finally:
            self._next(spec.backend, result)

    def _publish(
        self, generation: int, spec: ProbeSpec, started: float, result: ProbeResult
    ) -> None:
        elapsed = ms(started)
        with self._lock:
            if generation != self._generation:
                return
            results = {**self.results, spec.backend: result.to_dict()}
            done = [ProbeResult.from_dict(r) for r in results.values() if r != PENDING]
            # A backend that cannot run the request has a card, not a say in the verdict.
            answered = [r for r in done if not r.unsupported]
            pending = [b for b, r in results.items() if r == PENDING]
            with self.hold_sync():
                self.results = results
                self.timings = {**self.timings, spec.backend: elapsed}
                both = ProbeSet(results=tuple(answered))
                self.verdict = both.shown_verdict if len(answered) > 1 else ""
                part = both.first_divergence() if len(answered) > 1 else None
                self.trace_divergence = part.to_dict() if part is not None else {}
                self.comparison = _comparison(results)
                self.code = ProbeSet(results=tuple(done)).as_code().to_dict()  # "Copy as code"
            if not pending and answered:
                self._promotion_thread = threading.Thread(
                    target=self._promote, args=(generation, answered), daemon=True
                )
                self._promotion_thread.start()

    def _promote(self, generation: int, answered: list[ProbeResult]) -> None:
        """Fill :attr:`promotion` with the ``result_type`` tables behind the documented dtypes."""
        try:
            tables = promotion_tables(answered, engine=answered[0].spec.engine)
        except Exception as error:  # shown beside the results, never raised in the kernel
            tables = {"tables": [], "note": f"no promotion table: {type(error).__name__}: {error}"}
        with self._lock:
            if generation == self._generation:
                self.promotion = tables

    # ---------------------------------------------------------------------------- Python

    def wait(self, timeout: float | None = None) -> dict[str, ProbeResult]:
        """Block until every backend answered the current request and its promotion table is
        in; return the results by backend. For scripts and tests: the page never waits."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                done = PENDING not in self.results.values()
                thread = self._promotion_thread
            if done:
                break
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"no answer within {timeout} s from {sorted(self.results)}")
            time.sleep(0.01)
        if thread is not None:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return {b: ProbeResult.from_dict(r) for b, r in self.results.items()}


def marimo_refusal(version: str) -> str | None:
    """Why the marimo of ``version`` cannot show the explorer's answers, or ``None``.

    >>> marimo_refusal("0.25.2") is None
    True
    >>> print(marimo_refusal("0.23.13"))  # doctest: +ELLIPSIS
    marimo 0.23.13 drops a widget's updates made outside a cell's thread, ...>=0.23.14'
    """
    if Version(version) >= Version(MARIMO_SENDS_FROM_THREADS):
        return None
    return (
        f"marimo {version} drops a widget's updates made outside a cell's thread, and the "
        "explorer's answers arrive from its workers' threads: it would stay 'probing' for "
        f"ever. marimo {MARIMO_SENDS_FROM_THREADS} and later show them: "
        f"pip install 'marimo>={MARIMO_SENDS_FROM_THREADS}'"
    )


def _check_marimo() -> None:
    """Refuse, in the caller's cell, a marimo notebook whose marimo cannot show the answers."""
    marimo = sys.modules.get("marimo")
    running = getattr(marimo, "running_in_notebook", None)
    if running is None or not running():
        return
    refusal = marimo_refusal(library_version("marimo"))
    if refusal is not None:
        raise RuntimeError(refusal)


def _comparison(results: dict[str, Any]) -> dict[str, Any]:
    """The ``comparison`` trait: the answers so far side by side, pending backends as columns."""
    done = tuple(ProbeResult.from_dict(r) for r in results.values() if r != PENDING)
    pending = tuple(b for b, r in results.items() if r == PENDING)
    return ProbeSet(results=done).comparison(pending).to_dict()


def _rank(order: list[str], backend: str) -> int:
    return order.index(backend) if backend in order else len(order)


def promotion_tables(results: Sequence[ProbeResult], engine: str | None = None) -> dict[str, Any]:
    """The promotion tables (``keras.backend.result_type``, run in each backend's worker, by the
    Keras of ``engine``) for the dtypes the results' documented dtypes were promoted from, one
    per group of agreeing backends.
    """
    with_args = [r for r in results if r.result_type_args]
    involved = list(dict.fromkeys(d for r in with_args for d in r.result_type_args))
    if not involved:
        return {}
    table = promotion_table(
        "add",
        dtypes=involved,
        backends=[r.backend for r in with_args],
        references=(),
        engine=engine,
        progress=False,
    )
    groups: dict[str, dict[str, Any]] = {}
    for result in with_args:
        cells = [
            [_cell(table.cell(lhs, rhs).results[result.backend]) for rhs in involved]
            for lhs in involved
        ]
        basis = next((line for line in result.basis if line.startswith("result_type(")), "")
        key = json.dumps([cells, result.result_type_args, basis])
        group = groups.setdefault(
            key,
            {
                "backends": [],
                "dtypes": involved,
                "cells": cells,
                "args": list(result.result_type_args),
                "basis": basis,
            },
        )
        group["backends"].append(result.backend)
    return {"tables": list(groups.values())}


def _cell(result: ProbeResult) -> str | dict[str, str]:
    said = result.expectation("result_type")  # the result_type table, whatever the verdict uses
    if said is not None and said.dtype is not None:
        return said.dtype
    if said is None and result.documented_dtype is not None:
        return result.documented_dtype
    return {"error": next((b for b in result.basis if "raises" in b), "result_type raises")}


def _default_backends(installed: list[str], engine: str | None) -> list[str]:
    """Every installed backend, or the ones the engine runs on (Keras 2: tensorflow)."""
    name = engine_spec(engine)
    if name is not None and name.startswith("tf_keras"):
        return [b for b in installed if b == TF_KERAS_BACKEND]
    return installed


def _offered_with(offered: list[dict[str, Any]], engine: str | None) -> list[dict[str, Any]]:
    """``offered``, with ``engine`` (an engine created since the list was read) added."""
    if engine in (choice["engine"] for choice in offered):
        return offered
    return engine_choices()


def unsupported_result(spec: ProbeSpec, backend: str, error: InvalidSpecError) -> ProbeResult:
    """The answer of a backend that cannot run a request the others can (``mode="fit"`` on
    numpy): an ``invalid`` result whose error (``where="not supported here"``) says why.

    >>> spec = ProbeSpec(target="Dense", backend="jax", mode="fit")
    >>> r = unsupported_result(spec, "numpy", InvalidSpecError("numpy cannot train"))
    >>> r.status, r.backend, r.spec.backend, r.error.where
    ('invalid', 'numpy', 'numpy', 'not supported here')
    """
    return ProbeResult(
        spec=spec.model_copy(update={"backend": backend}),
        status="invalid",
        backend=backend,
        verdict="error",
        error=ErrorInfo(type="NotSupported", message=str(error), where=UNSUPPORTED),
    )


def _catalog(custom: dict[str, Any]) -> dict[str, list[str]]:
    groups = catalog.groups()
    if custom:
        groups["custom"] = list(custom)
    return groups


def _all_defaults(custom: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = {entry.name: _defaults(entry) for entry in [*catalog.layers(), *catalog.ops()]}
    found.update({name: _defaults(catalog.custom_entry(name)) for name in custom})
    return found


def _defaults(entry: catalog.Entry) -> dict[str, Any]:
    if isinstance(entry, catalog.LayerEntry):
        roles = entry.input_roles(entry.arity)
    else:
        roles = entry.roles or ("any",) * entry.arity
    return {
        "kwargs": dict(entry.kwargs),
        "shapes": [list(s) for s in entry.shapes],
        "input_dtypes": [ROLE_DTYPES[role] for role in roles],
        "group": entry.group,
        "note": entry.note,
    }


def _result_of(future: Future, spec: ProbeSpec) -> ProbeResult:
    """The future's result; a failure of the pool itself becomes an error result."""
    try:
        return future.result()
    except Exception as exc:
        return ProbeResult(
            spec=spec,
            status="error",
            backend=spec.backend,
            verdict="error",
            error=ErrorInfo(type=type(exc).__name__, message=str(exc), where="widget"),
        )

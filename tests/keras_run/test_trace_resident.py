"""The op trace with its wrappers kept in place between traces (a worker's,
``keep_trace_installed``) records what it records when they come and go: a worker's first
trace of a question and its later ones record the same steps, on real Keras.

The in-process tests run on this session's backend; the worker test asks a fresh numpy worker.
"""

import sys
import textwrap

import keras
import pytest

import dtype_explorer as dx
from dtype_explorer import pool
from dtype_explorer.keras_run import make_spec, run_probe
from dtype_explorer.keras_run.trace import _in_place

QUESTIONS = [
    ("Dense", "float32", {"units": 3}),  # the kernel's draw at build passes the draws' patch
    ("Conv2D", "float16", {"filters": 2, "kernel_size": 2}),
    ("LSTM", "float32", {"units": 3}),
    ("Dropout", "float16", {"rate": 0.5}),
    ("LayerNormalization", "float16", None),
]


def _steps(result):
    return [
        (s.op, s.phase, s.note, s.source and (s.source.function, s.source.line), len(s.children))
        for s in result.trace
    ]


def _probe(target, dtype, kwargs):
    spec = make_spec(target, dtype, backend=keras.backend.backend(), kwargs=kwargs)
    result = run_probe(spec, target=None if isinstance(target, str) else target)
    assert result.status == "ok", result.error
    return _steps(result)


@pytest.mark.parametrize(("name", "dtype", "kwargs"), QUESTIONS, ids=[q[0] for q in QUESTIONS])
def test_kept_in_place_the_first_and_later_traces_record_what_a_fresh_install_does(
    name, dtype, kwargs
):
    coming_and_going = _probe(name, dtype, kwargs)
    assert coming_and_going
    _in_place.keep_installed()
    try:
        first = _probe(name, dtype, kwargs)
        second = _probe(name, dtype, kwargs)
    finally:
        _in_place.keep_installed(False)
    assert first == coming_and_going
    assert second == coming_and_going
    if name == "Dense":  # the kernel's initializer draws through the draws' recorder
        assert ("backend.random.uniform", "build") in [s[:2] for s in first]


def test_a_module_imported_by_the_first_call_is_traced_the_same_later(tmp_path, monkeypatch):
    # a helper module the layer imports on its first call only, binding an op by name
    module = "dx_lazy_helper_for_trace"
    (tmp_path / f"{module}.py").write_text(
        textwrap.dedent(
            """
            from keras.ops import multiply

            def scale(x):
                return multiply(x, 2.0)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))

    class LazyScale(keras.layers.Layer):
        def call(self, x):
            helper = __import__(module)
            return keras.ops.add(helper.scale(x), 1.0)

    _in_place.keep_installed()
    try:
        first = _probe(LazyScale, "float32", None)
        assert module in sys.modules  # imported while the first trace was open
        second = _probe(LazyScale, "float32", None)
    finally:
        _in_place.keep_installed(False)
        sys.modules.pop(module, None)
    assert [s[0] for s in first if s[1] == "call"][-2:] == ["ops.multiply", "ops.add"]
    assert second == first


def test_a_workers_first_and_second_trace_of_a_question_record_the_same_steps():
    pool.shutdown(zygotes=False)  # a fresh worker: its first trace is the one that differed
    for name, dtype, kwargs in QUESTIONS[:2]:
        first = dx.probe(name, dtype, backend="numpy", kwargs=kwargs, use_cache=False)
        second = dx.probe(name, dtype, backend="numpy", kwargs=kwargs, use_cache=False)
        assert first.status == second.status == "ok"
        assert _steps(first) == _steps(second)
        assert ("backend.random.uniform", "build") in [s[:2] for s in _steps(first)]


def test_the_trace_reads_a_function_once_not_once_a_probe():
    # the trace caches each function's parameter names: keyed by the draws' recorder (a new
    # wrapper each probe) or a new layer's bound method, it grew with every probe a worker made
    # and kept what each wrapper held alive
    from dtype_explorer.keras_run.trace import _records as _trace_records

    _probe("Dense", "float32", {"units": 3})
    before = _trace_records._param_names.cache_info().currsize
    for _ in range(4):
        _probe("Dense", "float32", {"units": 3})
    assert _trace_records._param_names.cache_info().currsize == before


def test_a_probe_in_this_process_finds_the_bindings_once_and_leaves_keras_as_it_was(
    monkeypatch,
):
    """Probed in the user's process (``dx.probe(..., backend=None)``), each question binds the
    trace's wrappers before it patches Keras's random draws (``trace.in_place``): the bindings
    are found once, not again at each probe (~10 ms each), and Keras's functions and random
    draws are its own again after every probe."""
    from keras.src import backend

    from dtype_explorer.keras_run.trace import _bindings

    for name, dtype, kwargs in QUESTIONS:  # the first of each: bindings found if needed
        _probe(name, dtype, kwargs)
    draws = {n: getattr(backend.random, n) for n in ("normal", "uniform", "dropout")}
    add = keras.ops.add
    found = []
    real = _bindings.discover
    monkeypatch.setattr(_bindings, "discover", lambda *a: found.append(1) or real(*a))
    for name, dtype, kwargs in QUESTIONS * 2:
        _probe(name, dtype, kwargs)
        assert keras.ops.add is add and not hasattr(add, "__wrapped__")
        assert {n: getattr(backend.random, n) for n in draws} == draws
    assert found == []

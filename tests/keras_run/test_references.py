"""Issue 23.9: every op's reference libraries are called as each library expects
(``keras_run/_reference_calls.py``), or shown as "no counterpart"; none is shown as raising
because the tool called it wrongly. A raise is allowed only where the library really refuses
the dtype: the same reference, called the same way on int32 inputs, answers.

Over the whole op catalog on the numpy, jax and torch backends (their workers; NumPy and scipy,
jax and torch as references)."""

import pytest

from dtype_explorer import pool
from dtype_explorer.keras_run import catalog, make_spec
from dtype_explorer.keras_run._reference_calls import NO_COUNTERPART

LIBRARIES = ("numpy", "jax", "torch", "tensorflow")


def _probe_all(backend, input_dtype=None, names=None):
    entries = [e for e in catalog.ops() if e.references and (names is None or e.name in names)]
    futures = {}
    for entry in entries:
        options = {} if input_dtype is None else {"input_dtype": input_dtype}
        try:
            spec = make_spec(entry.name, backend=backend, **options)
        except Exception:  # the op takes no such input dtype: nothing to call
            continue
        futures[entry.name] = pool.submit(spec, use_cache=False)
    return {name: future.result() for name, future in futures.items()}


def _raises(results):
    return {
        (name, e.source): e.error
        for name, r in results.items()
        for e in r.expectations
        if e.source in LIBRARIES and e.error
    }


#: The dtypes a raise is retried with: a library that refuses one dtype answers another.
RETRY_DTYPES = ("int32", "int64", "float32", "bool", "complex64")
#: What a raise from calling a function wrongly says (never a library refusing a dtype).
WRONG_CALL = (
    "missing",
    "unexpected keyword",
    "positional argument",
    "invalid combination of arguments",
    "must be Tensor, not",
    "requires ndarray or scalar arguments",
    "is not callable",
    "object has no attribute",
)


@pytest.mark.parametrize("backend", ["numpy", "jax", "torch"])
def test_no_reference_raises_from_its_own_call(backend):
    """Every op's references on ``backend`` (NumPy/scipy and the backend's own library), called
    on the op's default dtype; a reference that raises must answer on another dtype (the raise
    was the library refusing the dtype) and say nothing of a wrong call. The old code showed,
    among others, scipy's map_coordinates ("output shape not correct"), torch's softmax without
    ``dim``, pools and convolutions on channels-last input, jax.lax.reduce_window's keywords
    and the fft functions given Keras's ``(real, imag)`` pair as "<library> raises"."""
    raised = _raises(_probe_all(backend))
    wrong = {k: e for k, e in raised.items() if any(w in e for w in WRONG_CALL)}
    assert not wrong, wrong
    answered = set()
    for dtype in RETRY_DTYPES:
        names = {name for name, _ in set(raised) - answered}
        results = _probe_all(backend, dtype, names=names) if names else {}
        again = _raises(results)
        answered |= {
            (name, e.source)
            for name, r in results.items()
            for e in r.expectations
            if e.source in LIBRARIES and (name, e.source) not in again and e.dtype is not None
        }
    wrongly_called = {key: error for key, error in raised.items() if key not in answered}
    assert not wrongly_called, wrongly_called
    assert raised, "float32 bitwise ops are refused by every library: some raise must remain"


def _expectation(result, library):
    return next(e for e in result.expectations if e.source == library)


@pytest.mark.parametrize(
    ("backend", "op", "dtype"),
    [
        ("torch", "ops.cumsum", "float32"),
        ("torch", "ops.cumprod", "float32"),
        ("torch", "ops.layer_normalization", "float32"),
        ("torch", "ops.rms_normalization", "float32"),
        ("torch", "ops.size", "python_int"),
        ("jax", "ops.image.resize", "float32"),
        ("jax", "ops.size", "python_int"),
        ("jax", "ops.image.map_coordinates", "float32"),
        ("numpy", "ops.image.map_coordinates", "float32"),
    ],
)
def test_the_named_references_answer(backend, op, dtype):
    """The old code showed each of these as "<library> raises" (torch cumsum without ``dim``,
    layer_norm without ``normalized_shape``, jax.image.resize without ``method``, scipy's
    map_coordinates with ``order`` as its ``output``, jnp.size/torch.numel's Python int)."""
    result = pool.submit(make_spec(op, backend=backend), use_cache=False).result()
    library = "numpy" if backend == "numpy" else backend
    said = _expectation(result, library)
    assert said.error is None and said.dtype == dtype, said


def test_no_comparable_call_is_shown_as_no_counterpart():
    result = pool.submit(make_spec("ops.segment_sum", backend="numpy"), use_cache=False).result()
    said = _expectation(result, "numpy")
    assert said.dtype is None and said.error is None and NO_COUNTERPART in said.basis

"""Issue 23.9: every op's reference libraries are called as each library expects
(``keras_run/references/_calls.py``), or shown as "no counterpart"; none is shown as raising
because the tool called it wrongly. A raise is allowed only where the library really refuses
the dtype: the same reference, called the same way on int32 inputs, answers.

Over the whole op catalog on the numpy, jax, torch and tensorflow backends (their workers;
NumPy and scipy, jax, torch and ``tf.experimental.numpy`` as references). TensorFlow's
references run with tnp's NumPy behaviour on, in the TensorFlow reference process, never in
the worker that answers for Keras (``keras_run/references/_tf_reference.py``)."""

import subprocess
import sys

import pytest

from dtype_explorer import pool
from dtype_explorer.keras_run import catalog, make_spec
from dtype_explorer.keras_run.references._calls import NO_COUNTERPART

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


@pytest.mark.parametrize("backend", ["numpy", "jax", "torch", "tensorflow"])
def test_no_reference_raises_from_its_own_call(backend):
    """Every op's references on ``backend`` (NumPy/scipy and the backend's own library), called
    on the op's default dtype; a reference that raises must answer on another dtype (the raise
    was the library refusing the dtype) and say nothing of a wrong call. The old code showed,
    among others, scipy's map_coordinates ("output shape not correct"), torch's softmax without
    ``dim``, pools and convolutions on channels-last input, jax.lax.reduce_window's keywords,
    the fft functions given Keras's ``(real, imag)`` pair, and tnp's ``sqrt`` without its
    NumPy behaviour ("no attribute astype"), ``pad`` without ``mode``, ``asarray`` given a
    dtype's name and ``shape``'s ``TensorShape`` as "<library> raises"."""
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


#: tnp's own answer, NumPy behaviour on (as ``_tf_reference`` switches it on), in a bare process.
_RAW_TNP = """
import numpy as np, ml_dtypes, tensorflow as tf
tf.get_logger().setLevel("ERROR")
tnp = tf.experimental.numpy
tnp.experimental_enable_numpy_behavior(dtype_conversion_mode="all")
for dtype in ("int32", "bfloat16"):
    numpy_dtype = np.dtype(getattr(ml_dtypes, dtype, dtype))
    x = tf.constant(np.array([[1, 4, 9], [2, 3, 5]]).astype(numpy_dtype))
    print(dtype, tnp.sqrt(x).dtype.name, tnp.exp(x).dtype.name)
"""


def _raw_tnp():
    done = subprocess.run(
        [sys.executable, "-c", _RAW_TNP], capture_output=True, text=True, timeout=300, check=True
    )
    rows = [line.split() for line in done.stdout.splitlines() if line.strip()]
    return {(op, row[0]): row[k] for row in rows for k, op in ((1, "ops.sqrt"), (2, "ops.exp"))}


def test_tnp_answers_as_with_its_numpy_behaviour_and_keras_worker_stays_clean():
    """``tnp.sqrt``/``tnp.exp`` of int32 and bfloat16 raised "no attribute astype" in the
    tensorflow worker; now each answers what raw tnp answers with its NumPy behaviour on, and
    the worker that answered for Keras still has no ``tf.Tensor.astype`` / NumPy promotion."""
    from dtype_explorer.keras_run.references import _tf_reference

    raw = _raw_tnp()
    for (op, dtype), expected in raw.items():
        spec = make_spec(op, backend="tensorflow", input_dtype=dtype)
        said = _expectation(pool.submit(spec, use_cache=False).result(), "tensorflow")
        assert said.error is None and said.dtype == expected, (op, dtype, said)
    assert pool.call("tensorflow", _tf_reference.numpy_behaviour_on).result() is False
    assert _tf_reference.numpy_behaviour_on() is False  # nor this process


def test_promotion_table_runs_tnp_as_the_probe_does():
    """The promotion table's tensorflow column comes from the same reference process as the
    probe's (one owner): tnp's sqrt of int32, as raw tnp answers it."""
    from dtype_explorer import promotion_table
    from dtype_explorer.records import UNARY, pair_key

    table = promotion_table(
        "sqrt", dtypes=["int32"], backends="numpy", references=["tensorflow"], progress=False
    )
    cell = table.references["tensorflow"][pair_key("int32", UNARY)]
    assert cell.error is None and cell.dtype == _raw_tnp()[("ops.sqrt", "int32")], cell

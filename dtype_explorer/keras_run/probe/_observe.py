"""What every probe path shares: how a failed spec is told from a Keras error, how the eager
outputs become the ``output`` steps and the verdict, the op trace opened (or not) around a
call, and small notes and conversions."""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable
from typing import Any

from dtype_explorer import dtypes
from dtype_explorer.errors import InvalidSpecError, keras_message
from dtype_explorer.keras_run import _expect as expect
from dtype_explorer.keras_run import _rules as rules
from dtype_explorer.keras_run._tool_error import is_tool_error, unimplemented
from dtype_explorer.keras_run.probe._fields import ProbeFields
from dtype_explorer.keras_run.trace import op_trace
from dtype_explorer.records import (
    UNSUPPORTED,
    CastStep,
    ErrorInfo,
    Expectation,
)

MAX_MESSAGE = 2000


class Invalid(Exception):
    """The spec cannot make a valid call (Keras's own message is kept); ``called``: the call
    the probe was making, when it was recorded (``records.KerasCall``: its constructor raised,
    and "copy as code" writes the constructor that raises)."""

    def __init__(self, error: BaseException, where: str):
        super().__init__(str(error))
        self.error = error
        self.where = where
        self.called: Any = None


def traced(trace: bool, *, numerics: bool = True) -> contextlib.AbstractContextManager[Any]:
    return op_trace(numerics=numerics) if trace else contextlib.nullcontext()


def outcome(
    outputs,
    error,
    steps,
    documented: rules.Documented,
    declared: tuple[str, ...],
    basis,
    *,
    described: Callable[[Any], tuple[tuple[str, ...], list[Any]]] | None = None,
    expectations: list[Expectation] | None = None,
    expected: Expectation | None = None,
) -> ProbeFields:
    """The answer's fields from the eager call's outputs (or its error): the ``output`` steps,
    the observed dtypes, the device and the verdict. ``described(outputs)`` gives the output
    dtypes and the tensors among them (default: every tensor in Keras's tree; an op names its
    Python values too, ``python_int``). With ``expectations`` (``keras_run/_expect.py``), the one
    in ``expected`` is the documented dtype the verdicts use; every output gets a verdict."""
    # 1. What was expected: the documented rule, or the expectation that judges.
    fields: ProbeFields = {
        "documented_dtype": documented.dtype,
        "declared_dtype": declared[0] if declared else None,
        "result_type_args": documented.result_type_args,
        "basis": tuple(basis),
    }
    if expectations is not None:
        _expected_fields(fields, documented, declared, expectations, expected)
    documented = rules.Documented(
        fields["documented_dtype"], documented.basis, documented.result_type_args
    )
    # 2. An error is the answer.
    if error is not None:
        fields.update(
            status="error",
            error=error_info(error, "call"),
            verdict="error",
            cast_path=tuple(steps),
        )
        return fields
    # 3. The output steps, each output's verdict and the worst of them.
    out_dtypes, tensors = (described or output_leaves)(outputs)
    container = type(outputs).__name__ if isinstance(outputs, tuple | list) else None
    for i, dtype in enumerate(out_dtypes):
        note = output_note(dtype, documented.dtype)
        if dtype.startswith("python_"):
            note = f"a Python {dtype.removeprefix('python_')}, not a tensor; {note}"
        if container is not None and len(out_dtypes) > 1:  # ops.shape: a tuple of Python ints
            note = f"item {i} of a Python {container}: {note}"
        steps.append(CastStep(stage="output", dtype=dtype, index=i, note=note))
    observed = out_dtypes[0] if out_dtypes else None
    each, overall = expect.verdicts(documented.dtype, tuple(declared), tuple(out_dtypes))
    fields.update(
        status="ok",
        output_dtype=observed,
        output_dtypes=out_dtypes,
        device=device(tensors[0]) if tensors else "cpu",
        cast_path=tuple(steps),
        verdict=overall,
        output_verdicts=each,
    )
    # 4. A Python value has no dtype: no dtype rule judges it.
    judged = fields["verdict"] in ("as-documented", "deviates")
    if observed is not None and observed.startswith("python_") and judged:
        kind = observed.removeprefix("python_")
        fields["verdict"] = "undocumented"
        fields["basis"] = (
            *fields["basis"],
            f"the output is a Python {kind}, not a tensor: no dtype rule applies to it",
        )
    return fields


def _expected_fields(
    fields: ProbeFields,
    documented: rules.Documented,
    declared: tuple[str, ...],
    expectations: list[Expectation],
    expected: Expectation | None,
) -> None:
    """The expectations side by side (the declared one last), and ``expected``'s dtype as the
    documented one the verdicts use."""
    fields["documented_dtype"] = expected.dtype if expected is not None else None
    fields["expected_by"] = expected.source if expected is not None else None
    said = (
        (Expectation(source="declared", dtype=declared[0], basis="Keras's symbolic call"),)
        if declared
        else ()
    )
    fields["expectations"] = (*expectations, *said)
    if expected is not None and expected.dtype != documented.dtype:
        fields["basis"] = (*fields["basis"], f"expected {expected.dtype}: {expected.basis}")


def output_leaves(outputs: Any) -> tuple[tuple[str, ...], list[Any]]:
    """Every output, named: a tensor by its dtype, a Python value as ``python_int``,
    ``python_float``, ``python_bool``, ``python_str``, ... (``ops.size`` returns a Python int
    on some backends; a user's layer may return one), a call that returned only ``None`` as
    ``python_NoneType``; and the tensors among them."""
    import keras

    if isinstance(outputs, (str, bytes)):
        leaves: list[Any] = [outputs]
    else:
        leaves = [leaf for leaf in keras.tree.flatten(outputs) if leaf is not None]
    if not leaves:
        return ("python_NoneType",), []
    named = tuple(leaf_dtype(leaf) for leaf in leaves)
    return named, [leaf for leaf in leaves if hasattr(leaf, "dtype")]


def leaf_dtype(value: Any) -> str:
    """A value's dtype; ``python_int`` (``python_bool``, ...) for a Python value."""
    import keras

    if hasattr(value, "dtype"):  # a tensor, or a NumPy scalar (np.float64 is a float too)
        try:
            return keras.backend.standardize_dtype(value.dtype)
        except Exception:
            return str(value.dtype)
    for kind in (bool, int, float, complex, str):
        if isinstance(value, kind):
            return f"python_{kind.__name__}"
    return f"python_{type(value).__name__}"


def converted_dtype(sample: Any, input_dtype: str | None = None) -> str:
    """The dtype ``sample`` has after a layer's input conversion, as Keras's
    ``DTypePolicy.convert_input`` does it: a backend tensor (on numpy, a NumPy array) is kept;
    an array is ``convert_to_tensor(x)``, retried with ``dtype=input_dtype`` on a
    ``TypeError``. Where that conversion fails (Keras refuses it, and so will the call) the
    value's own dtype is kept: the call's error is Keras's answer, never this step's."""
    import keras

    if keras.ops.is_tensor(sample):
        return dtypes.describe(sample)
    try:
        try:
            return dtypes.describe(keras.ops.convert_to_tensor(sample))
        except TypeError:
            if input_dtype is None:
                raise
            return dtypes.describe(keras.ops.convert_to_tensor(sample, dtype=input_dtype))
    except Exception:
        return leaf_dtype(sample)


def conversion_note(given: str, conv: str, converts: bool) -> str:
    if not converts:
        return "not converted: this layer takes its inputs as given"
    if conv == given:
        return "backend tensor, dtype kept"
    return f"{given} -> {conv}: the backend's tensor conversion"


def output_note(dtype: str, documented: str | None) -> str:
    if documented is None:
        return "no documented rule"
    return "as documented" if dtype == documented else f"documented {documented}"


def broadcast(input_dtypes: tuple[str, ...], arity: int) -> tuple[str, ...]:
    for name in input_dtypes:
        dtypes.validate(name)
    if len(input_dtypes) == arity:
        return tuple(input_dtypes)
    if len(input_dtypes) == 1:
        return tuple(input_dtypes) * arity
    raise InvalidSpecError(
        f"this target takes {arity} input(s); got {len(input_dtypes)} input dtypes {input_dtypes}"
    )


def device(tensor: Any) -> str:
    if hasattr(tensor, "devices"):  # jax
        device = next(iter(tensor.devices()))
        return f"{device.platform}:{device.id}"
    device = getattr(tensor, "device", None)
    if device is None:
        return "cpu"
    text = str(device)
    if text.startswith("/job"):  # tensorflow: /job:localhost/replica:0/task:0/device:CPU:0
        return text.rsplit("device:", 1)[-1].lower()
    return text


def error_info(error: BaseException, where: str) -> ErrorInfo:
    """The error as a result carries it; ``where="tool"`` when dtype-explorer's own code failed
    (``_tool_error``): the probe then makes it ``invalid``, never Keras's answer; ``where`` is
    ``UNSUPPORTED`` where Keras's openvino backend does not implement what was asked
    (:func:`unimplemented`): Keras's own answer, in its words, drawn as not supported."""
    message = keras_message(str(error), limit=MAX_MESSAGE)
    raiser = unimplemented(error)
    if is_tool_error(error):
        where = "tool"
    elif raiser is not None:
        where = UNSUPPORTED
        message = message or f"{raiser} raises NotImplementedError (no message)"
    return ErrorInfo(type=type(error).__name__, message=message, where=where)


#: The packages whose code is a backend's own: an error raised in one of them (or in Keras's
#: ``keras/src/backend/``) is the backend refusing, not Keras checking the user's arguments.
FRAMEWORKS = ("jax", "jaxlib", "torch", "tensorflow", "numpy", "openvino", "scipy", "ml_dtypes")


def _frame_module(filename: str) -> str | None:
    """The dotted module of a frame in Keras's backend code or a framework, else ``None``."""
    path = "/" + filename.replace("\\", "/").removesuffix(".py")
    if "/keras/src/backend/" in path:
        return "keras.src.backend." + path.split("/keras/src/backend/", 1)[1].replace("/", ".")
    parts = path.split("/")
    for k in range(len(parts) - 1, 0, -1):
        if parts[k] in FRAMEWORKS and parts[k - 1].endswith("-packages"):
            return ".".join(parts[k:])
    return None


def _frame_op(frame: Any, filename: str, name: str) -> str | None:
    """A frame as ``module.function`` where it is backend code (the op trace's wrapper stands
    for the function it wraps), ``""`` for a frame to look through (the trace's own), else
    ``None``."""
    if filename.replace("\\", "/").endswith("dtype_explorer/keras_run/trace/_op_trace.py"):
        fn = frame.f_locals.get("fn") if name in ("traced", "_called") else None
        module = getattr(fn, "__module__", None) or ""
        if module.startswith("keras.src.backend.") or module.split(".")[0] in FRAMEWORKS:
            return f"{module}.{fn.__qualname__}"
        return ""
    if filename.replace("\\", "/").endswith("dtype_explorer/keras_run/trace/_operators.py"):
        return ""  # the operators' hooks (torch's TorchFunctionMode, the tensor classes')
    module = _frame_module(filename)
    return None if module is None else f"{module}.{name}"


def backend_refusal(error: BaseException) -> str | None:
    """The backend op that raised ``error``: where its traceback ends inside Keras's
    ``keras/src/backend/`` or a framework (``numpy.linalg._linalg.qr``), the outermost frame of
    that innermost run, as ``module.function``; ``None`` where it ends in Keras's own layer
    code (its argument checks) or elsewhere. The op trace's wrappers are looked through (each
    names the backend function it wraps).

    >>> import numpy as np
    >>> try:
    ...     np.linalg.qr(np.ones((2, 2), "float16"))
    ... except TypeError as error:
    ...     print(backend_refusal(error))
    numpy.linalg._linalg.qr
    """
    found = None
    for frame, _ in reversed(list(traceback.walk_tb(error.__traceback__))):
        op = _frame_op(frame, frame.f_code.co_filename, frame.f_code.co_name)
        if op is None:
            break
        found = op or found
    return found

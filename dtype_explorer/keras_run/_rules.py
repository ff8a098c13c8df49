"""The documented expectation for a probe, and the basis it rests on.

Three rules Keras documents decide every documented dtype here:

1. the ``DTypePolicy`` autocast rule: float inputs are cast to the layer's input (compute)
   dtype; int, bool and string inputs pass through (``DTypePolicy.convert_input``);
2. variables are stored in ``variable_dtype`` and read in ``compute_dtype`` inside ``call``;
3. the promotion lattice behind ``keras.backend.result_type``, which decides what an op
   returns for mixed inputs (run here, on the probing backend, never re-implemented).

Each function returns the dtype together with a human-readable basis.
"""

from __future__ import annotations

from dataclasses import dataclass

from dtype_explorer.dtypes import PYTHON_SCALARS
from dtype_explorer.errors import first_line
from dtype_explorer.keras_run.catalog import LayerEntry, OpEntry


@dataclass(frozen=True)
class Documented:
    """A documented dtype, the reasons for it, and the ``result_type`` call that decided it."""

    dtype: str | None
    basis: tuple[str, ...]
    result_type_args: tuple[str, ...] = ()


def result_type(*names: str) -> str:
    """``keras.backend.result_type`` with weak Python scalars given by name."""
    from keras import backend

    return backend.result_type(*(PYTHON_SCALARS.get(n, n) for n in names))


def autocast(dtype: str, *, policy_dtype: str, autocast: bool, converts: bool) -> tuple[str, str]:
    """What the autocast rule does to one converted input: its dtype and why."""
    from keras import backend

    if not converts:
        return dtype, f"{dtype} kept: this layer does not convert its inputs"
    if not backend.is_float_dtype(dtype):
        return dtype, f"{dtype} kept: not a float (only float inputs are autocast)"
    if not autocast:
        return dtype, f"{dtype} kept: the layer has autocast=False"
    if dtype == policy_dtype:
        return dtype, f"{dtype} kept: already the layer's input dtype"
    return (
        policy_dtype,
        f"{dtype} -> {policy_dtype}: float input autocast to the layer's input dtype",
    )


def _rt_basis(args: tuple[str, ...], result: str) -> str:
    return f"result_type({', '.join(args)}) = {result}"


def for_layer(
    entry: LayerEntry,
    *,
    compute_dtype: str,
    autocast_dtypes: tuple[str, ...],
    computes_with: tuple[str, ...] | None = None,
) -> Documented:
    """Documented output dtype of a layer given its inputs' dtypes after the autocast rule.

    ``computes_with``: for a layer of the ``compute`` contract that turns autocast off
    (``autocast=False``), the dtypes of the variables its ``call()`` read; the policy rule does
    not apply to it, so what it computes with decides (:func:`for_autocast_off`). ``None``:
    autocast is on. (LayerNormalization and Embedding turn it off too, and manage their
    dtypes by their own stated rules: their contracts, ``self-managed`` and ``layer-dtype``.)"""
    floats = tuple(
        d
        for d, role in zip(autocast_dtypes, entry.input_roles(len(autocast_dtypes)))
        if role != "index"
    )
    if computes_with is not None and entry.contract == "compute":
        return for_autocast_off(entry.name, floats, computes_with)
    if entry.contract == "own-output":
        return Documented(
            None, (f"{entry.name} chooses its output dtype itself; no policy rule decides it",)
        )
    if entry.contract in ("layer-dtype", "self-managed"):
        why = (
            "returns the layer's compute dtype whatever its input"
            if entry.contract == "layer-dtype"
            else "casts inside call() by its own rules and returns the compute dtype"
        )
        return Documented(compute_dtype, (f"{entry.name} {why}: {compute_dtype}",))
    try:
        if entry.contract == "compute":
            args = (*floats, compute_dtype)
            result = result_type(*args)
            basis = (
                f"{entry.name} computes with weights read in the compute dtype {compute_dtype}",
                _rt_basis(args, result),
            )
        else:
            args = floats
            result = result_type(*args)
            basis = (
                f"{entry.name} passes its input dtype through",
                *((_rt_basis(args, result),) if len(args) > 1 else ()),
            )
    except ValueError as error:  # float8 types do not promote implicitly
        return Documented(None, (f"result_type raises: {first_line(str(error))}",))
    return Documented(result, basis, args)


def for_autocast_off(name: str, inputs: tuple[str, ...], variables: tuple[str, ...]) -> Documented:
    """A layer with ``autocast=False``: Keras's policy casts neither its inputs nor its
    variables' reads (``Layer.autocast``), so the policy's compute dtype documents nothing
    about it; what it computes with does: its float variables as read (a head that computes
    with bfloat16 weights), else its float inputs, promoted by ``result_type``. Neither
    float: undocumented.

    >>> for_autocast_off("Head", ("float32",), ("bfloat16",)).dtype
    'bfloat16'
    >>> for_autocast_off("Head", ("float16",), ()).dtype
    'float16'
    """
    from keras import backend

    off = f"{name} has autocast=False: the policy's compute dtype does not apply"
    weights = tuple(dict.fromkeys(d for d in variables if backend.is_float_dtype(d)))
    given = tuple(dict.fromkeys(d for d in inputs if backend.is_float_dtype(d)))
    args, what = (weights, "its variables as read") if weights else (given, "its inputs")
    if not args:
        return Documented(None, (off, "no float variable or input decides what it computes in"))
    try:
        result = result_type(*args)
    except ValueError as error:
        return Documented(None, (off, f"result_type raises: {first_line(str(error))}"))
    basis = (f"{off}; it computes with {what}", _rt_basis(args, result))
    return Documented(result, basis, args)


def for_op(
    entry: OpEntry, input_dtypes: tuple[str, ...], *, kwargs: dict | None = None
) -> Documented:
    """Documented output dtype of a ``keras.ops`` function from its rule.

    ``result_type`` runs under the floatx in force, so ``floatx="bfloat16"`` changes what a
    weak float or an int-to-float rule documents (Keras resolves them at 16 bits).
    """
    name = entry.function_name
    why = f" ({entry.rule_basis})" if entry.rule_basis else ""
    if entry.rule == "dtype-arg":
        asked = (kwargs if kwargs is not None else entry.kwargs).get("dtype")
        if asked is None:
            return Documented(
                None, (f"ops.{name} with dtype=None: Keras documents no default dtype rule",)
            )
        from keras import backend

        try:
            dtype = backend.standardize_dtype(asked)
        except ValueError as error:
            return Documented(None, (f"dtype={asked!r} is not a dtype: {first_line(str(error))}",))
        return Documented(dtype, (f"ops.{name} returns the dtype= it is given: {dtype}",))
    if not input_dtypes and entry.rule in ("promote", "promote-float"):
        return Documented(None, (f"ops.{name} has no probed input to promote",))
    try:
        if entry.rule == "promote":
            result = result_type(*input_dtypes)
            return Documented(
                result,
                (f"ops.{name} promotes its inputs{why}", _rt_basis(input_dtypes, result)),
                input_dtypes,
            )
        if entry.rule == "promote-float":
            args = (*input_dtypes, "python_float")
            result = result_type(*args)
            return Documented(
                result,
                (
                    f"ops.{name} returns a float: inputs promoted with a weak float{why}",
                    _rt_basis(args, result),
                ),
                args,
            )
    except ValueError as error:
        return Documented(None, (f"result_type raises: {first_line(str(error))}",))
    if entry.rule == "bool":
        return Documented("bool", (f"ops.{name} returns a boolean tensor{why}",))
    if entry.rule == "index":
        return Documented("int32", (f"ops.{name} returns int32 indices{why}",))
    return Documented(None, (f"Keras documents no dtype rule for ops.{name}",))


def verdict(
    *, status: str, documented: str | None, declared: str | None, observed: str | None
) -> str:
    """Name the disagreement between the documented, declared and observed dtypes."""
    if status != "ok":
        return "error"
    if documented is None:
        return "undocumented" if declared in (None, observed) else "declared-mismatch"
    if observed != documented:
        return "deviates"
    if declared is not None and declared != observed:
        return "declared-mismatch"
    return "as-documented"

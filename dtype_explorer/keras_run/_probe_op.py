"""Probe a ``keras.ops`` function the way a user calls it: every probed input converted to a
backend tensor of its dtype first, weak Python scalars as Python numbers, fixed inputs
(indices, shapes, axes) as the catalog gives them; Python outputs named (``python_int``)."""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import _expect as expect
from dtype_explorer.keras_run import _rules as rules
from dtype_explorer.keras_run import catalog
from dtype_explorer.keras_run._numerics import measure
from dtype_explorer.keras_run._observe import (
    Invalid,
    broadcast,
    leaf_dtype,
    outcome,
    traced,
)
from dtype_explorer.keras_run.catalog import (
    OpEntry,
)
from dtype_explorer.records import (
    CastStep,
    Expectation,
    Numerics,
    ProbeSpec,
)
from dtype_explorer.timing import ms


def run_op(spec: ProbeSpec, entry: OpEntry, timings: dict[str, float], trace: bool) -> dict:
    """Probe one op the way a user calls it: every probed input converted to a backend tensor
    of its dtype first (the ``converted`` step), weak Python scalars passed as Python numbers,
    fixed inputs (indices, shapes, axes) as the catalog gives them."""
    import keras

    if entry.skip:
        raise InvalidSpecError(f"{entry.name} cannot be probed standalone: {entry.skip}")
    kwargs = dict(entry.kwargs) | dict(spec.kwargs)
    input_dtypes = _op_input_dtypes(spec, entry, kwargs)
    shapes = _op_shapes(spec, entry)
    rng = np.random.default_rng(spec.seed)
    samples: dict[int, Any] = {}
    tensors: dict[int, Any] = {}
    made: list[tuple[dict, int | None, Any]] = []  # every leaf in call order, for the reruns
    steps: list[CastStep] = []

    def sample(leaf: dict, i: int | None) -> Any:
        if i is None:  # a fixed input: int32 indices, a bool mask, float32 image transforms
            return catalog.op_calls.values(leaf["values"], tuple(leaf["shape"]), leaf["dtype"], rng)
        given, shape = input_dtypes[i], shapes[i]
        if spec.user_values is not None:  # the user's own array or Python number, as given
            return spec.user_values[i].value()
        if given in dtypes.PYTHON_SCALARS:
            if spec.values == "default":
                return catalog.op_calls.python_scalar(leaf["values"], given)
            return dtypes.sample(given, shape, preset=spec.values, seed=spec.seed + i)
        if spec.values == "default":
            return catalog.op_calls.values(leaf["values"], shape, given, rng)
        return dtypes.sample(given, shape, preset=spec.values, seed=spec.seed + i)

    def eager(leaf: dict, i: int | None) -> Any:
        value = sample(leaf, i)
        made.append((leaf, i, value))
        if i is not None:
            samples[i] = value
        if isinstance(value, (bool, int, float)):
            return value
        tensor = op_tensor(value, input_dtypes[i] if i is not None else leaf["dtype"])
        if i is not None:
            tensors[i] = tensor
        return tensor

    def symbolic(leaf: dict, i: int | None) -> Any:
        given = leaf["dtype"] if i is None else input_dtypes[i]
        if given in dtypes.PYTHON_SCALARS:
            return samples[i]
        return keras.KerasTensor(tuple(leaf["shape"]) if i is None else shapes[i], dtype=given)

    try:
        args, named = catalog.op_calls.build(
            _with_shapes(entry.inputs, shapes), lambda leaf, i: eager(leaf, i)
        )
    except Exception as error:
        raise Invalid(error, "inputs") from error
    for i, given in enumerate(input_dtypes):
        note = "your value" if spec.user_values is not None else _given_note(given)
        steps.append(CastStep(stage="input", dtype=given, note=note, index=i))
        if given in dtypes.PYTHON_SCALARS:
            note = "weak Python scalar: it takes the other operand's type where it can"
            steps.append(CastStep(stage="converted", dtype=given, index=i, note=note))
            continue
        conv = op_described(tensors.get(i, samples.get(i)))
        note = (
            "backend tensor, dtype kept"
            if conv == given
            else f"{given} -> {conv}: keras.ops.convert_to_tensor(x, dtype={given!r})"
        )
        steps.append(
            CastStep(stage="converted", dtype=conv, index=i, changed=conv != given, note=note)
        )

    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sym_args, sym_named = catalog.op_calls.build(
                _with_shapes(entry.inputs, shapes), symbolic
            )
            declared = op_leaf_dtypes(
                catalog.op_calls.call(entry.name, sym_args, sym_named, kwargs)
            )
    except Exception:  # the symbolic call fails where eager may not (weak scalars, callables)
        declared = ()
    timings["declared_ms"] = ms(t0)

    t0 = time.perf_counter()
    outputs, error = None, None
    with traced(trace) as recorded:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                outputs = catalog.op_calls.call(entry.name, args, named, kwargs)
        except Exception as exc:
            error = exc
    timings["call_ms"] = ms(t0)
    documented = rules.for_op(entry, input_dtypes, kwargs=kwargs)
    t0 = time.perf_counter()
    expectations = expect.for_op(
        entry, documented, _with_shapes(entry.inputs, shapes), made, spec.backend
    )
    converted = tuple(s.dtype for s in steps if s.stage == "converted")
    expected = expect.winner(expectations, kind="op", converted=converted)
    timings["expect_ms"] = ms(t0)
    fields = op_outcome(outputs, error, steps, documented, declared, expectations, expected)
    fields["trace"] = recorded.steps() if recorded is not None else ()
    fields["trace_dropped"] = recorded.dropped if recorded is not None else 0
    arrays = [v for v in samples.values() if isinstance(v, np.ndarray)]
    if outputs is not None:
        t0 = time.perf_counter()

        def reference(dtype: str) -> Any:
            """The same op on the same values, every probed number array in ``dtype``."""
            replay = iter(made)

            def again(leaf: dict, i: int | None) -> Any:
                _, _, value = next(replay)
                if isinstance(value, (bool, int, float)):
                    return value
                if i is None:
                    return op_tensor(value, leaf["dtype"])
                numeric = dtypes.family(dtypes.describe(value)) in ("int", "uint", "float")
                if isinstance(value, np.ndarray) and numeric:
                    return op_tensor(value.astype(dtype), dtype)
                return op_tensor(value, input_dtypes[i])

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ref_args, ref_named = catalog.op_calls.build(
                    _with_shapes(entry.inputs, shapes), again
                )
                return _op_tensors(catalog.op_calls.call(entry.name, ref_args, ref_named, kwargs))

        fields["numerics"] = _op_numerics(
            outputs, arrays, steps, reference if entry.rule in _ARITHMETIC else None
        )
        timings["numerics_ms"] = ms(t0)
    return fields


#: Op rules whose result is arithmetic on the inputs' values, checked against the same op in a
#: wider type (a bool, an index or a dtype= result cannot wrap around or truncate, and an op
#: with no rule may mean something else on floats: ``bincount``, the bitwise ops).
_ARITHMETIC = ("promote", "promote-float")


def _op_numerics(
    outputs: Any, arrays: list[np.ndarray], steps: list[CastStep], reference: Any
) -> Numerics:
    """inf/NaN from finite input, values against ``reference``; a value that cannot be read
    back (TensorFlow's 0-d bfloat16 tensors have no NumPy view) is said, not raised: the
    dtypes are the answer."""
    try:
        return measure(_op_tensors(outputs), arrays, steps, reference=reference)
    except Exception as error:
        return Numerics(note=f"values not readable as NumPy: {type(error).__name__}")


def _op_input_dtypes(spec: ProbeSpec, entry: OpEntry, kwargs: dict[str, Any]) -> tuple[str, ...]:
    """The probed inputs' dtypes; a creation op's probed dtype goes to ``dtype=`` instead."""
    if entry.probe == "inputs":
        return broadcast(spec.input_dtypes, _op_arity(spec, entry))
    for name in spec.input_dtypes:
        dtypes.validate(name)
    if entry.probe == "dtype_kwarg" and "dtype" not in spec.kwargs:
        given = spec.input_dtypes[0] if spec.input_dtypes else "float32"
        if given in dtypes.PYTHON_SCALARS:
            raise InvalidSpecError(
                f"{entry.name} takes its dtype as dtype=, and {given} is not a dtype; "
                "pass kwargs={'dtype': None} for its default"
            )
        kwargs["dtype"] = given
    return ()


def _op_arity(spec: ProbeSpec, entry: OpEntry) -> int:
    """How many probed inputs this call has: an op taking a list of tensors takes as many as
    the spec gives shapes for (``ops.concatenate`` of three tensors), every other op its own."""
    if entry.input_style == "list" and spec.shapes is not None and len(spec.shapes) > 1:
        return len(spec.shapes)
    return entry.arity


def _op_shapes(spec: ProbeSpec, entry: OpEntry) -> tuple[tuple[int, ...], ...]:
    arity = _op_arity(spec, entry)
    if spec.shapes is None:
        return entry.shapes
    if len(spec.shapes) == arity:
        return spec.shapes
    if len(spec.shapes) == 1:
        return spec.shapes * arity
    raise InvalidSpecError(
        f"{entry.name} takes {arity} probed input(s); got {len(spec.shapes)} shapes"
    )


def _with_shapes(inputs: tuple[dict, ...], shapes: tuple[tuple[int, ...], ...]) -> tuple:
    """The op's inputs with the probed tensors' shapes replaced by ``shapes``; a list of
    tensors grows (its last item repeated) to take the shapes beyond the catalog's count."""
    counter = iter(shapes)
    extra = [len(shapes) - _probed_count(inputs)]

    def one(leaf: dict) -> dict:
        if leaf["kind"] in ("list", "tuple", "varargs"):
            items = list(leaf["items"])
            if leaf["kind"] == "list" and items and extra[0] > 0:
                items += [items[-1]] * extra[0]
                extra[0] = 0
            return {**leaf, "items": [one(item) for item in items]}
        if leaf["kind"] == "tensor" and leaf["dtype"] == "probe":
            return {**leaf, "shape": list(next(counter))}
        return leaf

    return tuple(one(leaf) for leaf in inputs)


def _probed_count(inputs: tuple[dict, ...] | list[dict]) -> int:
    return sum(
        _probed_count(leaf["items"])
        if leaf["kind"] in ("list", "tuple", "varargs")
        else int(leaf["kind"] == "tensor" and leaf["dtype"] == "probe")
        for leaf in inputs
    )


def op_tensor(value: Any, dtype: str) -> Any:
    """``value`` as the backend tensor a user would pass: ``convert_to_tensor(x, dtype)``.

    A NumPy array handed to an op is converted by the op itself, and on JAX under
    ``floatx="bfloat16"`` that conversion makes every array float32; an explicit dtype keeps
    what the user asked for (or shows the backend cannot: JAX makes float64 float32)."""
    import keras

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return keras.ops.convert_to_tensor(value, dtype=dtype)
    except Exception:  # no tensor of this dtype on this backend: the op gets the array
        return value


def _given_note(given: str) -> str:
    return "a Python number" if given in dtypes.PYTHON_SCALARS else "the sample given"


def op_described(value: Any) -> str:
    """A leaf's dtype; ``python_int`` (``python_bool``, ...) for a Python value."""
    return leaf_dtype(value)


def _op_leaves(outputs: Any) -> list[Any]:
    import keras

    if isinstance(outputs, (str, bytes)):
        return [outputs]
    return [leaf for leaf in keras.tree.flatten(outputs) if leaf is not None]


def op_leaf_dtypes(outputs: Any) -> tuple[str, ...]:
    return tuple(op_described(leaf) for leaf in _op_leaves(outputs))


def _op_tensors(outputs: Any) -> list[Any]:
    return [leaf for leaf in _op_leaves(outputs) if hasattr(leaf, "dtype")]


def op_outcome(
    outputs: Any,
    error: Any,
    steps: list[CastStep],
    documented: rules.Documented,
    declared,
    expectations: list[Expectation] | None = None,
    expected: Expectation | None = None,
) -> dict:
    """As ``outcome``, with Python values (``ops.size``, ``ops.shape``) named as
    ``python_int``, ``python_bool``, ... instead of being dropped."""
    return outcome(
        outputs,
        error,
        steps,
        documented,
        declared,
        documented.basis,
        described=lambda found: (op_leaf_dtypes(found), _op_tensors(found)),
        expectations=expectations,
        expected=expected,
    )

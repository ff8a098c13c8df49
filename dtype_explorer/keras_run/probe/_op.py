"""Probe a ``keras.ops`` function the way a user calls it: every probed input converted to a
backend tensor of its dtype first, weak Python scalars as Python numbers, fixed inputs
(indices, shapes, axes) as the catalog gives them; Python outputs named (``python_int``)."""

from __future__ import annotations

import functools
import warnings
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import _expect as expect
from dtype_explorer.keras_run import _rules as rules
from dtype_explorer.keras_run import catalog
from dtype_explorer.keras_run._arrays import unread_values
from dtype_explorer.keras_run._numerics import measure
from dtype_explorer.keras_run.catalog import (
    OpEntry,
)
from dtype_explorer.keras_run.probe._called import op_called
from dtype_explorer.keras_run.probe._fields import ProbeFields
from dtype_explorer.keras_run.probe._observe import (
    Invalid,
    broadcast,
    error_info,
    leaf_dtype,
    outcome,
)
from dtype_explorer.keras_run.probe._op_grad import NoGradients, op_gradients
from dtype_explorer.keras_run.probe._stages import declare, recorded_call, timed
from dtype_explorer.records import (
    UNSUPPORTED,
    CastStep,
    ErrorInfo,
    Expectation,
    InputValue,
    Numerics,
    ProbeSpec,
)


def run_op(spec: ProbeSpec, entry: OpEntry, timings: dict[str, float], trace: bool) -> ProbeFields:
    """Probe one op the way a user calls it: every probed input converted to a backend tensor
    of its dtype first (the ``converted`` step), weak Python scalars passed as Python numbers,
    fixed inputs (indices, shapes, axes) as the catalog gives them.

    Args:
        spec: the question (its policy and floatx already set by ``_probe.run``).
        entry: the op's catalog entry.
        timings: filled with each stage's milliseconds.
        trace: whether to open the op trace.

    Returns:
        The result's fields; a spec whose inputs cannot be made raises ``Invalid``.
    """
    if entry.skip:
        raise InvalidSpecError(f"{entry.name} cannot be probed standalone: {entry.skip}")
    # 1. Inputs: the probed inputs' dtypes and shapes (a creation op's dtype goes to dtype=).
    kwargs = dict(entry.kwargs) | dict(spec.kwargs)
    inputs = _OpInputs(spec, entry, kwargs)
    _check_keywords(entry, inputs, spec.kwargs)
    # 2. Build the call: the user's values as given, the tool's samples as backend tensors,
    #    each fixed input as the catalog has it (a user keyword naming one replaces it).
    try:
        args, named = catalog.op_calls.build(inputs.leaves, inputs.eager)
    except Exception as error:
        raise Invalid(error, "inputs") from error
    if entry.name.rsplit(".", 1)[-1] not in catalog.op_calls.CONTROL_FLOW:
        catalog.op_calls.bound(catalog.op_calls.resolve(entry.name), args, kwargs)
    steps = _input_steps(spec, inputs)
    called_with = op_called(spec, entry, inputs, kwargs)  # for "copy as code"
    # 3. Declare: the same call on KerasTensors (Python scalars as they are).
    with timed(timings, "declared_ms"):
        declared = _declared_op(entry, inputs, kwargs)
    # 4. The recorded call.
    with timed(timings, "call_ms"):
        called = recorded_call(
            lambda: _quiet(catalog.op_calls.call, entry.name, args, named, kwargs), trace=trace
        )
    steps = _scalars_measured(steps, inputs, called.recorded)
    # 5. Expectations: result_type, the array libraries, the declared spec.
    documented = rules.for_op(entry, inputs.rule_dtypes(steps), kwargs=kwargs)
    with timed(timings, "expect_ms"):
        expectations = expect.for_op(entry, documented, inputs.leaves, inputs.made, spec.backend)
        converted = tuple(s.dtype for s in steps if s.stage == "converted")
        expected = expect.winner(expectations, kind="op", converted=converted)
    fields = op_outcome(
        called.outputs, called.error, steps, documented, declared, expectations, expected
    )
    fields["trace"] = called.steps()
    fields["trace_dropped"] = called.dropped
    fields["called"] = called_with
    # 6. Numerics: against the same op in a wider type, where its result is arithmetic.
    if called.outputs is not None:
        with timed(timings, "numerics_ms"):
            reference = functools.partial(inputs.reference, entry, kwargs)
            fields["numerics"] = _op_numerics(
                called.outputs,
                inputs.arrays(),
                steps,
                reference if entry.computes_on_values else None,
            )
    # 7. mode="fit": the gradient of the output w.r.t. the float inputs, on the same values.
    if spec.mode == "fit" and called.outputs is not None:
        with timed(timings, "fit_ms"):
            _gradient_stage(fields, inputs, entry, kwargs)
    return fields


def _gradient_stage(
    fields: ProbeFields, inputs: _OpInputs, entry: OpEntry, kwargs: dict[str, Any]
) -> None:
    """The ``fit`` field (``op_gradients``); a backend without gradients (numpy) or an op
    without a float input or output is not supported here, Keras's raise an error."""
    floats = inputs.float_tensors()
    names = [f"input {i}" if inputs.arity > 1 else "input" for i in range(inputs.arity)]
    try:
        fields["fit"] = op_gradients(lambda subs: inputs.rerun(entry, kwargs, subs), floats, names)
        fields["execution"] = f"eager call, then {fields['fit'].execution}"
    except NoGradients as why:
        fields.update(
            status="error",
            verdict="error",
            error=ErrorInfo(type="NoGradient", message=str(why), where=UNSUPPORTED),
        )
    except Exception as error:  # the backend's autodiff raised: its answer, in its words
        fields.update(status="error", verdict="error", error=error_info(error, "fit"))


def _check_keywords(entry: OpEntry, inputs: _OpInputs, kwargs: dict[str, Any]) -> None:
    """A user keyword may replace any fixed input of the op, never a probed one: that one is
    the question (its dtype is ``input_dtype``, its value ``values=``)."""
    clash = catalog.op_calls.probed_clashes(inputs.leaves, kwargs)
    if clash:
        raise InvalidSpecError(
            f"kwargs: {clash[0]!r} is a probed input of {entry.name} (its dtype is input_dtype, "
            f"its value values=[...]); received: kwargs[{clash[0]!r}] = "
            f"{str(kwargs[clash[0]])[:80]}. Give it as a value, or leave it out of kwargs"
        )


def _quiet(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` with its warnings silenced (they are about the sample, not the user)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


class _OpInputs:
    """The inputs stage of an op probe: the probed inputs' dtypes and shapes, and the values
    made for the eager call (kept in call order, for the reference rerun).

    Attributes:
        dtypes: the probed inputs' dtypes (none for a creation op: its dtype is ``dtype=``).
        shapes: the probed inputs' shapes.
        leaves: the op's argument structure with those shapes (``catalog.op_calls.build``).
        samples: each probed input's value by its index: an array, or a Python number.
        tensors: each probed input's backend tensor by its index.
        made: every leaf of the eager call in call order, with its index and its value.
    """

    def __init__(self, spec: ProbeSpec, entry: OpEntry, kwargs: dict[str, Any]) -> None:
        self.spec = spec
        catalog_inputs = entry.inputs
        if gives_every_array(spec, entry):  # the fixed arrays (indices) are the user's too
            catalog_inputs = catalog.op_calls.all_given(entry.inputs)
        self.arity = len(catalog.op_calls.probed(catalog_inputs))
        self.dtypes = _op_input_dtypes(spec, entry, kwargs, self.arity)
        self.shapes = _op_shapes(spec, entry, self.arity)
        self.leaves = _with_shapes(catalog_inputs, self.shapes)
        #: the probed inputs the catalog itself probes (a user's indices are not promoted)
        self.ruled = [
            i for i, leaf in enumerate(catalog.op_calls.probed(self.leaves)) if "fixed" not in leaf
        ]
        self.samples: dict[int, Any] = {}
        self.tensors: dict[int, Any] = {}
        self.made: list[tuple[dict, int | None, Any]] = []
        #: the dtype each made value was converted to a backend tensor of (``None``: passed
        #: as it is), in the order of ``made``
        self.asked: list[str | None] = []
        self._rng = np.random.default_rng(spec.seed)
        self.user = spec.user_values is not None

    def arrays(self) -> list[np.ndarray]:
        """The probed inputs' values as arrays (a user's list as NumPy reads it)."""
        found = [np.asarray(v) if isinstance(v, list) else v for v in self.samples.values()]
        return [v for v in found if isinstance(v, np.ndarray)]

    def rule_dtypes(self, steps: list[CastStep]) -> tuple[str, ...]:
        """The dtypes Keras's rule reads: the user's values as the op converts them (an op
        converts before it promotes: a list is not int64 to Keras), else the asked ones."""
        if not self.user:
            return self.dtypes
        converted = {s.index: s.dtype for s in steps if s.stage == "converted"}
        return tuple(converted.get(i, self.dtypes[i]) for i in self.ruled)

    def value(self, leaf: dict, i: int | None) -> Any:
        """The value of one leaf: a fixed input (int32 indices, a bool mask, float32 image
        transforms) from its preset; a probed one the user's own, or a sample of its dtype."""
        spec = self.spec
        if i is None:
            return catalog.op_calls.values(
                leaf["values"], tuple(leaf["shape"]), leaf["dtype"], self._rng
            )
        given, shape = self.dtypes[i], self.shapes[i]
        if spec.user_values is not None:  # the user's own array, list or number, as given
            return spec.user_values[i].as_given()
        if given in dtypes.PYTHON_SCALARS:
            if spec.values == "default":
                return catalog.op_calls.python_scalar(leaf["values"], given)
            return dtypes.sample(given, shape, preset=spec.values, seed=spec.seed + i)
        if spec.values == "default":
            return catalog.op_calls.values(leaf["values"], shape, given, self._rng)
        return dtypes.sample(given, shape, preset=spec.values, seed=spec.seed + i)

    def eager(self, leaf: dict, i: int | None) -> Any:
        """One leaf of the eager call: the user's value as given (an array, a list, a Python
        number: the op converts it itself), a Python number as it is, else a backend tensor
        (the tool's own sample and the catalog's fixed inputs)."""
        value = self.value(leaf, i)
        self.made.append((leaf, i, value))
        if i is not None:
            self.samples[i] = value
        if isinstance(value, (bool, int, float)) or (i is not None and self.user):
            self.asked.append(None)
            return value
        dtype = self.dtypes[i] if i is not None else leaf["dtype"]
        tensor = op_tensor(value, dtype)
        self.asked.append(None if tensor is value else dtype)
        if i is not None:
            self.tensors[i] = tensor
        return tensor

    def symbolic(self, leaf: dict, i: int | None) -> Any:
        """One leaf of the symbolic call: a ``KerasTensor``, a Python number as it is."""
        import keras

        given = leaf["dtype"] if i is None else self.dtypes[i]
        if given in dtypes.PYTHON_SCALARS:
            return self.samples[i]
        if i is not None and self.user and isinstance(self.samples.get(i), list):
            given = op_conversion(self.samples[i])[0]  # what the op makes of the list, not NumPy's
        shape = tuple(leaf["shape"]) if i is None else self.shapes[i]
        return keras.KerasTensor(shape, dtype=given)

    def float_tensors(self) -> dict[int, Any]:
        """The probed float inputs as the eager call's tensors (a user's array or list as
        the op converts it), by index: what ``mode="fit"`` differentiates with respect to."""
        found = {}
        for _, i, value in self.made:
            if i is None or isinstance(value, (bool, int, float)):
                continue
            tensor = self.tensors.get(i)
            if tensor is None:  # the user's own value: as the op's own conversion makes it
                import keras

                try:
                    tensor = keras.ops.convert_to_tensor(value)
                except Exception:  # a string, ...: no gradient (the call said how it went)
                    continue
            if dtypes.is_float(dtypes.describe(tensor)):
                found[i] = tensor
        return found

    def rerun(self, entry: OpEntry, kwargs: dict[str, Any], subs: dict[int, Any]) -> Any:
        """The eager call again on the same values, the probed inputs in ``subs`` replaced."""
        replay = iter(self.made)

        def again(leaf: dict, i: int | None) -> Any:
            _, _, value = next(replay)
            if i is not None and i in subs:
                return subs[i]
            if i is not None and i in self.tensors:
                return self.tensors[i]
            if i is None and not isinstance(value, (bool, int, float)):
                return op_tensor(value, leaf["dtype"])
            return value

        args, named = catalog.op_calls.build(self.leaves, again)
        return catalog.op_calls.call(entry.name, args, named, kwargs)

    def reference(self, entry: OpEntry, kwargs: dict[str, Any], dtype: str) -> Any:
        """The same op on the same values, every probed number array in ``dtype``."""
        replay = iter(self.made)

        def again(leaf: dict, i: int | None) -> Any:
            _, _, value = next(replay)
            value = np.asarray(value) if isinstance(value, list) else value
            if isinstance(value, (bool, int, float)):
                return value
            if i is None or "fixed" in leaf:  # indices, masks: as they were, in every run
                return op_tensor(value, leaf.get("fixed", leaf["dtype"]))
            family = dtypes.family(dtypes.describe(value))
            # bools as data are numbers to the op (rms_normalization(bool)); a condition is not
            numeric = family in ("int", "uint", "float") or (
                family == "bool" and leaf.get("role") == "data"
            )
            if isinstance(value, np.ndarray) and numeric:
                return op_tensor(value.astype(dtype), dtype)
            return op_tensor(value, self.dtypes[i])

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            args, named = catalog.op_calls.build(self.leaves, again)
            return _op_tensors(catalog.op_calls.call(entry.name, args, named, kwargs))


def _input_steps(spec: ProbeSpec, inputs: _OpInputs) -> list[CastStep]:
    """The ``input`` and ``converted`` steps of each probed input (a user's value converted
    to the ``input_dtype`` asked has an ``asked`` step between them)."""
    if inputs.user:
        return [s for i, v in enumerate(spec.user_values or ()) for s in _given_steps(i, v, inputs)]
    steps: list[CastStep] = []
    for i, given in enumerate(inputs.dtypes):
        steps.append(CastStep(stage="input", dtype=given, note=_given_note(given), index=i))
        if given in dtypes.PYTHON_SCALARS:
            steps.append(_weak_step(given, i))
            continue
        conv = op_described(inputs.tensors.get(i, inputs.samples.get(i)))
        note = (
            "backend tensor, dtype kept"
            if conv == given
            else f"{given} -> {conv}: keras.ops.convert_to_tensor(x, dtype={given!r})"
        )
        steps.append(
            CastStep(stage="converted", dtype=conv, index=i, changed=conv != given, note=note)
        )
    return steps


def _weak_step(given: str, i: int) -> CastStep:
    note = "weak Python scalar: Keras's rules give it the other operand's type where they can"
    return CastStep(stage="converted", dtype=given, index=i, note=note)


def _scalars_measured(steps: list[CastStep], inputs: _OpInputs, recorded: Any) -> list[CastStep]:
    """Each Python scalar's ``converted`` step worded from what the op did with it, where the
    op trace measured its conversion inside the op losing its value (``trace.unowned``:
    torch's backend makes a Python float ``floatx`` whatever the other operand's dtype)."""
    lost = list(getattr(recorded, "unowned", ()))
    if not lost:
        return steps
    out = []
    for step in steps:
        value = inputs.samples.get(step.index) if step.dtype in dtypes.PYTHON_SCALARS else None
        if step.stage == "converted" and isinstance(value, (int, float)):
            match = next((x for x in lost if x.examples and x.examples[0][0] == value), None)
            if match is not None:
                note = f"weak by Keras's rules, yet the op converted it itself: {match.text()}"
                step = step.model_copy(update={"note": note})
        out.append(step)
    return out


def _given_steps(i: int, value: InputValue, inputs: _OpInputs) -> list[CastStep]:
    """One user value's steps: as given, as asked (``input_dtype`` converted it first), and
    as the op's own conversion makes it (``convert_to_tensor(x)``, no dtype: the op gets the
    value itself)."""
    own = value.given_dtype or value.dtype
    note = (
        f"your value, a Python list ({own} as NumPy reads it; the op converts the list itself)"
        if value.kind == "list"
        else "your value"
    )
    steps = [CastStep(stage="input", dtype=own, note=note, index=i)]
    if value.given_dtype is not None:
        note = f"{own} -> {value.dtype}: converted as input_dtype asks, before Keras sees it"
        steps.append(CastStep(stage="asked", dtype=value.dtype, index=i, changed=True, note=note))
    if value.dtype in dtypes.PYTHON_SCALARS:
        return [*steps, _weak_step(value.dtype, i)]
    conv, how = op_conversion(inputs.samples[i])
    note = how if conv == value.dtype else f"{value.dtype} -> {conv}: {how}"
    steps.append(
        CastStep(stage="converted", dtype=conv, index=i, changed=conv != value.dtype, note=note)
    )
    return steps


def op_conversion(value: Any) -> tuple[str, str]:
    """The dtype an op's own conversion gives ``value`` (``keras.ops.convert_to_tensor(x)``,
    no dtype, as ops convert their inputs; a backend tensor, a NumPy array on numpy, is
    kept), and how, in words; the value's own dtype where Keras refuses the conversion (the
    op's call then says why)."""
    import keras

    if keras.ops.is_tensor(value):
        return leaf_dtype(value), "a NumPy array is a backend tensor here: the op takes it as is"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = leaf_dtype(keras.ops.convert_to_tensor(value))
            return found, "the op's own keras.ops.convert_to_tensor(x) (no dtype)"
    except Exception as error:
        own = leaf_dtype(np.asarray(value)) if isinstance(value, list) else leaf_dtype(value)
        return own, f"convert_to_tensor(x) refuses it ({type(error).__name__})"


def _declared_op(entry: OpEntry, inputs: _OpInputs, kwargs: dict[str, Any]) -> tuple[str, ...]:
    """The declared dtypes; none where the symbolic call fails where eager may not (weak
    scalars, callables)."""

    def symbolic() -> Any:
        args, named = catalog.op_calls.build(inputs.leaves, inputs.symbolic)
        return op_leaf_dtypes(catalog.op_calls.call(entry.name, args, named, kwargs))

    declared, _ = declare(lambda: _quiet(symbolic), lambda found: found)
    return declared


def _op_numerics(
    outputs: Any, arrays: list[np.ndarray], steps: list[CastStep], reference: Any
) -> Numerics:
    """inf/NaN from finite input, values against ``reference``; values this tool cannot
    read back as NumPy are said to be its own failure, not raised: the dtypes are the answer."""
    try:
        return measure(_op_tensors(outputs), arrays, steps, reference=reference)
    except Exception as error:
        return Numerics(note=unread_values(error))


def gives_every_array(spec: ProbeSpec, entry: OpEntry) -> bool:
    """Whether the user's ``values`` carry every array input of the op, its fixed ones
    (``ops.take``'s indices) too, rather than its probed inputs only."""
    count = len(spec.user_values or ())
    return count > entry.arity and count == entry.tensor_count and entry.input_style != "list"


def _op_input_dtypes(
    spec: ProbeSpec, entry: OpEntry, kwargs: dict[str, Any], arity: int
) -> tuple[str, ...]:
    """The probed inputs' dtypes; a creation op's probed dtype goes to ``dtype=`` instead."""
    if entry.probe == "inputs":
        return broadcast(spec.input_dtypes, _op_arity(spec, entry, arity))
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


def _op_arity(spec: ProbeSpec, entry: OpEntry, arity: int) -> int:
    """How many probed inputs this call has: an op taking a list of tensors takes as many as
    the spec gives shapes for (``ops.concatenate`` of three tensors), every other op its own
    (``arity``: with its fixed arrays where the user gave them)."""
    if entry.input_style == "list" and spec.shapes is not None and len(spec.shapes) > 1:
        return len(spec.shapes)
    return arity


def _op_shapes(spec: ProbeSpec, entry: OpEntry, arity: int) -> tuple[tuple[int, ...], ...]:
    arity = _op_arity(spec, entry, arity)
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
) -> ProbeFields:
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

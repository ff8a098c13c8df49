"""The stages every probe path runs, in this order, each timed into the result's ``timings``:

1. **inputs**: the leaves the call gets (samples of the asked dtypes, or the user's own
   values, as given) and how they nest (:func:`layer_inputs`, an op's in ``_probe_op``);
2. **build**: the target made under the policy (:func:`construct`);
3. **recorded call**: the eager call, with the op trace open and the paths' recorders
   installed (:func:`recorded_call`), its outputs or its error kept (:class:`Called`);
4. **declare**: Keras's symbolic call on ``KerasTensor``\\ s (:func:`declare`);
5. **expectations**: what Keras documents and which expectation judges (:class:`Judged`);
6. **numerics**: the values against a wider reference (``_numerics.measure``, timed with
   :func:`timed`).

What the inputs and build stages chose because the user gave none (the sample, the shape,
the catalog's kwargs, the policy, the input dtype) is listed once, by :func:`supplied`, in the
answer's ``supplied``.

``_probe_layer.run_layer``, ``_probe_op.run_op`` and ``_keras2.run_keras2`` number these
stages in their own bodies and hand each one its part; what they accumulate is a
``_fields.ProbeFields``. The inputs and build stages are the seams where a path chooses what
the call gets and what is called.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import _rules as rules
from dtype_explorer.keras_run._mode_rules import check_batch_layout
from dtype_explorer.keras_run._values import call_arguments, leaf_name, leaf_paths, rebuild
from dtype_explorer.keras_run.catalog import INDEX_HIGH, LayerEntry, OpEntry, op_calls
from dtype_explorer.keras_run.probe._fields import ProbeFields
from dtype_explorer.keras_run.probe._observe import Invalid, broadcast, outcome, traced
from dtype_explorer.keras_run.trace import Trace
from dtype_explorer.records import (
    CastStep,
    Expectation,
    ProbeSpec,
    Supplied,
    TraceStep,
    VariableDtypes,
)
from dtype_explorer.timing import ms

# ------------------------------------------------------------------------ timing


@contextlib.contextmanager
def timed(timings: dict[str, float], key: str) -> Iterator[None]:
    """``timings[key]``: the milliseconds the block took (also when it raises)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[key] = ms(started)


# ---------------------------------------------------------------------- 1. inputs


@dataclass(frozen=True)
class LayerInputs:
    """What a layer's call gets: one leaf per input dtype, nested by ``structure``.

    Attributes:
        dtypes: each leaf's dtype, as asked (or the user's value's own).
        shapes: each leaf's shape (the catalog's default where the spec gives none).
        roles: each leaf's role in the call (``"data"``, ``"index"``, ``"string"``).
        leaves: the leaves themselves: NumPy arrays, strings as Python lists.
        structure: how the leaves nest into the call's inputs (a user's dict or tuple), or
            ``None``: one leaf per input.
        paths: each leaf's place in ``structure`` (``(0, "images")``).
        names: each leaf's name in the cast path (``images``), ``None`` for a plain input.
        user: whether the leaves are the user's own values.
    """

    dtypes: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    roles: tuple[str, ...]
    leaves: list[Any]
    structure: Any
    paths: list[tuple[Any, ...]]
    names: list[str | None]
    user: bool

    def nested(self, leaves: list[Any]) -> list[Any]:
        """``leaves`` (these, or a copy in another dtype) nested as the call takes them."""
        return rebuild(self.structure, list(leaves))


def input_count(spec: ProbeSpec) -> int:
    """How many inputs a layer's call gets: the user's values (a tuple of two arrays is one
    input), else one per input dtype."""
    return len(spec.input_dtypes) if spec.structure is None else len(spec.structure)


def layer_shapes(spec: ProbeSpec, entry: LayerEntry) -> tuple[tuple[int, ...], ...]:
    """The inputs' shapes: the spec's, else the catalog's; a user's layer called on several
    tensors (``call(self, x, y)``) gets its default shape for each; a cell given the shape of
    its inputs alone gets its states' too (``LayerEntry.completed_shapes``)."""
    shapes = entry.completed_shapes(spec.shapes) if spec.shapes else entry.shapes
    if len(shapes) == 1 < len(spec.input_dtypes) and spec.target.startswith("custom:"):
        shapes = shapes * len(spec.input_dtypes)
    return tuple(shapes)


def layer_inputs(spec: ProbeSpec, entry: LayerEntry) -> LayerInputs:
    """The inputs stage of a layer probe: the user's own values with their structure, or
    one sample per input of the asked dtype (:func:`layer_sample`); a data mode Keras cannot
    batch these inputs in is refused (``check_batch_layout``)."""
    shapes = layer_shapes(spec, entry)
    check_batch_layout(spec.mode, entry.name, shapes, entry.batch_axes)
    input_dtypes = broadcast(spec.input_dtypes, len(shapes))
    roles = tuple(entry.input_roles(len(shapes)))
    if any(d in dtypes.PYTHON_SCALARS for d in input_dtypes):
        raise InvalidSpecError("Python scalars (python_int, ...) are inputs of ops, not of layers")
    user = spec.user_values is not None
    structure = spec.structure if user else None
    if spec.user_values is not None:
        leaves = [given_leaf(v.value(), v.dtype) for v in spec.user_values]
    else:
        leaves = [layer_sample(d, s, r, spec) for d, s, r in zip(input_dtypes, shapes, roles)]
    try:
        count = len(rebuild(structure, leaves))
        paths = leaf_paths(structure, len(leaves))
    except (ValueError, TypeError, KeyError) as error:
        raise InvalidSpecError(f"values: the spec's structure does not fit: {error}") from None
    names = [leaf_name(path, count) for path in paths]
    return LayerInputs(input_dtypes, shapes, roles, leaves, structure, paths, names, user)


def layer_sample(dtype: str, shape: tuple[int, ...], role: str, spec: ProbeSpec) -> Any:
    """One sample input of a layer: indices below ``INDEX_HIGH`` for an index input, strings
    as a Python list (as Keras's own tests pass them), else the spec's value preset."""
    if role == "index" and dtype != "string":
        rng = np.random.default_rng(spec.seed)
        return rng.integers(0, INDEX_HIGH, size=shape).astype(dtypes.numpy_dtype(dtype))
    if dtype == "string":
        return dtypes.sample(dtype, shape, preset=spec.values, seed=spec.seed).tolist()
    return dtypes.sample(dtype, shape, preset=spec.values, seed=spec.seed)


def given_leaf(value: Any, dtype: str) -> Any:
    """A user's leaf as the layer gets it: strings as a Python list, as Keras's own tests
    pass them; arrays as NumPy arrays."""
    return value.tolist() if dtype == "string" else value


def layer_caller(
    entry: LayerEntry, inputs: LayerInputs, call_kwargs: dict[str, Any]
) -> Callable[..., Any]:
    """``call(layer, leaves, **kw)``: the layer called on ``leaves`` nested as the inputs
    are, with the spec's call arguments (``training=True``, a mask) and ``kw``."""
    arguments = call_arguments(call_kwargs)

    def call(target: Any, leaves: list[Any], **kw: Any) -> Any:
        return call_layer(target, entry, inputs.nested(leaves), **{**arguments, **kw})

    return call


def call_layer(layer: Any, entry: LayerEntry, inputs: list[Any], **call_kwargs: Any) -> Any:
    """``layer`` called the way its catalog entry says: on a list, positionally, or on one."""
    if entry.input_style == "list":
        return layer(list(inputs), **call_kwargs)
    if entry.input_style == "positional":
        return layer(*inputs, **call_kwargs)
    return layer(inputs[0], **call_kwargs)


# ----------------------------------------------------------------------- 2. build


def construct(make: Callable[[], Any]) -> Any:
    """The build stage: ``make()``, its failure the spec's (``Invalid`` at ``"construct"``)."""
    try:
        return make()
    except Exception as error:
        raise Invalid(error, "construct") from error


# --------------------------------------------------------------- 3. recorded call


@dataclass
class Called:
    """The recorded call's answer: its outputs, or the error it raised, and the op trace."""

    outputs: Any = None
    error: Exception | None = None
    recorded: Trace | None = field(default=None, repr=False)

    def steps(self) -> tuple[TraceStep, ...]:
        """The op trace's steps (none where the trace was not open)."""
        return self.recorded.steps() if self.recorded is not None else ()

    @property
    def dropped(self) -> int:
        """The ops past ``MAX_STEPS`` that the trace did not keep."""
        return self.recorded.dropped if self.recorded is not None else 0


def recorded_call(
    call: Callable[[], Any],
    *,
    trace: bool,
    numerics: bool = True,
    around: contextlib.AbstractContextManager[Any] | None = None,
    error: Exception | None = None,
) -> Called:
    """The recorded-call stage: ``call()`` eagerly inside ``around`` (the path's recorders)
    with the op trace open (``trace``; ``numerics``: look at values too). An error it raises
    is kept as Keras's answer; with ``error`` given (an earlier stage failed) nothing is
    called and that error is the answer."""
    called = Called(error=error)
    with around or contextlib.nullcontext(), traced(trace, numerics=numerics) as recorded:
        called.recorded = recorded
        try:
            if error is None:
                called.outputs = call()
        except Exception as exc:
            called.error = exc
    return called


# --------------------------------------------------------------------- 4. declare


def declare(
    symbolic_call: Callable[[], Any], described: Callable[[Any], tuple[str, ...]]
) -> tuple[tuple[str, ...], Exception | None]:
    """The declare stage: the dtypes Keras's symbolic call says (``described`` of its
    outputs), or the error that call raised."""
    try:
        out = symbolic_call()
    except Exception as error:
        return (), error
    return described(out), None


# ---------------------------------------------------------------- 5. expectations


@dataclass(frozen=True)
class Judged:
    """The expectations stage's answer, as ``_observe.outcome`` takes it.

    Attributes:
        documented: Keras's documented rule for this call.
        basis: why, in words, for the result's ``basis``.
        expectations: every expectation side by side (``_expect``).
        expected: the one the verdict uses.
    """

    documented: rules.Documented
    basis: tuple[str, ...]
    expectations: list[Expectation]
    expected: Expectation | None

    def outcome(
        self, outputs: Any, error: Exception | None, steps: list[CastStep], declared: tuple
    ) -> ProbeFields:
        """The answer's fields from the call's outputs or error, judged by these."""
        return outcome(
            outputs,
            error,
            steps,
            self.documented,
            declared,
            self.basis,
            expectations=self.expectations,
            expected=self.expected,
        )


# ------------------------------------------------------------- what was supplied


def supplied(spec: ProbeSpec, entry: Any, *, instance: bool = False) -> tuple[Supplied, ...]:
    """Every part of the question the stages chose because the user gave none: the input
    dtype and the policy (``spec.filled``; an op reads no policy), the shape (the catalog's)
    and the sample (a value preset, seeded) of a target with tensor inputs (``ops.eye`` has
    none), and the catalog's kwargs the user did not replace. An ``instance`` is the user's
    own object: no kwargs are supplied for it.

    Args:
        spec: the question.
        entry: its catalog entry (a ``LayerEntry``, ``OpEntry`` or ``ObjectiveEntry``).
        instance: whether the target is the user's instance (its kwargs are its own).

    Returns:
        The ``Supplied`` records, in the order input dtype, policy, shape, kwargs, sample;
        empty when the user gave every part.

    >>> from dtype_explorer.keras_run import catalog
    >>> spec = ProbeSpec(target="Dense", filled=("input_dtypes", "policy"))
    >>> [s.part for s in supplied(spec, catalog.entry("Dense"))]
    ['input dtype', 'policy', 'shape', 'kwargs', 'sample']
    >>> spec = ProbeSpec(target="Dense", kwargs={"units": 2}, shapes=((2, 3),), values="tiny")
    >>> [s.part for s in supplied(spec, catalog.entry("Dense"))]
    ['sample']
    """
    parts: list[Supplied] = []
    if "input_dtypes" in spec.filled:
        parts.append(
            Supplied(
                part="input dtype", value=", ".join(spec.input_dtypes), why="no input_dtype given"
            )
        )
    tensors = bool(getattr(entry, "shapes", ()))  # ops.eye takes Python numbers only
    if "policy" in spec.filled and not isinstance(entry, OpEntry):  # an op reads no policy
        parts.append(
            Supplied(
                part="policy",
                value=spec.policy,
                why="no policy given: the one Keras makes from floatx",
            )
        )
    if spec.shapes is None and spec.user_values is None and tensors:
        shapes = entry.shapes
        parts.append(
            Supplied(
                part="shape",
                value=", ".join(str(tuple(s)) for s in shapes),
                why="no shape given: the catalog's",
            )
        )
    elif spec.shapes and isinstance(entry, LayerEntry):
        rest = entry.completed_shapes(spec.shapes)[len(spec.shapes) :]
        if rest:
            parts.append(
                Supplied(
                    part="shape",
                    value=", ".join(str(tuple(s)) for s in rest),
                    why=f"{entry.name}'s call needs {entry.arity} inputs and "
                    f"{len(spec.shapes)} shape(s) were given: the rest are the catalog's, "
                    "with the batch of the first",
                )
            )
    defaults = {} if instance else {**getattr(entry, "init_kwargs", {}), **entry.kwargs}
    kept = {k: v for k, v in defaults.items() if k not in spec.kwargs}
    if kept:
        parts.append(
            Supplied(
                part="kwargs",
                value=", ".join(f"{k}={v!r}" for k, v in kept.items()),
                why="the catalog's defaults, not given in kwargs",
            )
        )
    if isinstance(entry, OpEntry):
        parts.extend(_fixed_supplied(spec, entry))
    if spec.user_values is None and getattr(entry, "probe", "inputs") != "none" and tensors:
        parts.append(
            Supplied(
                part="sample",
                value=f"{spec.values!r} preset, seed {spec.seed}",
                why="no values given: a sample of the input dtype",
            )
        )
    return tuple(parts)


def _fixed_supplied(spec: ProbeSpec, entry: OpEntry) -> list[Supplied]:
    """An op's fixed arrays (``ops.take``'s indices) the tool picked: the catalog's, unless
    the user's ``values`` carry every array of the call or a kwarg names the input."""
    if len(spec.user_values or ()) == entry.tensor_count > entry.arity:
        return []
    fixed = op_calls.fixed(entry.inputs)
    picked = [leaf for leaf in fixed if leaf["param"].lstrip("*") not in spec.kwargs]
    if not picked:
        return []
    order = ", ".join(leaf["param"] for leaf in op_calls.tensors(entry.inputs))
    return [
        Supplied(
            part="fixed inputs",
            value="; ".join(
                f"{leaf['param']} {_preset_text(leaf['values'])} ({leaf['dtype']}, shape "
                f"{tuple(leaf['shape'])})"
                for leaf in picked
            ),
            why=f"the catalog's; give every array in values ({order}) to pass your own",
        )
    ]


def _preset_text(preset: Any) -> str:
    """A fixed input's value preset in words: its literal values, or the preset's name."""
    if isinstance(preset, dict) and "literal" in preset:
        return str(preset["literal"])
    return f"{preset!r} preset"


# -------------------------------------------------------- steps the paths share


def variable_steps(
    variables: dict[str, VariableDtypes], more: Callable[[VariableDtypes], str] = lambda _: ""
) -> list[CastStep]:
    """The ``variables`` stage: each variable as stored and as ``call()`` read it (``more``
    adds to a variable's note: Keras 2 says which are not AutoCastVariables)."""
    return [
        CastStep(
            stage="variables",
            dtype=var.read or var.stored,
            name=name,
            changed=var.read is not None and var.read != var.stored,
            note=_variable_note(var) + more(var),
        )
        for name, var in variables.items()
    ]


def _variable_note(var: VariableDtypes) -> str:
    if var.read is None:
        return f"stored {var.stored}"
    if var.read == var.stored:
        return f"stored and read as {var.stored}"
    return f"stored {var.stored}, read as {var.read} inside call()"

"""The audit's rule on what each dtype-changing step lost (``lossy-cast``): a pure function
of the :class:`~dtype_explorer.records.LayerCall` records, whose ``losses`` the forward pass
measured at the step itself (``keras_run.call_losses``: the ``keras.Input`` conversion, an
autocast). The finding is attributed to the step that lost the values, with its real cause
(integers rounded, finite values overflowed, ...), never to the later layer that shows it;
where rounded integers then reach a layer that takes them as indices (an ``Embedding``, a
lookup), that layer is named: it read other rows, or raised on an id out of its range. The
rule proposes no fix: the audit runs one on a copy and shows it once it works
(``_fixes``).

>>> from dtype_explorer.records import CastLoss, LayerCall, TensorInfo
>>> loss = CastLoss(step="keras-input", where="input 0", source="int64", target="float16",
...                 count=3, rounded=2, first_index=(0, 0),
...                 examples=((19999, 20000), (2049, 2048)))
>>> root = LayerCall(path="m", layer_class="Functional", depth=0, policy="float32",
...                  compute_dtype="float32", variable_dtype="float32", leaf=False,
...                  entry=("float16",), losses=(loss,))
>>> emb = LayerCall(path="m/emb", layer_class="Embedding", depth=1, policy="float16",
...                 compute_dtype="float16", variable_dtype="float16",
...                 received=(TensorInfo(dtype="float16", shape=(1, 3)),))
>>> [(f.kind, f.path, f.severity) for f in lossy_casts([root, emb])]
[('lossy-cast', 'm', 'error')]
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.keras_run import catalog
from dtype_explorer.records import CastLoss, Finding, LayerCall

#: The 16-bit floats (``dtypes.FAMILIES``' floats of 16 bits).
HALF = tuple(d for d in dtypes.FAMILIES["float"] if dtypes.bits(d) == 16)

#: How each step is named in a finding.
_STEP_NAMES = {
    "keras-input": "the conversion to the keras.Input dtype",
    "autocast": "the autocast on entry",
    "variable-read": "the variable read",
    "cast": "an ops.cast",
    "operand": "the conversion of a Python number",
    "creation": "an array made from the numbers asked",
}


def lossy_casts(calls: list[LayerCall]) -> Iterator[Finding]:
    """A ``lossy-cast`` finding for each step of each call that lost values: at that call's
    path, with the counts (``Finding.loss``), the cause and the layers that took the rounded
    integers as indices. An overflow the ``overflow`` rule reports at the same call (an
    autocast's, a variable read's) is counted there; a variable read that only made tiny
    weights zero is no finding (the call's events give its counts, the per-layer reference
    its effect)."""
    for i, call in enumerate(calls):
        for loss in call.losses:
            if loss.cause == "overflow" and _overflow_rule_counts(call, loss):
                continue  # the overflow rule's finding, at this call, carries these counts
            if loss.step == "variable-read" and not loss.overflowed:
                continue  # tiny weights read as zero: in the call's events, and its error

            # ids rounded to others, made inf, wrapped or clipped: an index reader reads others
            ids_lost = loss.rounded or loss.overflowed or loss.wrapped or loss.saturated
            readers = _index_readers(calls[i + 1 :], loss) if ids_lost else []
            yield _finding(call, loss, readers)


def _finding(call: LayerCall, loss: CastLoss, readers: list[LayerCall]) -> Finding:
    step = _STEP_NAMES[loss.step]
    where = f"{loss.where} of {call.layer_class} '{call.path}'"
    cause = loss.cause
    message = f"{step[0].upper()}{step[1:]} ({where}) lost values: {loss.text()}."
    if readers:
        names = ", ".join(f"{r.layer_class} '{r.path}'" for r in readers)
        raised = [r for r in readers if r.error is not None and r.retried is None]
        filled = [
            r for r in readers if r.error is None and any(t.finite is False for t in r.outputs)
        ]
        read = "silently reads other rows" + (
            ", or NaN where an id is beyond its table (jax's take fills it)" if filled else ""
        )
        message += (
            f" The ids are {_ids_lost(loss)} here, before {names} takes them as indices: it "
            + ("raised on an id out of its range" if raised else read)
            + f" ({_ids_cause(loss)})."
        )
    return Finding(
        kind="lossy-cast",
        severity=_severity(loss, readers),
        path=call.path,
        message=message,
        details={
            "step": loss.step,
            "cause": cause,
            "from": loss.source,
            "to": loss.target,
            "readers": [r.path for r in readers],
        },
        loss=loss,
    )


def _ids_lost(loss: CastLoss) -> str:
    """What the step did to ids: ``rounded``, ``made inf above 65504``, ``wrapped around``,
    ``clipped to the bounds``."""
    done = ["rounded"] if loss.rounded else []
    if loss.overflowed and dtypes.family(loss.target) == "float":
        done.append(f"made inf above {dtypes.float_limits(loss.target)[0]:g}")
    done += ["wrapped around"] if loss.wrapped else []
    done += ["clipped to the bounds"] if loss.saturated else []
    return " and ".join(done) or loss.cause or "changed"


def _ids_cause(loss: CastLoss) -> str:
    """The cause, in the words of the step: rounding of integers, or ids beyond the target's
    range, in the conversion itself (never a layer's overflow)."""
    if not (loss.overflowed or loss.wrapped or loss.saturated):
        return f"the cause is rounding of integers in {loss.target}, not an overflow"
    return (
        f"the cause is this conversion to {loss.target}, not an overflow in a layer's computation"
    )


def _overflow_rule_counts(call: LayerCall, loss: CastLoss) -> bool:
    """The overflow rule's finding at ``call`` carries ``loss``: an autocast overflow, or a
    variable read that overflowed in a call computing on values (a lookup's table read is
    said here: the overflow rule leaves lookups out)."""
    if loss.step == "autocast":
        return True
    return loss.step == "variable-read" and computes_on_values(call)


def _severity(loss: CastLoss, readers: list[LayerCall]) -> str:
    if readers or loss.cause in ("overflow", "wrap", "saturation"):
        return "error"
    return "warning" if loss.cause == "rounding" else "info"


def precision_loss(calls: list[LayerCall]) -> Iterator[Finding]:
    """Integer data (ids, labels) a leaf call computes on in a 16-bit float (compute dtype,
    variable read, output) beyond that float's exact integers (``dtypes.exact_integers``):
    rounded to others inside the dtype's tolerance. The peak is ``TensorInfo.max_abs``; a
    lookup layer (Embedding: ids index a table) computes nothing on them, and a call given a
    float beside the integers (float16 probabilities, int32 labels) may be 16-bit for that
    float alone: the step that rounds integers is then measured where it happens
    (``lossy-cast``)."""
    for call in calls:
        ints = [t for t in call.received if dtypes.is_integer(t.dtype) and t.max_abs is not None]
        if not ints or not call.leaf or not computes_on_values(call):
            continue
        if any(dtypes.is_float(t.dtype) for t in call.received):
            continue  # a 16-bit float beside the integers (probabilities by labels) is not theirs
        peak = max(t.max_abs or 0.0 for t in ints)
        reads = [v.read or v.stored for v in call.variables.values()]
        half = next(
            (
                d
                for d in (call.compute_dtype, *reads, *(t.dtype for t in call.outputs))
                if d in HALF
            ),
            None,
        )
        limit = dtypes.exact_integers(half)
        if half is None or limit is None or peak <= limit:
            continue
        rounded = float(np.asarray(peak).astype(dtypes.numpy_dtype(half)))
        yield Finding(
            kind="precision-loss",
            severity="warning",
            path=call.path,
            message=(
                f"{ints[0].dtype} data up to {peak:g} reaches {call.layer_class}, which computes "
                f"in {half}; {half} holds integers exactly only up to {limit}, so {peak:g} "
                f"becomes {rounded:g}: ids or labels are rounded to others, with no error "
                "beyond the dtype's tolerance to show it."
            ),
            details={"input": ints[0].dtype, "max_abs": peak, "to": half, "rounded": rounded},
        )


def computes_on_values(call: LayerCall) -> bool:
    """Not a lookup, hashing or index layer (an integer there is an id, not a number): a call
    whose numbers the value check compares with a reference run."""
    entry = _layer_entry(call.layer_class) if call.builtin else None
    return entry is None or entry.contract in ("compute", "self-managed", "passthrough")


def _index_readers(later: list[LayerCall], loss: CastLoss) -> list[LayerCall]:
    """The leaf layers after the step that take ``loss.target`` tensors as indices."""
    return [
        c
        for c in later
        if c.leaf
        and _takes_indices(c.layer_class, c.builtin)
        and any(t.dtype == loss.target for t in c.received)
    ]


def _takes_indices(layer_class: str, builtin: bool) -> bool:
    """A catalogued layer whose first input is an index (Embedding, lookups, one-hot)."""
    entry = _layer_entry(layer_class) if builtin else None
    return entry is not None and entry.roles[:1] == ("index",)


def _layer_entry(name: str) -> Any:
    """The catalog's entry of a layer class (``None``: not a catalogued layer)."""
    found = catalog.find(name)
    return found if found is not None and found.kind == "layer" else None

"""What a layer call was given and what its ``call`` received, as both model traces read it:
Keras 3's (:mod:`dtype_explorer.keras_run.model._model_trace`) and Keras 2's
(``keras_run.keras2._model_trace``), one owner for the two. Pure: no Keras is imported.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from dtype_explorer.records import TensorInfo


def tensor_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A call's keyword arguments without its masks: the tensors a layer call is described by.

    Args:
        kwargs: the keyword arguments of a layer call.

    Returns:
        ``kwargs`` without ``mask`` and any ``*_mask``.

    >>> tensor_kwargs({"training": True, "mask": None, "attention_mask": None})
    {'training': True}
    """
    return {k: v for k, v in kwargs.items() if k != "mask" and not k.endswith("_mask")}


def autocast_events(
    given: Sequence[TensorInfo] | None,
    received: Sequence[TensorInfo],
    entry: Sequence[str],
) -> Iterator[str]:
    """The input casts Keras made on the way into ``call`` (variable reads are in ``variables``).

    Args:
        given: the inputs as the caller gave them (``None``: not seen).
        received: the inputs as ``call`` received them.
        entry: the dtypes of the layer's ``keras.Input``\\ s, where it has them.

    Returns:
        One line per cast, ``input <i>: <from> → <to>``.

    >>> f16, f32 = TensorInfo(dtype="float16"), TensorInfo(dtype="float32")
    >>> list(autocast_events((f16,), (f32,), ()))
    ['input 0: float16 → float32']
    """
    if given is not None and len(given) == len(received):
        for i, (g, r) in enumerate(zip(given, received, strict=True)):
            if g.dtype != r.dtype:
                yield f"input {i}: {g.dtype} → {r.dtype}"
    if entry and len(entry) == len(received):
        for i, (r, e) in enumerate(zip(received, entry, strict=True)):
            if r.dtype != e:
                yield f"input {i}: {r.dtype} → {e} (keras.Input dtype)"

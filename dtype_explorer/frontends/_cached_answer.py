"""The command's second lane: a stored answer to ``dtype-explorer probe ...`` validated and laid
out, without the command line's machinery. It parses the question's option texts as ``cli
probe`` parses them, builds the spec with ``make_spec`` as ``dx.probe`` does, reads the stored
answer (:mod:`dtype_explorer.runtime.cache_read`: read-only SQLite, the row's HMAC checked) and
lays it out as ``cli probe`` prints it. It is what ``frontends.command`` keeps as the printed
answer (:mod:`dtype_explorer.runtime.printed`), so that the same command line asked again
needs none of it.

>>> text({"target": "Dense", "backend": "numpy,jax"}) is None   # several backends: the CLI's
True
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dtype_explorer import keras_facts, views
from dtype_explorer.keras_run import make_spec
from dtype_explorer.runtime import cache_read
from dtype_explorer.shapes import parse_shapes


def text(asked: Mapping[str, Any]) -> str | None:
    """What ``dtype-explorer probe ...`` prints for ``asked`` when its answer is stored and
    signed, else ``None`` (the full command then runs).

    Args:
        asked: the question as option texts (``frontends.command.question``).

    Returns:
        The text ``cli probe`` prints for the stored answer, or ``None``.
    """
    if not keras_facts.has_snapshot():
        return None  # no Keras snapshot: the first run, checked by the worker that answers
    try:
        spec = make_spec(**spec_arguments(asked))
    except Exception:  # the full command says what is wrong
        return None
    result = cache_read.answer(spec)
    if result is None or result.status in ("invalid", "timeout", "crashed"):
        return None
    if asked.get("as_json"):
        return json.dumps([result.to_dict()], indent=2) + "\n"
    trace = bool(asked.get("trace"))
    return views.format_result(result, trace=trace, detail=trace) + "\n\n"


def spec_arguments(asked: Mapping[str, Any]) -> dict[str, Any]:
    """``make_spec``'s arguments from the option texts, parsed as ``cli probe`` parses them;
    raises ``ValueError`` for what the fast path leaves to the full command.

    >>> spec_arguments({"target": "Dense", "backend": "numpy", "shape": "2x3"})["shape"]
    (2, 3)
    """
    backend = asked.get("backend", "all")
    mode = asked.get("mode", "call")
    if "," in backend or backend.strip() == "all" or "," in mode:
        raise ValueError("several backends or modes: a ProbeSet, the full command's")
    values = asked.get("values", "default")
    dtypes = asked.get("input_dtype")
    names = [d.strip() for d in dtypes.split(",") if d.strip()] if dtypes is not None else None
    if names == []:
        raise ValueError("--input-dtype names nothing")
    shape = asked.get("shape")
    shapes = parse_shapes(shape) if shape is not None else None
    if shape is not None and shapes is None:
        raise ValueError("--shape names nothing")
    return {
        "target": asked["target"],
        "input_dtype": tuple(names) if names is not None else None,
        "policy": asked.get("policy", "float32"),
        "backend": backend.strip(),
        "kwargs": json.loads(asked.get("kwargs", "{}")),
        "shape": None if shapes is None else shapes[0] if len(shapes) == 1 else shapes,
        "values": json.loads(values) if values.lstrip().startswith("[") else values,
        "floatx": asked.get("floatx"),
        "mode": mode,
        "call_kwargs": json.loads(asked.get("call_kwargs", "{}")),
        "precision": asked.get("precision"),
    }

"""The ``dtype-explorer`` command's entry point: ``probe`` answered from the result cache
without the command line's machinery, else the full command (:mod:`.cli`).

A cached answer needs the question parsed, the spec checked, one signed row read and the text
view, and nothing else: this module parses ``probe TARGET`` with the options that shape one
question on one named backend (``--input-dtype``, ``--policy``, ``--backend``, ``--kwargs``,
``--shape``, ``--values``, ``--floatx``, ``--mode``, ``--call-kwargs``, ``--precision``,
``--trace``, ``--json``), builds the spec with ``make_spec`` as ``dx.probe`` does, and prints
the stored answer (:mod:`dtype_explorer.runtime.cache_read`: read-only SQLite, the row's HMAC
checked) as ``cli probe`` prints it. Anything else (another command, ``--help``, ``--no-cache``,
``--engine``, several backends or modes, a question the spec check refuses, no signed row, no
Keras snapshot yet: the first run, whose check waits for the starting worker's snapshot)
goes to the full command, which imports ``typer``, the worker pool and ``diskcache``, answers
live and explains errors. What the fast path prints is what the full command prints for the
same cached answer (``tests/frontends/test_cli_front.py``).

>>> question(["probe", "Dense", "--backend", "numpy", "--kwargs", '{"units": 2}', "--trace"])
{'target': 'Dense', 'backend': 'numpy', 'kwargs': '{"units": 2}', 'trace': True}
>>> question(["probe", "Dense", "--no-cache"]) is None, question(["survey"]) is None
(True, True)
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

from dtype_explorer import keras_facts, views
from dtype_explorer.keras_run import make_spec
from dtype_explorer.runtime import cache_read
from dtype_explorer.shapes import parse_shapes

#: ``probe``'s options that take a value, and the question's part each fills.
VALUED = {
    "--input-dtype": "input_dtype",
    "--policy": "policy",
    "--backend": "backend",
    "--kwargs": "kwargs",
    "--shape": "shape",
    "--values": "values",
    "--floatx": "floatx",
    "--mode": "mode",
    "--call-kwargs": "call_kwargs",
    "--precision": "precision",
}
#: ``probe``'s flags the fast path prints as the full command does.
FLAGS = {"--trace": "trace", "--json": "as_json"}


def main() -> None:
    """``dtype-explorer``: a cached ``probe`` answer printed here, else the full command."""
    text = cached_text(sys.argv[1:])
    if text is not None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    importlib.import_module("dtype_explorer.frontends.cli").app(prog_name="dtype-explorer")


def question(argv: list[str]) -> dict[str, Any] | None:
    """``argv``'s ``probe`` question as option texts, or ``None`` when it is not one the fast
    path answers (another command, an option it leaves to the full command)."""
    if len(argv) < 2 or argv[0] != "probe" or argv[1].startswith("-"):
        return None
    found: dict[str, Any] = {"target": argv[1]}
    rest = iter(argv[2:])
    for word in rest:
        name, eq, value = word.partition("=")
        if name in FLAGS and not eq:
            found[FLAGS[name]] = True
            continue
        if name not in VALUED:
            return None
        if not eq:
            value = next(rest, None)
            if value is None:
                return None
        found[VALUED[name]] = value
    return found


def cached_text(argv: list[str]) -> str | None:
    """What ``dtype-explorer probe ...`` prints for ``argv`` when its answer is cached, else
    ``None`` (the full command then runs)."""
    asked = question(argv)
    if asked is None or not keras_facts.has_snapshot():
        return None  # no Keras snapshot: the first run, checked by the worker that answers
    try:
        spec = make_spec(**_spec_arguments(asked))
    except Exception:  # the full command says what is wrong
        return None
    result = cache_read.answer(spec)
    if result is None or result.status in ("invalid", "timeout", "crashed"):
        return None
    if asked.get("as_json"):
        return json.dumps([result.to_dict()], indent=2) + "\n"
    trace = bool(asked.get("trace"))
    return views.format_result(result, trace=trace, detail=trace) + "\n\n"


def _spec_arguments(asked: dict[str, Any]) -> dict[str, Any]:
    """``make_spec``'s arguments from the option texts, parsed as ``cli probe`` parses them;
    raises ``ValueError`` for what the fast path leaves to the full command."""
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

"""The ``dtype-explorer`` command's entry point: ``probe`` answered from the cache without the
command line's machinery, else the full command (:mod:`.cli`). Three lanes, the first that
answers prints:

1. **The printed answer** kept for this very command line (:mod:`dtype_explorer.runtime.printed`,
   signed): read with the standard library alone, no NumPy, pydantic, spec check or view.
2. **The stored answer** to the question's spec, validated and laid out
   (``frontends._cached_answer``: the spec checked as ``dx.probe`` checks it, the signed row
   read by :mod:`dtype_explorer.runtime.cache_read`, the text view); what it printed is then
   kept as the printed answer.
3. **The full command**, which imports ``typer``, the worker pool and ``diskcache``, answers
   live and explains errors; once its answer is stored, what lane 2 prints for it is kept too.

Only ``probe TARGET`` with the options that shape one question on one named backend
(``--input-dtype``, ``--policy``, ``--backend``, ``--kwargs``, ``--shape``, ``--values``,
``--floatx``, ``--mode``, ``--call-kwargs``, ``--precision``, ``--trace``, ``--json``) takes
lanes 1 and 2. Anything else (another command, ``--help``, ``--no-cache``, ``--engine``,
several backends or modes, a question the spec check refuses, no stored answer, no Keras
snapshot yet) goes to the full command. What lanes 1 and 2 print is what the full command
prints for the same stored answer (``tests/frontends/test_cli_front.py``).

>>> question(["probe", "Dense", "--backend", "numpy", "--kwargs", '{"units": 2}', "--trace"])
{'target': 'Dense', 'backend': 'numpy', 'kwargs': '{"units": 2}', 'trace': True}
>>> question(["probe", "Dense", "float16", "--backend", "numpy"])
{'target': 'Dense', 'input_dtype': 'float16', 'backend': 'numpy'}
>>> question(["probe", "Dense", "--no-cache"]) is None, question(["survey"]) is None
(True, True)
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from collections.abc import Mapping
from typing import Any

from dtype_explorer import frontends, runtime
from dtype_explorer.errors import printable
from dtype_explorer.runtime import printed

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
    argv = sys.argv[1:]
    asked = question(argv)
    # 1. The printed answer kept for this command line: the standard library alone.
    text = printed.read(asked) if asked is not None else None
    if text is not None:
        _write(text)
        return
    # 2. The stored answer, validated and laid out; kept as printed for the next time.
    text = frontends._cached_answer.text(asked) if asked is not None else None
    if text is not None:
        _write(text)
        _keep(asked, text)
        return
    # 3. The full command, live; once its answer is stored, what lane 2 prints for it is kept.
    try:
        importlib.import_module("dtype_explorer.frontends.cli").app(prog_name="dtype-explorer")
    except SystemExit as done:
        if asked is not None and done.code in (0, None):
            _keep(asked)
        raise


def question(argv: list[str]) -> dict[str, Any] | None:
    """``argv``'s ``probe`` question as option texts, or ``None`` when it is not one the fast
    path answers (another command, an option it leaves to the full command)."""
    if len(argv) < 2 or argv[0] != "probe" or argv[1].startswith("-"):
        return None
    found: dict[str, Any] = {"target": argv[1]}
    rest = iter(argv[2:])
    if len(argv) > 2 and not argv[2].startswith("-"):  # probe Dense float16: the input dtype
        found["input_dtype"] = next(rest)
    for word in rest:
        name, eq, value = word.partition("=")
        if name in FLAGS and not eq:
            found[FLAGS[name]] = True
            continue
        if name not in VALUED or VALUED[name] in found:  # given twice: the full command's
            return None
        if not eq:
            value = next(rest, None)
            if value is None:
                return None
        found[VALUED[name]] = value
    return found


def cached_text(argv: list[str]) -> str | None:
    """What ``dtype-explorer probe ...`` prints for ``argv`` from the cache (lane 1, else lane
    2), else ``None`` (the full command then runs)."""
    asked = question(argv)
    if asked is None:
        return None
    return printed.read(asked) or frontends._cached_answer.text(asked)


def _write(text: str) -> None:
    """Print ``text``; a reader that went away (``| head``) ends the command quietly with
    status 1, as the full command (click) does, not with a traceback."""
    try:
        sys.stdout.write(printable(text))
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush
        sys.exit(1)


#: The store's warnings that keeping a printed answer passes over: a folder that cannot be
#: written or a path SQLite cannot take (lane 2 answers next time too). A damaged file moved
#: aside is still said.
_QUIET = r"dtype-explorer's result cache: .*(is read-only|too long for SQLite)"


def _keep(asked: Mapping[str, Any], text: str | None = None) -> None:
    """Keep what lane 2 prints for ``asked`` (``text``, or read now: from a signed stored
    answer) as its printed answer. The answer is out already: a busy or unwritable cache, or
    any fault on the way, keeps nothing and changes neither the output nor the exit status."""
    found = printed.key(asked)
    if found is None or printed.busy():  # another writer: no waiting after the answer
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_QUIET)
        try:
            if text is None:
                text = frontends._cached_answer.text(asked)
            if text is not None:
                runtime.cache.put_printed(found, text)
        except Exception:  # optional, after the answer: never its failure
            return

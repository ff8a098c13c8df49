"""The user's own source lines for code that travels to a worker by value.

cloudpickle ships a class or function defined in a notebook cell or a script's ``__main__`` by
value, and names every code object it rebuilds ``<dynamic-code>`` (its payload stays the same
wherever it was defined). The op trace (``keras_run.trace``) reads a step's file
and text from the frame's code object and ``linecache``; in the worker it would find neither,
and the user's ``return x * c`` would be a step with no file and no text.

:func:`capture`, in the process that pickles the target, records each of the user's code
objects it holds (the target's classes and their bases defined outside the installed
packages, its functions, a packed instance's custom classes) by name and first line, with the
lines of their files as ``linecache`` holds them (a notebook cell is there only). :func:`restore`,
in the worker, gives each ``<dynamic-code>`` code object its file back
(``CodeType.replace``, nested functions too) and puts the lines into the worker's
``linecache``, so the trace shows the user's file, line and text, as raw Python would.

>>> def f(x):
...     return x * 2
>>> sorted(capture(f)["codes"].values()) == [f.__code__.co_filename]
True
"""

from __future__ import annotations

import inspect
import linecache
import os
import sysconfig
import types
from collections.abc import Iterator
from typing import Any

DYNAMIC = "<dynamic-code>"  # cloudpickle's co_filename for the code it ships by value


def _installed(filename: str) -> bool:
    """A file of the standard library, site-packages or dtype-explorer: pickled by reference."""
    paths = sysconfig.get_paths()
    roots = [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if paths.get(k)]
    roots.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.path.abspath(filename)
    return any(path.startswith(os.path.abspath(r) + os.sep) for r in roots)


#: The most functions a function's helpers are followed to (its globals and closure).
MAX_HELPERS = 200


def _functions(target: Any) -> Iterator[types.FunctionType]:
    custom = getattr(target, "custom", None)  # keras_run.Packed: its custom classes
    roots = list(custom.values()) if isinstance(custom, dict) else [target]
    for root in roots:
        if isinstance(root, types.FunctionType):
            yield from _helpers(root)
        elif inspect.isclass(root):
            for cls in inspect.getmro(root):
                for value in vars(cls).values():
                    yield from _unwrapped(value)


def _helpers(root: types.FunctionType) -> Iterator[types.FunctionType]:
    """``root`` and the functions it calls by a global name or holds in its closure, theirs
    too (``dx.trace(fn)``'s ``fn`` calling the user's own helpers: cloudpickle ships those by
    value as well); each once, at most :data:`MAX_HELPERS`."""
    seen: set[int] = set()
    todo = [root]
    while todo and len(seen) < MAX_HELPERS:
        function = todo.pop()
        if id(function) in seen:
            continue
        seen.add(id(function))
        yield function
        if _installed(function.__code__.co_filename):  # a library's: its helpers are too
            continue
        names = {n for code in _codes(function.__code__) for n in code.co_names}
        found = [function.__globals__.get(n) for n in sorted(names)]
        found += [c.cell_contents for c in function.__closure__ or () if _filled(c)]
        todo += [f for f in found if isinstance(f, types.FunctionType)]


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:  # an empty cell
        return False
    return True


def _unwrapped(value: Any) -> Iterator[types.FunctionType]:
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if isinstance(value, property):
        yield from (f for f in (value.fget, value.fset) if isinstance(f, types.FunctionType))
    elif isinstance(value, types.FunctionType):
        yield value


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _key(code: types.CodeType) -> str:
    return f"{getattr(code, 'co_qualname', code.co_name)}:{code.co_firstlineno}"


def capture(target: Any) -> dict[str, Any]:
    """The user's code objects in ``target`` and their files' lines, for :func:`restore`.

    Args:
        target: a custom class, factory function (with the helpers it calls), or
            ``keras_run.Packed`` instance.

    Returns:
        ``{"codes": {qualname:first line: file}, "files": {file: lines}}``; empty maps when
        ``target`` holds none of the user's code.

    Example:
        >>> capture(int)
        {'codes': {}, 'files': {}}
    """
    codes: dict[str, str] = {}
    files: dict[str, list[str]] = {}
    for function in _functions(target):
        filename = function.__code__.co_filename
        if filename == DYNAMIC or _installed(filename):
            continue
        lines = linecache.getlines(filename)
        if not lines:
            continue
        files[filename] = lines
        codes.update({_key(c): filename for c in _codes(function.__code__)})
    return {"codes": codes, "files": files}


def _renamed(code: types.CodeType, codes: dict[str, str]) -> types.CodeType:
    consts = tuple(
        _renamed(c, codes) if isinstance(c, types.CodeType) else c for c in code.co_consts
    )
    filename = codes.get(_key(code), code.co_filename) if code.co_filename == DYNAMIC else None
    return code.replace(co_consts=consts, co_filename=filename or code.co_filename)


def restore(target: Any, captured: dict[str, Any]) -> None:
    """Give the ``<dynamic-code>`` code objects in ``target`` the files :func:`capture` saw,
    and put those files' lines into this process's ``linecache``.

    Args:
        target: what the worker unpickled (class, function, or ``keras_run.Packed``).
        captured: :func:`capture`'s answer in the pickling process.

    Returns:
        None; the functions' ``__code__`` are replaced in place.

    Example:
        >>> restore(int, {"codes": {}, "files": {}})
    """
    codes = captured.get("codes") or {}
    if not codes:
        return
    for filename, lines in (captured.get("files") or {}).items():
        # no mtime: linecache.checkcache keeps the entry (a notebook cell has no file)
        linecache.cache[filename] = (sum(map(len, lines)), None, list(lines), filename)
    for function in _functions(target):
        if function.__code__.co_filename == DYNAMIC:
            function.__code__ = _renamed(function.__code__, codes)

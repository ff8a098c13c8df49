"""Where an op was called from, for the op trace (``_trace``): each file on the stack is
classified once (a caller, Keras's op dispatch, a transparent frame, dtype-explorer's own),
and a step's source line, the layer or user line it came through and whether the layer was
building are read from the frames, each cached (``functools.lru_cache``). A frame of the
code AutoGraph generated for a ``tf.function`` (``__autograph_generated_file*.py``) stands
for the line it was made from (:func:`autograph_origin`), as TensorFlow's own errors say it."""

from __future__ import annotations

import functools
import linecache
import os
import sys
import sysconfig
from typing import Any

from dtype_explorer.records import SourceLine

#: How a file on the stack counts: a caller (layer or user code), Keras's op dispatch
#: (``keras/src/ops``, ``backend``, ``random``), transparent (the trace itself, the tree
#: utilities, the frameworks, the standard library), or dtype-explorer's own code.
CALLER, DISPATCH, TRANSPARENT, OWN = 0, 1, 2, 3

_HERE = os.path.dirname(os.path.abspath(__file__))
#: The op trace's own files: transparent on the stack.
TRACE_FILES = frozenset(
    os.path.join(_HERE, name)
    for name in (
        "_op_trace.py",
        "_bindings.py",
        "_frames.py",
        "_records.py",
        "_operators.py",
    )
) | {os.path.join(os.path.dirname(_HERE), "code", "_named.py")}  # dx.trace's named steps
PACKAGE = os.path.dirname(os.path.dirname(_HERE)) + os.sep

_TRANSPARENT_PACKAGES = frozenset(
    {
        "jax",
        "jaxlib",
        "tensorflow",
        "torch",
        "numpy",
        "openvino",
        "optree",
        "ml_dtypes",
        "tree",
        "absl",
    }
)


@functools.cache
def _sys_prefixes() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    keys = ("stdlib", "platstdlib", "purelib", "platlib")
    return tuple(os.path.abspath(paths[k]) + os.sep for k in keys if paths.get(k))


def user_module(module: Any) -> bool:
    """User code (not the standard library, not site-packages, not dtype-explorer)."""
    file = getattr(module, "__file__", None)
    if not isinstance(file, str):
        return False
    path = os.path.abspath(file)
    return not path.startswith(_sys_prefixes()) and not path.startswith(PACKAGE)


@functools.cache
def keras_src() -> str:
    """The directory of ``keras.src``, with a trailing separator."""
    import keras.src

    return os.path.dirname(os.path.abspath(keras.src.__file__)) + os.sep


#: The start of the name of each file AutoGraph writes the code it generates into.
AUTOGRAPH_FILE = "__autograph_generated_file"


def autograph_origin(filename: str, line: int) -> tuple[str, int, str] | None:
    """The file, line and function AutoGraph made line ``line`` of its generated file
    ``filename`` from (the user's ``tf.function``, or Keras's own code it converted), from
    the source map its transpiler keeps with each conversion; ``None`` for any other file,
    or a line it does not map.

    >>> autograph_origin("/work/model.py", 3) is None
    True
    """
    if not os.path.basename(filename).startswith(AUTOGRAPH_FILE):
        return None
    for loc, origin in _autograph_map(filename).items():
        if loc.lineno == line:
            return origin.loc.filename, origin.loc.lineno, origin.function_name
    return None


def _autograph_map(filename: str) -> dict:
    """The source map of the conversion AutoGraph wrote into ``filename`` (empty: none
    found), read from TensorFlow's transpiler cache (``autograph.impl.api._TRANSPILER``)."""
    api = sys.modules.get("tensorflow.python.autograph.impl.api")
    cache = getattr(getattr(getattr(api, "_TRANSPILER", None), "_cache", None), "_cache", None)
    try:
        buckets = list(cache.values()) if cache is not None else []
        for bucket in buckets:
            for factory in list(bucket.values()):
                if getattr(getattr(factory, "module", None), "__file__", None) == filename:
                    return dict(factory.source_map or {})
    except Exception:  # TensorFlow's internals moved: the generated file's own line stays
        return {}
    return {}


@functools.cache
def _autograph_source_file(filename: str) -> str:
    """The file a generated file's conversion came from (``filename`` itself elsewhere)."""
    if not os.path.basename(filename).startswith(AUTOGRAPH_FILE):
        return filename
    files = {origin.loc.filename for origin in _autograph_map(filename).values()}
    return files.pop() if len(files) == 1 else filename


@functools.cache
def classify(filename: str) -> int:
    """How the file ``filename`` counts on the stack (:data:`CALLER`, ...), once per file; a
    file AutoGraph generated counts as the file it was made from."""
    filename = _autograph_source_file(filename)
    if filename.startswith("<"):
        frozen = filename.startswith(("<frozen", "<__array_function"))
        return TRANSPARENT if frozen else CALLER
    path = os.path.abspath(filename)
    keras = keras_src()
    paths = sysconfig.get_paths()
    site = os.path.abspath(paths["purelib"]) + os.sep
    stdlib = os.path.abspath(paths["stdlib"]) + os.sep
    if path in TRACE_FILES:
        return TRANSPARENT
    if path.startswith(keras):
        rel = path[len(keras) :]
        if rel.startswith(("ops" + os.sep, "backend" + os.sep, "random" + os.sep)):
            return DISPATCH
        if rel.startswith("tree" + os.sep) or rel == os.path.join("utils", "traceback_utils.py"):
            return TRANSPARENT
        return CALLER
    if path.startswith(PACKAGE):
        return OWN
    if path.startswith(site):
        package = path[len(site) :].split(os.sep, 1)[0]
        return TRANSPARENT if package in _TRANSPARENT_PACKAGES else CALLER
    if path.startswith(stdlib):
        return TRANSPARENT
    return CALLER


def source(frame: Any) -> SourceLine:
    """The line ``frame`` is running, as a record (cached per code object and line)."""
    return _source_at(frame.f_code, frame.f_lineno)


@functools.cache
def _source_at(code: Any, line: int) -> SourceLine:
    file, function = code.co_filename, code.co_name
    origin = autograph_origin(file, line)
    if origin is not None:
        file, line, function = origin
    url = None
    path = os.path.abspath(file)
    keras = keras_src()
    if path.startswith(keras):
        import keras as keras_module

        rel = path[len(keras) :].replace(os.sep, "/")
        url = (
            f"https://github.com/keras-team/keras/blob/v{keras_module.__version__}/keras/src/"
            f"{rel}#L{line}"
        )
    return SourceLine(
        file=file,
        line=line,
        function=function,
        text=linecache.getline(file, line).strip(),
        url=url,
    )


@functools.cache
def is_user_file(filename: str) -> bool:
    """Whether ``filename`` is the user's own code: a caller outside Keras and outside any
    installed package (a notebook cell, a script, the user's module, code given to ``exec``);
    a file AutoGraph generated is the file it was made from."""
    filename = _autograph_source_file(filename)
    if classify(filename) != CALLER:
        return False
    if filename.startswith("<"):
        return True
    path = os.path.abspath(filename)
    return not path.startswith(keras_src()) and not path.startswith(_sys_prefixes())


def user_source(frame: Any) -> SourceLine | None:
    """The line of the innermost frame of the user's own code on the stack from ``frame`` up
    (the cell's line that called the layer whose op this is), or ``None`` where none is."""
    n = 0
    while frame is not None and n < 200:
        if is_user_file(frame.f_code.co_filename):
            return source(frame)
        frame = frame.f_back
        n += 1
    return None


def locate(frame: Any) -> tuple[SourceLine | None, SourceLine | None, str]:
    """The caller (first frame outside the dispatch), the layer or user frame it came through
    (``via``, when it is not the caller), and the phase: ``"build"`` when the layer was
    building, else ``"call"``."""
    keras = keras_src()
    layers = keras + "layers" + os.sep
    caller = via = None
    first = frame
    build = False
    n = 0
    while frame is not None and n < 80:
        n += 1
        filename = frame.f_code.co_filename
        kind = classify(filename)
        if kind == OWN and caller is None:  # an op dtype-explorer called: its own line
            caller = first
            break
        if kind == CALLER:
            user = not filename.startswith(keras) or filename.startswith(layers)
            if caller is None:
                caller = frame
                if user:
                    via = frame
            elif via is None and user:
                via = frame
            name = frame.f_code.co_name
            if name == "_maybe_build" and filename.startswith(layers):
                build = True
            elif name == "__call__" and filename.endswith(os.sep + "layer.py") and via:
                break
        frame = frame.f_back
    return (
        source(caller) if caller is not None else None,
        source(via) if via is not None and via is not caller else None,
        "build" if build else "call",
    )

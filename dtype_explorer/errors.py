"""Clear errors for bad input: what was wrong, what is valid, and the closest match."""

from __future__ import annotations

import difflib
import re
import reprlib
from collections.abc import Iterable

#: A terminal's escape sequences: CSI (colours, bold, cursor moves) and OSC (titles, links).
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
#: The frame Keras puts around an exception raised inside a layer's ``call``.
_KERAS_HEADER = re.compile(r"^Exception encountered when calling [^\n]*\n+")
_KERAS_ARGUMENTS = "\n\nArguments received by"
_GRAPH_ERROR = "Graph execution error:"
#: The most characters of a received value an error message repeats.
MAX_ECHO = 120
_ECHO = reprlib.Repr()
_ECHO.maxlevel, _ECHO.maxstring, _ECHO.maxother = 4, 60, 60
_ECHO.maxdict = _ECHO.maxlist = _ECHO.maxtuple = _ECHO.maxset = 6


class InvalidSpecError(ValueError):
    """A probe, survey or audit was asked for something that does not exist.

    >>> raise unknown("dtype", "flaot32", ["float32", "float16"])
    Traceback (most recent call last):
    ...
    dtype_explorer.errors.InvalidSpecError: unknown dtype 'flaot32'; did you mean 'float32'? ...
    """


class NeedsSample(InvalidSpecError):
    """An audit of a model that declares no inputs, asked without a sample. ``what`` says
    which model and why; the message adds the Python API's remedy, and a front end that
    shows the error names its own (``%dtype_check model --sample x``; the CLI, which takes
    no sample, what it can do).

    >>> str(NeedsSample("Sequential 'seq' declares no inputs"))
    "Sequential 'seq' declares no inputs; pass a sample: check_model(model, sample=x)"
    """

    def __init__(self, what: str) -> None:
        super().__init__(f"{what}; pass a sample: check_model(model, sample=x)")
        self.what = what

    def __reduce__(self) -> tuple[type, tuple[str]]:
        return type(self), (self.what,)


def received(value: object, *, limit: int = MAX_ECHO) -> str:
    """``value`` as an error message repeats it: its ``repr``, cut to ``limit`` characters
    (and nested or long containers shortened) so that a 10 MB input is never echoed back.

    >>> received("float32")
    "'float32'"
    >>> text = received("x" * 10_000_000)
    >>> len(text) <= MAX_ECHO + 40, text.endswith("(10000000 characters)")
    (True, True)
    >>> received([[[[[1]]]]])
    '[[[[...]]]]'
    """
    try:
        text = _ECHO.repr(value)
    except Exception:  # a hostile __repr__ does not hide the real error
        text = f"<{type(value).__name__} object>"
    size = len(value) if isinstance(value, str | bytes) else None
    if len(text) > limit:
        text = text[:limit] + "..."
    if size is not None and size > _ECHO.maxstring:
        text += f" ({size} characters)"
    return text


def received_path(path: object, *, limit: int = 400) -> str:
    """A path the user gave, as an error message repeats it: whole (a user must see which file
    was meant), or its last ``limit`` characters, where the file's name is, when longer.

    Args:
        path: a ``str`` or ``os.PathLike``.
        limit: the most characters repeated.

    Returns:
        The path's ``repr``, or ``'...'`` and its tail.

    >>> received_path("/tmp/pytest-of-root/pytest-164/popen-gw0/models0/fifo.keras")
    "'/tmp/pytest-of-root/pytest-164/popen-gw0/models0/fifo.keras'"
    >>> received_path("/x" * 1000).endswith("/x/x'"), len(received_path("/x" * 1000)) < 420
    (True, True)
    """
    text = str(path)
    return repr(text) if len(text) <= limit else repr("..." + text[-limit:])


def listed(values: object, parameter: str, *, most: int = 10_000) -> tuple[object, ...]:
    """``values`` (one string, or a list or tuple of values) as a tuple; anything else, an
    empty list or more than ``most`` values raises ``InvalidSpecError`` naming ``parameter``.

    >>> listed("Dense", "targets"), listed(["Dense", "Conv1D"], "targets")
    (('Dense',), ('Dense', 'Conv1D'))
    >>> listed(5, "targets")
    Traceback (most recent call last):
    ...
    dtype_explorer.errors.InvalidSpecError: targets must be a name or a list of names; ...
    """
    if isinstance(values, str):
        return (values,)
    if not isinstance(values, list | tuple | set | frozenset | dict):
        raise InvalidSpecError(
            f"{parameter} must be a name or a list of names; received: {received(values)} "
            f"({type(values).__name__})"
        )
    if not values:
        raise InvalidSpecError(
            f"{parameter} is an empty {type(values).__name__}; leave it out (None) for the default"
        )
    if len(values) > most:
        raise InvalidSpecError(f"{parameter}: {len(values)} values given; the limit is {most}")
    return tuple(values)


def closest(name: str, valid: Iterable[str]) -> str | None:
    """The valid name closest to ``name`` (case-insensitive), or ``None``."""
    valid = list(valid)
    if len(name) > 4 * MAX_ECHO:  # no name is that long: nothing is close
        return None
    lowered = {v.lower(): v for v in valid}
    if name.lower() in lowered:
        return lowered[name.lower()]
    matches = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.5)
    return lowered[matches[0]] if matches else None


def unknown(kind: str, name: object, valid: Iterable[str], *, limit: int = 12) -> InvalidSpecError:
    """An ``InvalidSpecError`` naming the bad value, a close match and (some of) what is valid."""
    valid = sorted(set(valid))
    match = closest(name, valid) if isinstance(name, str) else None
    hint = f"; did you mean {match!r}?" if match else "."
    shown = ", ".join(valid[:limit]) + (
        f", ... ({len(valid)} in all)" if len(valid) > limit else ""
    )
    return InvalidSpecError(f"unknown {kind} {received(name)}{hint} Valid: {shown}")


#: Characters no text view sends to a terminal as they are: C0 and C1 controls but newline
#: and tab (ESC starts a terminal's control sequences), DEL, and the bidirectional overrides.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    r"""``text`` safe for a terminal: every control character (``ESC``, ``BEL``, a carriage
    return, a bidirectional override) written as its escape (``\x1b``), as the HTML views
    escape markup; newlines and tabs kept. Every text view goes through it (``str()``,
    ``summary()``, the rich tables, the CLI, ``%dtype_check``).

    >>> printable("d\x1b[2Jx\tok\n")
    'd\\x1b[2Jx\tok\n'
    """
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def strip_ansi(text: str) -> str:
    r"""``text`` without the terminal escape sequences Keras puts in its error messages (its
    bold ``\x1b[1m``): the one helper every place that shows Keras's words goes through.

    >>> strip_ansi("\x1b[1mValue for attr 'T' of uint8\x1b[0m")
    "Value for attr 'T' of uint8"
    """
    return _ANSI.sub("", text)


def first_line(text: str) -> str:
    """The first line of ``text`` (``""`` for blank text)."""
    return text.strip().splitlines()[0] if text.strip() else ""


def own_words(message: str, kind: str = "") -> str:
    """The line of an error message that says what went wrong: its first line, or, for a
    ``tf.function``'s "in user code:" traceback and OpenVINO's "Check '...' failed at <file>"
    (then the node), the error line at its end (without ``kind:``).

    >>> own_words("in user code:\\n  File 'a.py'\\n\\n  TypeError: bad", "TypeError")
    'bad'
    >>> own_words("Check 'x' failed at a.cpp:4:\\nWhile validating node\\nTypes do not match.")
    'Types do not match.'
    """
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if lines and (lines[0] == "in user code:" or lines[0].startswith("Check '")):
        last = lines[-1]
        return last.removeprefix(f"{kind}:").strip() if kind else last
    return first_line(message)


def keras_message(text: str, *, limit: int | None = None) -> str:
    r"""What an exception raised through Keras says, without the colour codes and the
    "Exception encountered when calling ..." / "Arguments received by ..." frame Keras adds;
    cut to ``limit`` characters.

    >>> keras_message("Exception encountered when calling Dense.call().\n\n"
    ...               "\x1b[1mbad dtype\x1b[0m\n\nArguments received by Dense.call(): ...")
    'bad dtype'
    """
    message = _KERAS_HEADER.sub("", strip_ansi(text).strip())
    message = message.split(_KERAS_ARGUMENTS, 1)[0].strip()
    message = _graph_error_cause(message)
    if limit is not None and len(message) > limit:
        message = message[:limit] + " ..."
    return message


def _graph_error_cause(message: str) -> str:
    r"""A TensorFlow graph's error without the frame TensorFlow wraps it in: "Graph execution
    error:", "Detected at node ... (most recent call last):" and its ``File`` lines, and the
    trailing ``[[{{node ...}}]]``; the cause itself kept whole.

    >>> _graph_error_cause("Graph execution error:\n\nDetected at node X defined at (most "
    ...     "recent call last):\n  File \"a.py\", line 1, in f\n\nmixed precision is "
    ...     "disallowed.\n\t [[{{node X}}]] [Op:__inference_f_1]")
    'mixed precision is disallowed.'
    """
    if not message.startswith(_GRAPH_ERROR):
        return message
    kept = []
    for line in message.removeprefix(_GRAPH_ERROR).splitlines():
        if line.startswith("Detected at node") or line.startswith("  File ") or not line.strip():
            continue
        if line.lstrip().startswith("[[{{node"):
            break
        kept.append(line)
    return "\n".join(kept).strip() or message


def as_sentence(text: str) -> str:
    r"""The first line of what a Keras error says, ending like a sentence.

    >>> as_sentence("Exception encountered when calling Dense.call().\n\nbad dtype")
    'bad dtype.'
    """
    line = first_line(keras_message(text))
    return line if line.endswith((".", "!", "?")) else line + "."

"""One shape syntax everywhere: ``2x8x3``, ``(2, 8, 3)`` and JSON ``[2, 8, 3]`` all name the
same input shape, and a comma between shapes gives one per input (``2x4, 2x4``,
``[[2, 4], [2, 4]]``). The widget's request, the CLI and ``make_spec`` read shapes with
:func:`parse_shapes`; it checks the syntax only (``make_spec`` checks the sizes).

>>> parse_shapes("2x8x3") == parse_shapes("(2, 8, 3)") == parse_shapes("[2,8,3]") == ((2, 8, 3),)
True
>>> parse_shapes("2x4, 2x4")
((2, 4), (2, 4))
"""

from __future__ import annotations

import re

from dtype_explorer.errors import InvalidSpecError, received

#: What :func:`parse_shapes` accepts, for error messages and ``--help``.
SHAPE_SYNTAX = (
    "a shape as 2x8x3, (2, 8, 3) or [2, 8, 3] (batch first), or one per input: "
    "2x4, 2x4 or [[2, 4], [2, 4]]"
)
_TOKEN = re.compile("\\s*(?:(\\d+)|([x\u00d7\\[\\](),]))")
#: The longest shape text read (longer ones are refused, never parsed).
MAX_SHAPE_TEXT = 2_000


def parse_shapes(text: str) -> tuple[tuple[int, ...], ...] | None:
    """The input shapes a text names, one tuple per input; ``None`` for an empty text (the
    catalog's default shapes).

    Args:
        text: ``2x8x3``, ``(2, 8, 3)``, ``[2, 8, 3]``, ``2,8,3`` (one shape); ``2x4, 2x4``,
            ``(2, 4), (2, 4)`` or ``[[2, 4], [2, 4]]`` (one shape per input).

    Returns:
        The shapes as tuples of positive ints, or ``None``.

    Raises:
        InvalidSpecError: for anything else, saying what was received and what is valid.

    >>> parse_shapes("(2, 4), (3, 4)"), parse_shapes("8"), parse_shapes("  ")
    (((2, 4), (3, 4)), ((8,),), None)
    >>> parse_shapes("2x")
    Traceback (most recent call last):
    ...
    dtype_explorer.errors.InvalidSpecError: shape: expected a number after 'x' at character 3; \
received: '2x'; valid: a shape as 2x8x3, (2, 8, 3) or [2, 8, 3] (batch first), or one per \
input: 2x4, 2x4 or [[2, 4], [2, 4]]
    """
    if not isinstance(text, str):
        raise InvalidSpecError(
            f"shape must be text; received: {received(text)}; valid: {SHAPE_SYNTAX}"
        )
    if not text.strip():
        return None
    if len(text) > MAX_SHAPE_TEXT:
        raise InvalidSpecError(
            f"shape is {len(text)} characters long; the limit is {MAX_SHAPE_TEXT}"
        )
    tokens = _tokens(text)
    reader = _Reader(text, tokens)
    items = [reader.value()]
    while reader.take(","):
        if reader.done():  # a trailing comma, as in (8,)
            break
        items.append(reader.value())
    if not reader.done():
        reader.fail("expected a comma or the end")
    return _shapes(items, text)


def _tokens(text: str) -> list[tuple[str, int]]:
    tokens, at = [], 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            if not text[at:].strip():
                break
            bad = text[at:].lstrip()[:1]
            raise InvalidSpecError(
                f"shape: {bad!r} at character {len(text) - len(text[at:].lstrip()) + 1} is not "
                f"part of a shape; received: {received(text)}; valid: {SHAPE_SYNTAX}"
            )
        token = match[1] or {"(": "[", ")": "]", "\u00d7": "x"}.get(match[2], match[2])
        tokens.append((token, match.end()))
        at = match.end()
    return tokens


class _Reader:
    """Reads values: a number, ``AxBxC`` (a list of numbers) or a bracketed list of values."""

    def __init__(self, text: str, tokens: list[tuple[str, int]]) -> None:
        self.text, self.tokens, self.at = text, tokens, 0

    def done(self) -> bool:
        return self.at >= len(self.tokens)

    def peek(self) -> str:
        return self.tokens[self.at][0] if not self.done() else ""

    def take(self, token: str) -> bool:
        if self.peek() == token:
            self.at += 1
            return True
        return False

    def fail(self, what: str) -> None:
        where = self.tokens[self.at - 1][1] if self.at else 0
        raise InvalidSpecError(
            f"shape: {what} at character {where + 1}; received: {received(self.text)}; "
            f"valid: {SHAPE_SYNTAX}"
        )

    def number(self) -> int:
        token = self.peek()
        if not token.isdigit():
            after = f" after {self.tokens[self.at - 1][0]!r}" if self.at else ""
            self.fail(f"expected a number{after}")
        self.at += 1
        return int(token)

    def value(self) -> int | list:
        if self.take("["):
            items: list = []
            while not self.take("]"):
                if self.done():
                    self.fail("a bracket is not closed")
                items.append(self.value())
                if self.done():
                    self.fail("a bracket is not closed")
                if not self.take(",") and self.peek() != "]":
                    self.fail("expected a comma or a closing bracket")
            return items
        first = self.number()
        if self.peek() != "x":
            return first
        dims = [first]
        while self.take("x"):
            dims.append(self.number())
        return dims


def _shapes(items: list, text: str) -> tuple[tuple[int, ...], ...]:
    """Top-level items: numbers (``2,8,3``: one shape), or shapes (one per input)."""
    if len(items) == 1 and isinstance(items[0], list):
        items = items[0]  # [2, 8, 3] or [[2, 4], [2, 4]]
    if all(isinstance(i, int) for i in items):
        shapes = [items]
    elif all(isinstance(i, list) and all(isinstance(d, int) for d in i) for i in items):
        shapes = items
    else:
        raise InvalidSpecError(
            f"shape: mixes numbers and shapes, or nests too deep; received: {received(text)}; "
            f"valid: {SHAPE_SYNTAX}"
        )
    if any(not shape or any(d <= 0 for d in shape) for shape in shapes):
        raise InvalidSpecError(
            f"shape: each shape is one or more positive sizes; received: {received(text)}; "
            f"valid: {SHAPE_SYNTAX}"
        )
    return tuple(tuple(shape) for shape in shapes)

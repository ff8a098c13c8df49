"""One shape syntax: ``2x8x3``, ``(2, 8, 3)`` and JSON name the same shapes (pure, no Keras)."""

from __future__ import annotations

import pytest

from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.shapes import SHAPE_SYNTAX, parse_shapes


@pytest.mark.parametrize(
    "text",
    [
        "2x8x3",
        "2 x 8 x 3",
        "2\u00d78\u00d73",
        "(2, 8, 3)",
        "[2,8,3]",
        "[[2, 8, 3]]",
        "2,8,3",
        "((2, 8, 3),)",
    ],
)
def test_every_spelling_of_one_shape_is_the_same(text):
    assert parse_shapes(text) == ((2, 8, 3),)


@pytest.mark.parametrize(
    "text", ["2x4, 3x4", "(2, 4), (3, 4)", "[[2, 4], [3, 4]]", "[2x4, 3x4]", "[(2, 4), (3, 4)]"]
)
def test_one_shape_per_input(text):
    assert parse_shapes(text) == ((2, 4), (3, 4))


def test_a_one_dim_shape_and_an_empty_text():
    assert parse_shapes("(8,)") == parse_shapes("8") == ((8,),)
    assert parse_shapes("") is None and parse_shapes("   ") is None


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("2x", "expected a number after 'x'"),
        ("2x-3", "'-' at character 3 is not part of a shape"),
        ("[2, 4", "a bracket is not closed"),
        ("[[2, [4]]]", "nests too deep"),
        ("2x0", "positive sizes"),
        ("[]", "positive sizes"),
        ("2 4", "expected a comma or the end"),
        ("__import__('os')", "is not part of a shape"),
    ],
)
def test_bad_shapes_say_what_was_received_and_what_is_valid(text, said):
    with pytest.raises(InvalidSpecError) as raised:
        parse_shapes(text)
    assert said in str(raised.value)
    assert "received:" in str(raised.value) and SHAPE_SYNTAX in str(raised.value)


def test_a_long_text_is_refused_unread():
    with pytest.raises(InvalidSpecError, match="the limit is"):
        parse_shapes("2," * 5000)

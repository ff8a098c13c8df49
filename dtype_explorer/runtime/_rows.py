"""How a cached answer is stored in its row: its JSON compressed (zlib), as text, tagged with the
format's version. The row's MAC (:mod:`~dtype_explorer.runtime._mac`) is over this stored text,
so a row is authenticated before anything is decompressed.

An answer's op trace is most of its JSON and repeats itself (the same dtypes, names and
stages step after step): compressed, a row takes about a fifth of its JSON
(``benchmarks/README.md``, the whole-map slice). The text is ``z1:`` and the base85 of the
zlib stream (the cache stores only text: ``cache._TextDisk``). A row of another format (an
uncompressed one, from before) or one that does not decompress reads as ``None``: a miss,
and the live answer replaces it. Decompression is bounded (:data:`MAX_JSON`), so a row
cannot expand without limit.

>>> text = encode('{"a": 1}')
>>> text.startswith(TAG), decode(text)
(True, '{"a": 1}')
>>> decode('{"a": 1}') is None, decode("z1:not base85 ~~") is None
(True, True)
"""

from __future__ import annotations

import base64
import binascii
import zlib

#: The version tag of the stored format: zlib, then base85.
TAG = "z1:"
#: The most JSON one row may expand to (a probe answer is at most a few MB).
MAX_JSON = 64 << 20
LEVEL = 6


def encode(body: str) -> str:
    """``body`` (an answer's JSON) as its row stores it: :data:`TAG` + base85(zlib(body))."""
    return TAG + base64.b85encode(zlib.compress(body.encode(), LEVEL)).decode("ascii")


def decode(text: str) -> str | None:
    """The JSON a stored row holds, or ``None`` for a row of another format, or one that is
    not a whole zlib stream within :data:`MAX_JSON`."""
    if type(text) is not str or not text.startswith(TAG):
        return None
    try:
        packed = base64.b85decode(text[len(TAG) :])
        inflate = zlib.decompressobj()
        body = inflate.decompress(packed, MAX_JSON)
        if inflate.unconsumed_tail or not inflate.eof:
            return None  # longer than allowed, or cut short
        return body.decode()
    except (ValueError, binascii.Error, zlib.error, UnicodeDecodeError):
        return None

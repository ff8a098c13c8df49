"""A stored answer read without the cache's storage stack: its signed row read as
:mod:`._row_read` reads one (SQLite opened read-only, the HMAC checked with this user's key),
and its body validated as the answer to this very spec. The ``dtype-explorer`` command uses it
when no printed answer is kept for its command line (``frontends.command``), so that it
imports no ``diskcache``, ``filelock``, worker pool or ``typer``.

It refuses what :mod:`dtype_explorer.runtime.cache` refuses: a row not signed with this user's
key, not of the stored format, not a ``ProbeResult``, or the answer to another spec is
``None``, as is anything it cannot read (no database yet, a locked or damaged one, an engine's
spec, a backend not installed or not allowed). ``None`` is never an error: the caller then asks
the full path, which runs the probe live and says what went wrong.

>>> from dtype_explorer.records import ProbeSpec
>>> spec = ProbeSpec(target="Dense", input_dtypes=("float32",), policy="float32",
...                  backend="numpy", kwargs={"units": 2}, shapes=((2, 3),))
>>> answer(spec) is None or answer(spec).cached
True
"""

from __future__ import annotations

import pydantic

from dtype_explorer.records import ProbeResult, ProbeSpec
from dtype_explorer.runtime import _allowed, _row_read
from dtype_explorer.runtime._cache_key import installed_key

#: The cache's database file in its directory (``_store.FILE``; a test pins them equal).
DB_FILE = _row_read.DB_FILE
#: The variable that limits the backends a worker may start for (read by ``_allowed``).
ENV_BACKENDS = _allowed.ENV_BACKENDS


def answer(spec: ProbeSpec) -> ProbeResult | None:
    """The stored answer to ``spec`` (``cached=True``) when it is there and signed with this
    user's key, else ``None`` (see the module's docstring).

    Args:
        spec: a checked spec (``make_spec``) for one backend, without an engine.

    Returns:
        The answer, marked cached, or ``None``.
    """
    if spec.engine is not None or not _row_read.readable(spec.backend):
        return None
    text = _row_read.signed_text(installed_key(spec))
    if text is None:
        return None
    try:
        result = ProbeResult.model_validate_json(text)
    except (pydantic.ValidationError, ValueError, RecursionError):
        return None
    if result.spec != spec:
        return None
    return result.model_copy(update={"cached": True})

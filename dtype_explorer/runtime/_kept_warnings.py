"""The warnings a worker keeps with an answer: those raised while the probe called its target
(a Keras deprecation about the layer asked), each once and at most :data:`MAX_WARNINGS`, and
written to the worker's log as they were raised; the frameworks' own deprecation noise is left
out (``_worker.run`` records each probe's, in Keras 3 and in the Keras 2 engine)."""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator

#: The most warnings kept with one answer, and the longest text of one.
MAX_WARNINGS = 8
MAX_WARNING_CHARS = 500


_NUMPY_COPY_NOTICE = r"__array__ implementation doesn't accept a copy keyword"


@contextlib.contextmanager
def kept_warnings() -> Iterator[list[str]]:
    """Record the warnings raised inside the block (the probe's call of the target: a Keras
    deprecation about the layer asked) as ``"Category: message"`` lines, each once, at most
    ``MAX_WARNINGS``; they are written to the worker's log too. Deprecations raised inside the
    frameworks' own internals (not Keras's) are not about the question and are dropped."""
    said: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=PendingDeprecationWarning)
        warnings.filterwarnings("always", category=DeprecationWarning, module=r"keras\b")
        # NumPy 2's migration notice when Keras converts a framework's array: about the
        # libraries' versions, not about the question (it came with every jax probe).
        warnings.filterwarnings("ignore", message=_NUMPY_COPY_NOTICE, category=DeprecationWarning)
        try:
            yield said
        finally:
            for item in caught:
                text = f"{item.category.__name__}: {item.message}".strip()
                text = text if len(text) <= MAX_WARNING_CHARS else text[:MAX_WARNING_CHARS] + " ..."
                if text not in said and len(said) < MAX_WARNINGS:
                    said.append(text)
                with contextlib.suppress(Exception):
                    print(
                        warnings.formatwarning(
                            item.message, item.category, item.filename, item.lineno
                        ),
                        file=sys.stderr,
                        end="",
                        flush=True,
                    )

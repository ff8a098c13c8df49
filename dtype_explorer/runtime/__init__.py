"""The runtime: worker processes, one per backend (``pool``), and the persistent result cache
(``cache``). Keras fixes its backend at import, so the kernel asks each backend's worker; a
worker that hangs or dies takes no kernel down, and answers are kept across sessions.

``pool`` and ``cache`` are imported on first use, so a cached read (``cached``) imports neither.
"""

from __future__ import annotations

from dtype_explorer import lazy

__all__ = ["cache", "pool"]

__getattr__, __dir__ = lazy.exports(
    __name__, {"cache": "dtype_explorer.runtime.cache", "pool": "dtype_explorer.runtime.pool"}
)

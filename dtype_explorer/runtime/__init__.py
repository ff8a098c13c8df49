"""The runtime: worker processes, one per backend (``pool``), and the persistent result cache
(``cache``). Keras fixes its backend at import, so the kernel asks each backend's worker; a
worker that hangs or dies takes no kernel down, and answers are kept across sessions.

``pool`` and ``cache`` are imported on first use, so a cached read (``cache_read``) imports neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dtype_explorer import lazy

#: Public name -> the module that holds it, imported on first use (``dtype_explorer.lazy``).
_EXPORTS: dict[str, str] = {
    "cache": "dtype_explorer.runtime.cache",
    "pool": "dtype_explorer.runtime.pool",
}

if TYPE_CHECKING:  # the real imports, for readers, IDEs and type checkers
    from dtype_explorer.runtime import cache, pool

__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)

#: The public names: the table's.
__all__ = [name for name in _EXPORTS if not name.startswith("_")]

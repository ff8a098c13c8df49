"""The runtime: worker processes, one per backend (``pool``), and the persistent result cache
(``cache``). Keras fixes its backend at import, so the kernel asks each backend's worker; a
worker that hangs or dies takes no kernel down, and answers are kept across sessions.
"""

from __future__ import annotations

from dtype_explorer.runtime import cache, pool

__all__ = ["cache", "pool"]

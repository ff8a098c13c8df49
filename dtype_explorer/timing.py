"""Elapsed time, measured and rounded one way everywhere (foundation: no dependency inside the
package).

>>> import time
>>> start = time.perf_counter()
>>> ms(start) >= 0.0
True
"""

from __future__ import annotations

import time

#: Decimals kept in every millisecond figure a record carries (a microsecond).
DECIMALS = 3


def ms(start: float) -> float:
    """Milliseconds since ``start``, rounded to a microsecond.

    Args:
        start: a ``time.perf_counter()`` reading.

    Returns:
        The elapsed time in milliseconds, rounded to ``DECIMALS`` decimals.
    """
    return round((time.perf_counter() - start) * 1000, DECIMALS)

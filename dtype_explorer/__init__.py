"""dtype-explorer: what dtype does this Keras layer or op really produce, on each backend?

>>> import dtype_explorer as dx
>>> r = dx.probe("Dense", input_dtype="uint8", policy="mixed_float16", backend="jax",
...              kwargs={"units": 4})                                       # doctest: +SKIP
>>> r.output_dtype                                                          # doctest: +SKIP
'float16'

Names are imported lazily, so ``import dtype_explorer`` does not import Keras or a backend.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "probe": "dtype_explorer.api",
    "survey": "dtype_explorer.sweep",
    "promotion_table": "dtype_explorer.promotion",
    "check_model": "dtype_explorer.audit",
    "DtypeExplorer": "dtype_explorer.widget",
    "shutdown": "dtype_explorer.pool",
    "cache": "dtype_explorer.cache",
    "catalog": "dtype_explorer.catalog",
    "ProbeSpec": "dtype_explorer.model",
    "ProbeResult": "dtype_explorer.model",
    "ProbeSet": "dtype_explorer.model",
    "InvalidSpecError": "dtype_explorer.errors",
    "Survey": "dtype_explorer.sweep",
    "PromotionTable": "dtype_explorer.promotion",
    "AuditReport": "dtype_explorer.audit",
}

#: Names that are modules themselves (``dx.cache.clear()``, ``dx.catalog.groups()``).
_MODULE_EXPORTS = frozenset({"cache", "catalog"})

if TYPE_CHECKING:
    from dtype_explorer.api import probe
    from dtype_explorer.audit import AuditReport, check_model
    from dtype_explorer.errors import InvalidSpecError
    from dtype_explorer.model import ProbeResult, ProbeSet, ProbeSpec
    from dtype_explorer.pool import shutdown
    from dtype_explorer.promotion import PromotionTable, promotion_table
    from dtype_explorer.sweep import Survey, survey
    from dtype_explorer.widget import DtypeExplorer


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'dtype_explorer' has no attribute {name!r}")
    module = importlib.import_module(module_name)
    value = module if name in _MODULE_EXPORTS else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext dtype_explorer`` registers ``%dtype_check``."""
    from dtype_explorer.magic import load_ipython_extension as load

    load(ipython)


__all__ = [  # noqa: RUF022 - the public names, as DESIGN.md lists them
    "probe",
    "survey",
    "promotion_table",
    "check_model",
    "DtypeExplorer",
    "shutdown",
    "cache",
    "catalog",
    "ProbeSpec",
    "ProbeResult",
    "ProbeSet",
    "InvalidSpecError",
    "Survey",
    "PromotionTable",
    "AuditReport",
    "load_ipython_extension",
]

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

__version__ = "0.2.0"

#: Public name -> the module that holds it. The code is laid out by role (see
#: docs/architecture.md): records, engine, runtime, analyses, views, front ends.
_EXPORTS: dict[str, str] = {
    "probe": "dtype_explorer.analyses",
    "survey": "dtype_explorer.analyses",
    "promotion_table": "dtype_explorer.analyses",
    "check_model": "dtype_explorer.analyses",
    "bisect": "dtype_explorer.analyses",
    "trace": "dtype_explorer.analyses",
    "TraceResult": "dtype_explorer.records",
    "DtypeExplorer": "dtype_explorer.frontends.widget",
    "shutdown": "dtype_explorer.runtime.pool",
    "cache": "dtype_explorer.runtime.cache",
    "engines": "dtype_explorer.runtime.engines",
    "Engine": "dtype_explorer.records",
    "pool": "dtype_explorer.runtime.pool",
    "catalog": "dtype_explorer.keras_run.catalog",
    "ProbeSpec": "dtype_explorer.records",
    "ProbeResult": "dtype_explorer.records",
    "ProbeSet": "dtype_explorer.records",
    "InvalidSpecError": "dtype_explorer.errors",
    "Survey": "dtype_explorer.records",
    "PromotionTable": "dtype_explorer.records",
    "AuditReport": "dtype_explorer.records",
    "BisectResult": "dtype_explorer.records",
}

#: Names that are modules themselves (``dx.cache.clear()``, ``dx.catalog.groups()``,
#: ``dx.pool.configure(...)``).
_MODULE_EXPORTS = frozenset({"cache", "catalog", "engines", "pool"})

if TYPE_CHECKING:
    from dtype_explorer.analyses import bisect, check_model, probe, promotion_table, survey, trace
    from dtype_explorer.errors import InvalidSpecError
    from dtype_explorer.frontends.widget import DtypeExplorer
    from dtype_explorer.keras_run import catalog
    from dtype_explorer.records import (
        AuditReport,
        BisectResult,
        Engine,
        ProbeResult,
        ProbeSet,
        ProbeSpec,
        PromotionTable,
        Survey,
        TraceResult,
    )
    from dtype_explorer.runtime import cache, engines, pool
    from dtype_explorer.runtime.pool import shutdown


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
    """``%load_ext dtype_explorer`` registers ``%dtype_check`` and ``%%dtype_trace``."""
    importlib.import_module("dtype_explorer.frontends.magic").load_ipython_extension(ipython)


__all__ = [  # noqa: RUF022 - the public names, in the order docs/architecture.md lists them
    "probe",
    "survey",
    "promotion_table",
    "check_model",
    "bisect",
    "trace",
    "DtypeExplorer",
    "shutdown",
    "cache",
    "engines",
    "catalog",
    "pool",
    "ProbeSpec",
    "ProbeResult",
    "ProbeSet",
    "InvalidSpecError",
    "Survey",
    "PromotionTable",
    "AuditReport",
    "BisectResult",
    "TraceResult",
    "Engine",
    "load_ipython_extension",
]

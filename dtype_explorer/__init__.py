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

from dtype_explorer import keras_release, lazy

__version__ = "0.2.2"

# One clear error for a Keras older than the lowest release the package runs on (read without
# importing Keras), instead of failures probe by probe.
keras_release.check()

#: Public name -> the module that holds it (``dtype_explorer.lazy``: a name that is the module's
#: own last part is the module itself). The code is laid out by role (see
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
    "colab": "dtype_explorer.frontends.colab",
    "shutdown": "dtype_explorer.runtime.pool",
    "cache": "dtype_explorer.runtime.cache",
    "engines": "dtype_explorer.runtime.engines",
    "catalog": "dtype_explorer.keras_run.catalog",
    "pool": "dtype_explorer.runtime.pool",
    "ProbeSpec": "dtype_explorer.records",
    "ProbeResult": "dtype_explorer.records",
    "ProbeSet": "dtype_explorer.records",
    "InvalidSpecError": "dtype_explorer.errors",
    "Survey": "dtype_explorer.records",
    "PromotionTable": "dtype_explorer.records",
    "AuditReport": "dtype_explorer.records",
    "BisectResult": "dtype_explorer.records",
    "Engine": "dtype_explorer.records",
}

if TYPE_CHECKING:  # the real imports, for readers, IDEs and type checkers
    from dtype_explorer.analyses import bisect, check_model, probe, promotion_table, survey, trace
    from dtype_explorer.errors import InvalidSpecError
    from dtype_explorer.frontends import colab
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

__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext dtype_explorer`` registers ``%dtype_check`` and ``%%dtype_trace``."""
    importlib.import_module("dtype_explorer.frontends.magic").load_ipython_extension(ipython)


#: The public names: the table's, in the order docs/architecture.md lists them, and the magic's
#: loader.
__all__ = [*_EXPORTS, "load_ipython_extension"]

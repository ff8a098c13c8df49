"""Analyses: the questions users ask, answered with the engine and the runtime.

``probe`` (one target, one or several backends), ``survey`` (targets x dtypes x policies x
backends), ``promotion_table`` (an op over every pair of dtypes, beside the array libraries),
``check_model`` (a model's real forward pass, with findings), ``bisect`` (one question
over a range of Keras releases: where its answer changed), ``trace`` (the user's own function
or cell, run as written, every dtype step inside it), and ``build_atlas`` (a survey made
into a report, written as Parquet, JSON and a static site; ``write_atlas`` writes it without
holding it). Each returns a record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dtype_explorer import lazy

#: Public name -> the module that holds it, imported on first use (``dtype_explorer.lazy``).
_EXPORTS: dict[str, str] = {
    "build_atlas": "dtype_explorer.analyses._atlas",
    "write_atlas": "dtype_explorer.analyses._atlas",
    "write_parts": "dtype_explorer.analyses._atlas",
    "save_atlas": "dtype_explorer.analyses._atlas",
    "writable_directory": "dtype_explorer.analyses._atlas",
    "query_atlas": "dtype_explorer.analyses._atlas",
    "check_model": "dtype_explorer.analyses.audit._check",
    "Tracer": "dtype_explorer.analyses._code_api",
    "CellTimeout": "dtype_explorer.analyses._code",
    "trace_called": "dtype_explorer.analyses._code",
    "trace_compiled": "dtype_explorer.analyses._code",
    "trace_function_on_backends": "dtype_explorer.analyses._code_backends",
    "trace_on_backends": "dtype_explorer.analyses._code_backends",
    "trace": "dtype_explorer.analyses._code_api",
    "NoAnswerError": "dtype_explorer.analyses._bisect",
    "PackageIndexError": "dtype_explorer.analyses._bisect",
    "bisect": "dtype_explorer.analyses._bisect",
    "index_releases": "dtype_explorer.analyses._bisect",
    "resolve_versions": "dtype_explorer.analyses._bisect",
    "probe": "dtype_explorer.analyses._probe",
    "resolve_backends": "dtype_explorer.analyses._probe",
    "promotion_table": "dtype_explorer.analyses._promotion",
    "progress_with": "dtype_explorer.analyses._run",
    "DEFAULT_POLICIES": "dtype_explorer.analyses._survey",
    "expand_targets": "dtype_explorer.analyses._survey",
    "run_specs": "dtype_explorer.analyses._survey",
    "survey": "dtype_explorer.analyses._survey",
}

if TYPE_CHECKING:  # the real imports, for readers, IDEs and type checkers
    from dtype_explorer.analyses._atlas import (
        build_atlas,
        query_atlas,
        save_atlas,
        writable_directory,
        write_atlas,
        write_parts,
    )
    from dtype_explorer.analyses._bisect import (
        NoAnswerError,
        PackageIndexError,
        bisect,
        index_releases,
        resolve_versions,
    )
    from dtype_explorer.analyses._code import CellTimeout, trace_called, trace_compiled
    from dtype_explorer.analyses._code_api import Tracer, trace
    from dtype_explorer.analyses._code_backends import (
        trace_function_on_backends,
        trace_on_backends,
    )
    from dtype_explorer.analyses._probe import probe, resolve_backends
    from dtype_explorer.analyses._promotion import promotion_table
    from dtype_explorer.analyses._run import progress_with
    from dtype_explorer.analyses._survey import DEFAULT_POLICIES, expand_targets, run_specs, survey
    from dtype_explorer.analyses.audit._check import check_model

__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)

#: The public names: the table's.
__all__ = [name for name in _EXPORTS if not name.startswith("_")]

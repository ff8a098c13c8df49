"""Analyses: the questions users ask, answered with the engine and the runtime.

``probe`` (one target, one or several backends), ``survey`` (targets x dtypes x policies x
backends), ``promotion_table`` (an op over every pair of dtypes, beside the array libraries),
``check_model`` (a model's real forward pass, with findings), ``bisect`` (one question
over a range of Keras releases: where its answer changed) and ``build_atlas`` (a survey made
into a report, written as JSON and a static site). Each returns a record.
"""

from __future__ import annotations

from dtype_explorer.analyses._atlas import build_atlas, save_atlas, writable_directory
from dtype_explorer.analyses._audit import check_model
from dtype_explorer.analyses._bisect import (
    NoAnswerError,
    PackageIndexError,
    bisect,
    index_releases,
    resolve_versions,
)
from dtype_explorer.analyses._probe import probe, resolve_backends
from dtype_explorer.analyses._promotion import promotion_table
from dtype_explorer.analyses._survey import DEFAULT_POLICIES, expand_targets, run_specs, survey

__all__ = [
    "DEFAULT_POLICIES",
    "NoAnswerError",
    "PackageIndexError",
    "bisect",
    "build_atlas",
    "check_model",
    "expand_targets",
    "index_releases",
    "probe",
    "promotion_table",
    "resolve_backends",
    "resolve_versions",
    "run_specs",
    "save_atlas",
    "survey",
    "writable_directory",
]

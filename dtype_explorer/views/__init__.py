"""Views: records drawn as text, HTML cards, SVG and plotly figures.

A view takes a record and lays out what it says; it imports no engine, runtime or analysis
module and computes no dtype fact (an import contract checks this). ``VIEWS`` names the view
of each record for the records' display dispatch (``dtype_explorer.records.display``), which
``str(record)``, ``record._repr_html_()`` and ``record.figure()`` go through; a view's module
is imported when a record first needs it, so printing a probe imports only the text view.

>>> from dtype_explorer.records import ProbeResult, ProbeSpec
>>> from dtype_explorer.views import result_html
>>> r = ProbeResult(spec=ProbeSpec(target="Dense"), status="ok", backend="numpy",
...                 output_dtype="float32", verdict="as-documented")
>>> "class='dx-card'" in result_html(r)
True
>>> str(r).splitlines()[0]
'Dense on numpy (cpu), policy float32: ok, as-documented'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dtype_explorer import lazy

#: Public name -> the module that holds it, imported on first use (``dtype_explorer.lazy``).
_EXPORTS: dict[str, str] = {
    "code_html": "dtype_explorer.views._as_code",
    "code_text": "dtype_explorer.views._as_code",
    "atlas_diff_html": "dtype_explorer.views._atlas",
    "atlas_site": "dtype_explorer.views._atlas",
    "target_data": "dtype_explorer.views._atlas",
    "target_data_href": "dtype_explorer.views._atlas",
    "target_href": "dtype_explorer.views._atlas",
    "bisect_html": "dtype_explorer.views._bisect",
    "bisect_text": "dtype_explorer.views._bisect",
    "code_trace_html": "dtype_explorer.views._code",
    "comparison_html": "dtype_explorer.views._code",
    "comparison_text": "dtype_explorer.views._code",
    "code_trace_text": "dtype_explorer.views._code",
    "fit_figure": "dtype_explorer.views._figures",
    "promotion_figure": "dtype_explorer.views._figures",
    "survey_figure": "dtype_explorer.views._figures",
    "audit_html": "dtype_explorer.views._html",
    "probe_set_html": "dtype_explorer.views._html",
    "promotion_html": "dtype_explorer.views._html",
    "result_html": "dtype_explorer.views._html",
    "survey_html": "dtype_explorer.views._html",
    "survey_summary_html": "dtype_explorer.views._html",
    "chip": "dtype_explorer.views._markup",
    "PALETTE": "dtype_explorer.views._palette",
    "dtype_color": "dtype_explorer.views._palette",
    "dtype_kind": "dtype_explorer.views._palette",
    "text_on": "dtype_explorer.views._palette",
    "cast_path_svg": "dtype_explorer.views._svg",
    "audit_text": "dtype_explorer.views._text",
    "format_result": "dtype_explorer.views._text",
    "format_trace": "dtype_explorer.views._text",
    "audit_renderables": "dtype_explorer.views._terminal",
    "probe_set_table": "dtype_explorer.views._terminal",
    "promotion_grid": "dtype_explorer.views._terminal",
}

if TYPE_CHECKING:  # the real imports, for readers, IDEs and type checkers
    from dtype_explorer.views._as_code import code_html, code_text
    from dtype_explorer.views._atlas import (
        atlas_diff_html,
        atlas_site,
        target_data,
        target_data_href,
        target_href,
    )
    from dtype_explorer.views._bisect import bisect_html, bisect_text
    from dtype_explorer.views._code import (
        code_trace_html,
        code_trace_text,
        comparison_html,
        comparison_text,
    )
    from dtype_explorer.views._figures import fit_figure, promotion_figure, survey_figure
    from dtype_explorer.views._html import (
        audit_html,
        probe_set_html,
        promotion_html,
        result_html,
        survey_html,
        survey_summary_html,
    )
    from dtype_explorer.views._markup import chip
    from dtype_explorer.views._palette import PALETTE, dtype_color, dtype_kind, text_on
    from dtype_explorer.views._svg import cast_path_svg
    from dtype_explorer.views._terminal import audit_renderables, probe_set_table, promotion_grid
    from dtype_explorer.views._text import audit_text, format_result, format_trace

__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)

#: Which view draws each record, per kind of rendering (record class name -> public view
#: name): ``dtype_explorer.records.display`` reads it on a record's first rendering and
#: imports only that view's module.
VIEWS: dict[str, dict[str, str]] = {
    "text": {
        "ProbeResult": "format_result",
        "AuditReport": "audit_text",
        "BisectResult": "bisect_text",
        "TraceResult": "code_trace_text",
        "CodeComparison": "comparison_text",
        "CodeCopy": "code_text",
    },
    "html": {
        "ProbeResult": "result_html",
        "ProbeSet": "probe_set_html",
        "Survey": "survey_summary_html",
        "PromotionTable": "promotion_html",
        "AuditReport": "audit_html",
        "BisectResult": "bisect_html",
        "TraceResult": "code_trace_html",
        "CodeComparison": "comparison_html",
        "CodeCopy": "code_html",
    },
    "page": {"Survey": "survey_html", "Atlas": "atlas_site", "AtlasDiff": "atlas_diff_html"},
    "figure": {
        "Survey": "survey_figure",
        "PromotionTable": "promotion_figure",
        "AuditReport": "fit_figure",
        "FitReport": "fit_figure",
    },
}

#: The public names: the table's.
__all__ = [name for name in _EXPORTS if not name.startswith("_")]

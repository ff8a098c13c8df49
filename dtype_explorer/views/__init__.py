"""Views: records drawn as text, HTML cards, SVG and plotly figures.

A view takes a record and lays out what it says; it imports no engine, runtime or analysis
module and computes no dtype fact (an import contract checks this). Importing this package
registers every view with the records' display dispatch (``dtype_explorer.records.display``),
which ``str(record)``, ``record._repr_html_()`` and ``record.figure()`` go through.

>>> from dtype_explorer.records import ProbeResult, ProbeSpec
>>> r = ProbeResult(spec=ProbeSpec(target="Dense"), status="ok", backend="numpy",
...                 output_dtype="float32", verdict="as-documented")
>>> "class='dx-card'" in result_html(r)
True
>>> str(r).splitlines()[0]
'Dense on numpy (cpu), policy float32: ok, as-documented'
"""

from __future__ import annotations

from dtype_explorer.records import (
    Atlas,
    AtlasDiff,
    AuditReport,
    BisectResult,
    ProbeResult,
    ProbeSet,
    PromotionTable,
    Survey,
    display,
)
from dtype_explorer.views._atlas import atlas_diff_html, atlas_site, target_href
from dtype_explorer.views._bisect import bisect_html, bisect_text
from dtype_explorer.views._figures import promotion_figure, survey_figure
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
from dtype_explorer.views._text import audit_text, format_result, format_trace

display.text.register(ProbeResult, format_result)
display.text.register(AuditReport, audit_text)
display.text.register(BisectResult, bisect_text)
display.html.register(ProbeResult, result_html)
display.html.register(ProbeSet, probe_set_html)
display.html.register(Survey, survey_summary_html)
display.html.register(PromotionTable, promotion_html)
display.html.register(AuditReport, audit_html)
display.html.register(BisectResult, bisect_html)
display.page.register(Survey, survey_html)
display.page.register(Atlas, atlas_site)
display.page.register(AtlasDiff, atlas_diff_html)
display.figure.register(Survey, survey_figure)
display.figure.register(PromotionTable, promotion_figure)

__all__ = [
    "PALETTE",
    "atlas_diff_html",
    "atlas_site",
    "audit_html",
    "audit_text",
    "bisect_html",
    "bisect_text",
    "cast_path_svg",
    "chip",
    "dtype_color",
    "dtype_kind",
    "format_result",
    "format_trace",
    "probe_set_html",
    "promotion_figure",
    "promotion_html",
    "result_html",
    "survey_figure",
    "survey_html",
    "survey_summary_html",
    "target_href",
    "text_on",
]

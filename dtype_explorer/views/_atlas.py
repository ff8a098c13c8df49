"""The atlas as a static site, and an atlas diff as a page: plain HTML with the stylesheet
(``atlas.css``) and the script inlined, so the pages open from the file system with no server
and no CDN. Colours are the one palette's; every fact comes from the records.

The script is ``js/src/atlas.js`` (unit-tested with the widget's modules, reading the same
palette module), bundled by ``npm run build`` into ``dtype_explorer/static/atlas.js``, which the
wheel ships beside the widget's bundle.

``index.html``: the versions and devices that produced the atlas, the class counts, every
target with its counts and a search box. ``targets/<name>.html``: a page per layer and op with
its heatmaps (input dtype x policy, coloured by the cell's class, then by each backend's) and,
for a chosen cell, each run's cast path, error, op-trace summary, device and versions.

A page holds only what its grids need, as a compact list of cells the script draws the
heatmaps from (``views/_atlas_data.py`` lays it out; a ``<noscript>`` line says so where
scripts are off). A target's runs are in its own small data file, ``data/<name>.js``, loaded
when its page opens: a classic script that hands its JSON to ``window.dxAtlasTarget``
(Chromium refuses ``fetch`` from ``file://``; a ``<script src>`` is allowed), each distinct run
once, its repeated texts and cast-path steps in the file's tables. The stylesheet and the
script are written once, ``assets/atlas.css`` and ``assets/atlas.js``, not into every page, and
so is the search box's list of targets (``assets/targets.js``, loaded as a data file is: a page
holding it would make the site grow with the square of its targets).
The diff page stays one self-contained file.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from dtype_explorer.records import CHANGE_KINDS, CLASSIFICATIONS, Atlas, AtlasDiff
from dtype_explorer.views._atlas_data import grid_data, target_data
from dtype_explorer.views._markup import e
from dtype_explorer.views._palette import color, dtype_color, fill_style, mark

CSS = Path(__file__).with_name("atlas.css").read_text(encoding="utf-8")
#: The bundled atlas script (``npm run build`` in ``js/`` writes it; a wheel ships it).
SCRIPT_PATH = Path(__file__).parents[1] / "static" / "atlas.js"
#: What each kind of change means, for the diff page.
CHANGE_TEXT = {
    "now-raises": "answered before, raises now",
    "now-works": "raised before, answers now",
    "dtype-changed": "another output dtype",
    "error-changed": "another error (or a timeout, a crash)",
    "class-changed": "same outcome, classed otherwise (declared vs observed)",
    "added": "only in the second atlas",
    "removed": "only in the first atlas",
}


def target_href(target: str) -> str:
    """The page of ``target``, relative to the site's root (a file name safe everywhere).

    A name with other characters has them replaced and a short hash of the name added, so
    that two targets never share a page (``"a b"`` and ``"a_b"``).

    >>> target_href("ops.nn.relu"), target_href("Conv1D")
    ('targets/ops.nn.relu.html', 'targets/Conv1D.html')
    >>> target_href("a b") != target_href("a_b")
    True
    """
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", target)
    if safe != target:
        safe += "-" + hashlib.sha256(target.encode()).hexdigest()[:10]
    return f"targets/{safe}.html"


def target_data_href(target: str) -> str:
    """The data file of ``target``'s page, relative to the site's root.

    >>> target_data_href("ops.nn.relu")
    'data/ops.nn.relu.js'
    """
    return "data/" + target_href(target).removeprefix("targets/").removesuffix(".html") + ".js"


#: What a target page says where its script cannot run (it draws the grids and the detail).
NOSCRIPT = (
    "<noscript><p class='ax-error' data-testid='noscript'>This page draws its grids and each "
    "cell's detail with JavaScript: turn it on to see them. Every run is in atlas.json and "
    "atlas.parquet in the site's folder.</p></noscript>"
)
#: The search box's list of targets, once for the site (not in every page), and the function
#: it calls with it (``js/src/atlas.js`` loads it as it loads a data file).
TARGETS_HREF, TARGETS_CALLBACK = "assets/targets.js", "dxAtlasTargets"
#: The function a target's data file calls with its JSON (``js/src/atlas.js`` defines it).
DATA_CALLBACK = "dxAtlasTarget"


def atlas_site(atlas: Atlas, parts: Iterable[Atlas] | None = None) -> dict[str, str]:
    """Every file of ``atlas``'s site: relative path -> text (the pages, each target's data
    file, the stylesheet and the script), from ``parts`` where given (``Atlas.parts`` of the
    same atlas, e.g. a collector's, decoded a target at a time: ``atlas`` is then only its
    header)."""
    return dict(site_files(atlas.parts() if parts is None else parts))


def site_files(parts: Iterable[Atlas]) -> Iterator[tuple[str, str]]:
    """The site's files, ``(relative path, text)``, written from ``parts`` (``Atlas.parts``:
    an atlas per target, in the order of its ``targets``, each with the whole atlas's header
    and that target's cells only) a target at a time: its page and its data file; the index
    last, from what each part counted. Only one target's cells are held at a time.
    """
    yield "assets/atlas.css", site_css()
    yield "assets/atlas.js", site_script()
    header, counts, colors = None, {}, {}
    for i, part in enumerate(parts):
        header, target = part, part.targets[i]
        page_colors = _colors(part)
        colors.update(page_colors)
        counts[target] = part.counts()
        yield target_href(target), _target_page(part, target, page_colors)
        data = script_json(target_data(part, target))  # no "<!--" even inside a string
        yield target_data_href(target), f"{DATA_CALLBACK}({data});\n"
    if header is None:
        return
    index = [{"name": t, "href": target_href(t)} for t in header.targets]
    yield TARGETS_HREF, f"{TARGETS_CALLBACK}({script_json(index)});\n"
    yield "index.html", _index_page(header, index, dict(sorted(colors.items())), counts)


@functools.cache
def site_css() -> str:
    """The site's stylesheet: ``atlas.css`` and a class per cell class (``ax-k-<class>``, the
    palette's fill), so that a grid's cells carry a class, not a style each."""
    kinds = "".join(f".ax-k-{c}{{{fill_style('survey_classes', c)}}}" for c in CLASSIFICATIONS)
    return CSS + "\n" + kinds + "\n"


def _colors(atlas: Atlas) -> dict[str, str]:
    names = set(atlas.input_dtypes) | set(atlas.compute_dtypes.values())
    for cell in atlas.cells:
        for run in cell.runs.values():
            names.update(s.dtype for s in run.cast_path)
            if run.output_dtype:
                names.add(run.output_dtype)
    return {n: dtype_color(n) for n in sorted(names)}


@functools.cache
def site_script() -> str:
    """The atlas pages' script, ready to inline (read once from :data:`SCRIPT_PATH`)."""
    if not SCRIPT_PATH.is_file():
        raise FileNotFoundError(
            f"the atlas site's script {str(SCRIPT_PATH)!r} is missing: it is built from "
            "js/src/atlas.js by `npm run build` in js/ (an editable install runs it)"
        )
    return SCRIPT_PATH.read_text(encoding="utf-8").replace("</script", "<\\/script")


#: What JSON inside a <script> element must not hold as is: ``<`` (``</script>``, ``<!--``
#: opens the script's double-escaped state), ``>``, ``&``, and the two line separators.
_SCRIPT_UNSAFE = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_SCRIPT_UNSAFE_RE = re.compile("[<>&\u2028\u2029]")


def script_json(data: Any) -> str:
    """``data`` as JSON safe inside a ``<script>`` element: the characters that end or change
    a script's parsing written as ``\\u`` escapes (JSON reads them back the same).

    >>> script_json({"name": "<!--<script>"})
    '{"name":"\\\\u003c!--\\\\u003cscript\\\\u003e"}'
    >>> json.loads(script_json({"name": "<!--<script>&\u2028"}))["name"] == "<!--<script>&\u2028"
    True
    """
    text = json.dumps(data, separators=(",", ":"))
    return _SCRIPT_UNSAFE_RE.sub(lambda m: _SCRIPT_UNSAFE[m.group()], text)


def _page(title: str, body: str, data: dict[str, Any], *, base: str, inline: bool = False) -> str:
    """A page: the stylesheet and script inlined (``inline``: a page that stands alone), else
    the site's ``assets/`` files."""
    payload = script_json({**data, "base": base})
    style = (
        f"<style>{site_css()}</style>"
        if inline
        else (f"<link rel='stylesheet' href='{base}assets/atlas.css'>")
    )
    script = (
        f"<script>{site_script()}</script>"
        if inline
        else f"<script src='{base}assets/atlas.js'></script>"
    )
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{e(title)}</title>{style}</head><body>"
        "<header class='ax-top'>"
        f"<a class='ax-home' href='{base}index.html' data-testid='home'>dtype atlas</a>"
        "<div class='ax-search'><input id='ax-search' type='search' data-testid='search' "
        "placeholder='search layers and ops…' aria-label='search layers and ops' "
        "autocomplete='off'><ul id='ax-hits' class='ax-hits'></ul></div></header>"
        f"<main>{body}</main>"
        f"<script id='ax-data' type='application/json'>{payload}</script>"
        f"{script}</body></html>"
    )


def _legend() -> str:
    items = "".join(
        f"<span style='{fill_style('survey_classes', c)}'>{e(mark(c))} {e(c)}</span>"
        for c in CLASSIFICATIONS
    )
    return f"<div class='ax-legend'>{items}</div>"


def _bar(counts: dict[str, int]) -> str:
    total = sum(counts.values()) or 1
    parts = "".join(
        f"<span style='width:{100 * counts[c] / total:.2f}%;"
        f"background:{color('survey_classes', c)}' title='{e(c)}: {counts[c]}'></span>"
        for c in CLASSIFICATIONS
        if counts.get(c)
    )
    return f"<span class='ax-bar'>{parts}</span>"


def _meta(atlas: Atlas) -> str:
    rows = [
        ("map", _map_line(atlas)),
        ("policies", ", ".join(atlas.policies)),
        (
            "built",
            f"{atlas.build.get('created', '')} · {atlas.build.get('probes', 0)} probes, "
            f"{atlas.build.get('from_cache', 0)} from the cache · "
            f"{atlas.build.get('elapsed_s', 0)} s",
        ),
    ]
    if atlas.floatx:
        rows.append(("floatx", atlas.floatx))
    for backend in atlas.backends:
        versions = ", ".join(f"{k} {v}" for k, v in atlas.versions.get(backend, {}).items())
        devices = ", ".join(atlas.devices.get(backend, ()))
        rows.append((backend, f"{versions} · device {devices}"))
    body = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in rows)
    return f"<table class='ax-meta' data-testid='meta'>{body}</table>"


def _map_line(atlas: Atlas) -> str:
    """What the atlas covers, as a true equation: its cells (an op of an atlas of layers and
    ops under one policy: it reads none; a layer on arrays only: the weak Python scalars are
    an op's), each answered on every backend (and mode); how many answered where fewer."""
    planned = atlas.planned_cells()
    runs = f"{len(atlas.backends)} backend{'s' if len(atlas.backends) != 1 else ''}"
    if atlas.modes != ("call",):
        runs += f" x modes {', '.join(atlas.modes)}"
    cells = atlas.build.get("cells", len(atlas.cells))  # a part's: the whole atlas's count
    answered = f" ({cells} answered)" if cells != planned else ""
    return f"{atlas.plan_text()}{answered}, each on {runs}"


def _index_page(
    atlas: Atlas,
    index: list[dict[str, Any]],
    colors: dict[str, str],
    counts: dict[str, dict[str, int]],
) -> str:
    """The index: every target with its cells' classes (``counts``: target -> class ->
    cells, as each part counted), and the whole map's; ``atlas`` gives the header."""
    total: collections.Counter = collections.Counter()
    for found in counts.values():
        total.update(found)
    rows = "".join(
        f"<tr data-target='{e(t['name'])}' data-testid='target-row'>"
        f"<td><a href='{e(t['href'])}'>{e(t['name'])}</a></td><td>{_bar(found)}</td>"
        f"<td class='ax-muted'>{sum(found.values())} cells</td></tr>"
        for t in index
        for found in [counts.get(t["name"], {})]
    )
    overall = " · ".join(f"{e(k)} {total[k]}" for k in sorted(total))
    body = (
        "<h1>The dtype atlas</h1>"
        "<p class='ax-muted'>What every Keras layer and op returns for every input dtype and "
        "policy, on each backend: observed by running Keras, next to what Keras documents and "
        "declares. Choose a target, then a cell, for its cast path.</p>"
        f"{_meta(atlas)}{_legend()}<p data-testid='counts'>{overall}</p>"
        f"<h2>Targets</h2><table class='ax-targets'>{rows}</table>"
    )
    data = {"colors": colors, "versions": atlas.versions}  # the targets: TARGETS_HREF
    return _page("dtype atlas", body, data, base="")


def _target_page(atlas: Atlas, target: str, colors: dict[str, str]) -> str:
    counts = " · ".join(f"{e(k)} {v}" for k, v in atlas.counts(target).items())
    body = (
        f"<h1 data-testid='target'>{e(target)}</h1><p>{counts}</p>{_legend()}"
        "<div class='ax-split'><div>"
        f"{NOSCRIPT}<h2>By cell (every backend)</h2>"
        "<div class='ax-grid-box' data-grid='cells'></div>"
        "<h2>By backend</h2>"
        "<div class='ax-grid-box' data-grid='runs'></div></div>"
        "<div id='ax-detail' class='ax-detail' data-testid='detail'>"
        "<p class='ax-muted'>Click a cell for every backend's answer.</p></div></div>"
        f"<h2>Versions and devices</h2>{_meta(atlas)}"
    )
    data = {
        "colors": colors,
        "versions": atlas.versions,
        "target": target,
        "grid": grid_data(atlas, target),  # drawn by the script (views/_atlas_data.py)
        "data": target_data_href(target),  # its runs, loaded when the page opens
    }
    return _page(f"{target} · dtype atlas", body, data, base="../")


def atlas_diff_html(diff: AtlasDiff) -> str:
    """The upgrade review: what differs in versions and devices, then every changed run,
    grouped by kind of change."""
    backends = sorted({*diff.before["versions"], *diff.after["versions"]})
    rows = []
    for backend in backends:
        old = diff.before["versions"].get(backend, {})
        new = diff.after["versions"].get(backend, {})
        for name in sorted({*old, *new}):
            a, b = old.get(name, "—"), new.get(name, "—")
            mark = " class='ax-diffver'" if a != b else ""
            rows.append(
                f"<tr{mark}><th>{e(backend)}</th><td>{e(name)}</td><td>{e(a)}</td>"
                f"<td>{e(b)}</td></tr>"
            )
        devices = [
            ", ".join(side["devices"].get(backend, [])) for side in (diff.before, diff.after)
        ]
        mark = " class='ax-diffver'" if devices[0] != devices[1] else ""
        rows.append(
            f"<tr{mark}><th>{e(backend)}</th><td>device</td><td>{e(devices[0])}</td>"
            f"<td>{e(devices[1])}</td></tr>"
        )
    versions = (
        "<table class='ax-changes' data-testid='versions'><tr><th>backend</th><th></th>"
        f"<th>before</th><th>after</th></tr>{''.join(rows)}</table>"
    )
    groups = []
    grouped = diff.by_kind()
    for kind in CHANGE_KINDS:
        found = grouped.get(kind)
        if not found:
            continue
        lines = "".join(
            f"<tr data-testid='change' data-kind='{e(kind)}' "
            f"data-target='{e(c.target)}'><td>{e(c.target)}</td><td>{e(c.input_dtype)}</td>"
            f"<td>{e(c.policy)}</td><td>{e(c.run)}</td><td>{e(c.before)} → {e(c.after)}</td>"
            f"<td class='ax-muted'>{e(c.before_class)} → {e(c.after_class)}</td>"
            f"<td class='ax-note'>{e(c.before_path)}<br>{e(c.after_path)}</td></tr>"
            for c in found
        )
        groups.append(
            f"<h2 data-testid='kind-{e(kind)}'>{e(kind)}: {len(found)} "
            f"<span class='ax-muted'>({e(CHANGE_TEXT[kind])})</span></h2>"
            "<table class='ax-changes'><tr><th>target</th><th>input</th><th>policy</th>"
            "<th>run</th><th>outcome</th><th>class</th><th>cast path before / after</th></tr>"
            f"{lines}</table>"
        )
    summary = " · ".join(f"{e(k)} {v}" for k, v in diff.counts().items()) or "no cell changed"
    body = (
        "<h1>Atlas diff</h1>"
        f"<p data-testid='summary'>{len(diff.changes)} changed runs in "
        f"{diff.cells_compared} cells: {summary}</p>"
        f"<p class='ax-muted'>before: {e(diff.before['created'])} "
        f"({e(diff.before['fingerprint'])}) · after: {e(diff.after['created'])} "
        f"({e(diff.after['fingerprint'])})</p>"
        f"{versions}{''.join(groups)}"
    )
    data = {"targets": []}  # the search box filters the rows here
    return _page("dtype atlas diff", body, data, base="", inline=True)

"""mkdocs hook: every example on the site runs when the site is built, and shows what it printed.

A fence whose info string is ``python exec`` is run (in this process; probes run in the pool's
workers, as in a user's script), shown as a plain ``python`` block and followed by its output.
The blocks of one page share one namespace, top to bottom, as a notebook's cells do. A block that
raises fails the build, naming the page and the block.

A gallery page's block ends by setting ``facts`` (the dtypes and verdicts it shows): the build
checks them against ``tests/docs/gallery_facts.json`` and warns (a failure under ``--strict``)
when Keras's answer changed; ``tests/docs/test_gallery.py`` checks the same facts.

A lesson with saved widget state shows its widgets as snapshots: mkdocs-jupyter's loader of a
widget manager from unpkg.com is replaced by the site's own bundle of
``@jupyter-widgets/html-manager`` and an ``anywidget`` loader (``js/src/snapshot/``, built by
``cd js && npm run build`` into ``docs/assets/snapshot/``), which draws every saved view in place
from the page's files. Each one says that it is a snapshot (:data:`SNAPSHOT_NOTE`).

The build uses a fresh, empty result cache (nothing shown comes from an earlier run) and stops
the workers at the end.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = str(Path(__file__).parent)
sys.path.insert(0, HERE)  # exec_blocks

import exec_blocks  # noqa: E402
from mkdocs.exceptions import PluginError  # noqa: E402

#: mkdocs-jupyter's loader of the widget manager from unpkg.com, on a lesson with saved widget
#: state: the site fetches nothing from the network, so its own bundle takes its place.
WIDGET_LOADER = re.compile(
    r"<script>\s*\(function\(\) \{\s*function addWidgetsRenderer\(\).*?</script>", re.DOTALL
)
WIDGET_STATE = '<script type="application/vnd.jupyter.widget-state+json">'
SNAPSHOT = Path("assets") / "snapshot"
#: Shown above each widget the snapshot draws (js/src/snapshot/index.js reads it from the page).
SNAPSHOT_NOTE = (
    "A snapshot of the widget as the lesson left it when this site was built: it responds to "
    "clicks, but nothing is recomputed (no kernel is behind it). Run the notebook to ask Keras."
)
log = logging.getLogger("mkdocs.hooks.examples")
_state: dict[str, Any] = {}


def on_config(config: Any) -> Any:
    if HERE not in sys.path:
        sys.path.insert(0, HERE)  # cli_command, for mkdocs-click (mkdocs drops it after loading)
    # A fresh cache, one worker per backend (2-core CI), the kernel-side Keras on jax.
    _state["cache"] = tempfile.mkdtemp(prefix="dx-docs-cache-")
    atexit.register(shutil.rmtree, _state["cache"], ignore_errors=True)  # a failed build too
    os.environ["DTYPE_EXPLORER_CACHE_DIR"] = _state["cache"]
    os.environ.setdefault("DTYPE_EXPLORER_WORKERS_PER_BACKEND", "1")
    os.environ.setdefault("KERAS_BACKEND", "jax")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    _state["seconds"] = {}
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if "```python exec" not in markdown:
        return markdown
    started = time.monotonic()
    src = page.file.src_uri
    try:
        rendered, namespace = exec_blocks.render(markdown)
    except exec_blocks.BlockError as exc:
        raise PluginError(f"{src}: {exc}") from exc
    if "facts" in namespace:
        _check_facts(src, namespace["facts"])
    _state["seconds"][src] = time.monotonic() - started
    return rendered


def on_files(files: Any, config: Any) -> Any:
    bundle = Path(config["docs_dir"]) / SNAPSHOT / "snapshot.js"
    if not bundle.is_file():
        raise PluginError(f"{bundle} is missing: build it first with `cd js && npm run build`")
    return files


def on_post_page(output: str, page: Any, config: Any) -> str:
    output = WIDGET_LOADER.sub("", output)
    if WIDGET_STATE not in output:
        return output
    up = "../" * page.url.count("/")
    scripts = (
        f'<link rel="stylesheet" href="{up}{SNAPSHOT.as_posix()}/snapshot.css">'
        f'<script data-snapshot-note="{SNAPSHOT_NOTE}" '
        f'src="{up}{SNAPSHOT.as_posix()}/snapshot.js" defer></script>'
    )
    return output.replace("</head>", f"{scripts}</head>", 1)


def _check_facts(src: str, facts: Any) -> None:
    expected = exec_blocks.expected_facts().get(exec_blocks.slug(src))
    if expected is None:
        log.warning(f"{src}: no facts for it in {exec_blocks.FACTS_FILE.name}: {facts!r}")
    elif exec_blocks.jsonable(facts) != expected:
        log.warning(
            f"{src}: Keras's answer changed: the page shows {exec_blocks.jsonable(facts)!r}, "
            f"{exec_blocks.FACTS_FILE.name} says {expected!r} (update the page's text and the "
            "facts together)"
        )


def on_post_build(config: Any) -> None:
    from dtype_explorer import pool

    pool.shutdown()
    seconds = _state.get("seconds", {})
    if seconds:
        ranked = sorted(seconds.items(), key=lambda item: -item[1])
        slowest = ", ".join(f"{src} {s:.1f}s" for src, s in ranked)
        log.info(f"examples ran in {sum(seconds.values()):.1f}s: {slowest}")
    shutil.rmtree(_state["cache"], ignore_errors=True)

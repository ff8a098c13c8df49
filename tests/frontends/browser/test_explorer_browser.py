"""The explorer in a real JupyterLab, driven through Debian's Chromium.

One notebook is opened and run once (module scope); each test then works the controls and
reads what the widget drew. Screenshots land in ``test-artifacts/``; the benchmark writes
``test-artifacts/widget-timing.json``.
"""

from __future__ import annotations

import ast
import json
import os
import statistics
import sys
import time
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.frontends.browser.page_contrast import below_aa

pytestmark = pytest.mark.browser

BACKENDS = ["jax", "torch"]
PROBE_TIMEOUT_MS = 120_000
BENCH_ROUNDS = 10
WARMUP_ROUNDS = 2
#: The widget's own cost (page -> kernel -> page, and drawing) above the probe, per the issue.
GOAL_MS = 150
NOTEBOOK = "explorer.ipynb"
SETUP = f"""\
import sys
import dtype_explorer as dx
print(sys.executable)
explorer = dx.DtypeExplorer("Dense", backends={BACKENDS!r}, use_cache=False)
explorer"""
# The same probe as the benchmark's, timed in Python through the public API.
PYTHON_TIMING = f"""\
import json, time
times = []
for dtype in ["float16", "float32"] * {BENCH_ROUNDS // 2}:
    started = time.perf_counter()
    dx.probe("Dense", dtype, backend="jax", kwargs={{"units": 4}}, shape=[[2, 4]], use_cache=False)
    times.append((time.perf_counter() - started) * 1000)
json.dump(times, open("python-timing.json", "w"))"""
# The widget's answer on the first backend, shown as a notebook shows a ProbeResult: its card.
CARD = f"explorer.wait(timeout=300)[{BACKENDS[0]!r}]"

FIRST_ANSWERS = """() => {
  const root = document.querySelector('[data-testid="explorer"]');
  const cards = root ? root.querySelectorAll('[data-testid^="result-"]').length : 0;
  return cards > 0 && root.dataset.pending === "0";
}"""
SENT = (
    """([before]) => document.querySelector('[data-testid="explorer"]').dataset.sent !== before"""
)
ANSWERED = """() => {
  const root = document.querySelector('[data-testid="explorer"]');
  return root.dataset.requestId === root.dataset.sent && root.dataset.pending === "0";
}"""


def _write_notebook(path: Path, *sources: str) -> None:
    """A notebook of code cells ``sources`` on this Python's kernel, written to ``path``."""
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    nbformat.write(notebook, path)


#: What the page shows of the open notebook's kernel (and any dialog JupyterLab opened).
KERNEL_STATE = """() => {
  const widget = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const context = widget && widget.sessionContext;
  const kernel = context && context.session && context.session.kernel;
  const dialogs = [...document.querySelectorAll(".jp-Dialog")].map(d => d.innerText.trim());
  return {
    app: !!window.jupyterapp,
    widget: widget ? widget.constructor.name : null,
    kernel: context ? context.kernelDisplayName : null,
    connection: kernel ? kernel.connectionStatus : null,
    status: kernel ? kernel.status : null,
    dialogs: dialogs,
  };
}"""
#: True once the open notebook's kernel is started, connected to this page and idle. The
#: status bar's execution indicator is no such sign: it reads "idle" before any kernel exists,
#: and a cell run then makes JupyterLab start one itself, or ask for one in a dialog.
KERNEL_READY = f"""() => {{
  const state = ({KERNEL_STATE})();
  return state.connection === "connected" && state.status === "idle";
}}"""


def _wait_for_kernel(page) -> None:
    """Wait until the notebook's kernel is connected and idle, or fail saying what the page
    shows instead (its kernel's state, and the text of any dialog JupyterLab opened)."""
    try:
        page.wait_for_function(KERNEL_READY, timeout=120_000)
    except PlaywrightTimeout:
        raise AssertionError(
            f"the notebook's kernel was not ready; the page shows {page.evaluate(KERNEL_STATE)}"
        ) from None


def _no_dialog(page, index: int) -> None:
    """Fail with a dialog's own text when JupyterLab opened one over the notebook."""
    dialogs = page.locator(".jp-Dialog")
    if dialogs.count():
        raise AssertionError(
            f"cell {index}: JupyterLab opened a dialog: {page.evaluate(KERNEL_STATE)}"
        )


def _run_cell(page, index: int) -> None:
    """Run a cell with Shift+Enter, once the kernel is connected and idle; again if the
    kernel missed it."""
    _wait_for_kernel(page)
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    prompt = cell.locator(".jp-InputPrompt")
    for _ in range(6):  # a run asked for before the kernel connected is dropped, not queued
        _no_dialog(page, index)
        cell.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        try:
            page.wait_for_function(
                r"el => /\[(\*|\d+)\]/.test(el.textContent)",
                arg=prompt.element_handle(),
                timeout=10_000,
            )
            return
        except PlaywrightTimeout:
            continue
    raise AssertionError(f"cell {index} did not run")


def _change(page, action) -> None:
    """Do ``action`` (a control change) and wait until every backend answered its request."""
    before = page.get_attribute('[data-testid="explorer"]', "data-sent") or ""
    action()
    page.wait_for_function(SENT, arg=[before], timeout=10_000)
    page.wait_for_function(ANSWERED, timeout=PROBE_TIMEOUT_MS)


def _select(page, testid: str, value: str) -> None:
    """Choose ``value`` in a picker, unless it is chosen already."""
    selector = f'[data-testid="{testid}"]'
    if page.input_value(selector) != value:
        _change(page, lambda: page.select_option(selector, value))


def _detail_view(page) -> None:
    """Switch the explorer from its compact comparison to the stacked cards."""
    page.click('[data-testid="view-detail"]')
    page.wait_for_selector('[data-testid="results"] [data-testid^="result-"]', timeout=10_000)


def _card(page, backend: str):
    return page.locator(f'[data-testid="result-{backend}"]')


@pytest.fixture(scope="module")
def explorer(lab, browser, artifacts):
    """The notebook open in JupyterLab with the explorer shown and its first answers in.

    The browser console goes to ``test-artifacts/browser-console.log``; a failure to show the
    explorer leaves ``test-artifacts/explorer-failed-to-show.png``.
    """
    _write_notebook(lab.root / NOTEBOOK, SETUP, PYTHON_TIMING, CARD)
    # Tall enough for the whole explorer to show in element screenshots.
    context = browser.new_context(viewport={"width": 1400, "height": 2400})
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    page.on("pageerror", lambda error: console.append(f"pageerror: {error}"))
    try:
        page.goto(lab.open_url(NOTEBOOK))
        page.wait_for_selector(".jp-Notebook .jp-Cell .jp-InputArea-editor", timeout=60_000)
        _run_cell(page, 0)
        page.wait_for_selector('[data-testid="explorer"]', timeout=PROBE_TIMEOUT_MS)
        page.wait_for_function(FIRST_ANSWERS, timeout=PROBE_TIMEOUT_MS)
    except Exception:
        page.screenshot(path=artifacts / "explorer-failed-to-show.png")
        (artifacts / "browser-console.log").write_text("\n".join(console))
        raise
    outputs = page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-OutputArea").inner_text()
    assert sys.executable in outputs, "the kernel runs this environment's Python"
    page.locator('[data-testid="explorer"]').screenshot(path=artifacts / "explorer-dense-light.png")
    _detail_view(page)  # these tests read the stacked cards (the compact view: test_compare_*)
    yield page
    (artifacts / "browser-console.log").write_text("\n".join(console))
    context.close()


def test_conv1d_on_uint8_floats_on_jax_and_raises_on_torch(explorer, artifacts):
    page = explorer
    _select(page, "target", "Conv1D")
    _select(page, "input-dtype-0", "uint8")

    jax = _card(page, "jax")
    assert jax.get_attribute("data-status") == "ok"
    assert jax.locator('[data-testid="output-dtype"]').inner_text() == "float32"
    path = jax.locator('[data-testid="cast-path"]')
    assert path.locator('.dx-node[data-stage="input"]').get_attribute("data-dtype") == "uint8"
    assert path.locator('.dx-node[data-stage="autocast"]').get_attribute("data-dtype") == "uint8"
    assert path.locator('.dx-node[data-stage="output"]').get_attribute("data-dtype") == "float32"
    notes = path.locator(".dx-edge").evaluate_all("edges => edges.map(e => e.dataset.note)")
    assert any(note.startswith("uint8 kept: not a float") for note in notes)

    torch = _card(page, "torch")
    assert torch.get_attribute("data-status") == "error"
    error_type = torch.locator('[data-testid="error-type"]').inner_text()
    assert error_type and torch.locator('[data-testid="error-message"]').inner_text().strip()
    raised = torch.locator('[data-testid="cast-path"] .dx-node[data-stage="raised"]')
    assert raised.get_attribute("data-dtype") == error_type

    assert page.locator('[data-testid="compare-jax"]').get_attribute("data-outcome") == "float32"
    outcome = page.locator('[data-testid="compare-torch"]').get_attribute("data-outcome")
    assert outcome == f"raises {error_type}"  # ProbeResult.outcome, computed in Python
    banner = page.locator('[data-testid="divergence"]')
    assert "jax → float32" in banner.inner_text()
    decided = page.locator('[data-testid="promotion-decided"]').first
    decided.wait_for(timeout=PROBE_TIMEOUT_MS)
    assert decided.inner_text() == jax.locator('[data-testid="documented-dtype"]').inner_text()
    page.locator('[data-testid="explorer"]').screenshot(
        path=artifacts / "explorer-conv1d-uint8.png"
    )


def test_the_keras_picker_offers_the_installed_keras_beside_the_mode_picker(explorer):
    from dtype_explorer.versions import library_version

    page = explorer
    installed = f"installed Keras {library_version('keras')}"
    picker = page.locator('[data-testid="engine"]')
    options = picker.locator("option")
    assert options.first.inner_text() == installed and options.first.get_attribute("value") == ""
    assert page.input_value('[data-testid="engine"]') == ""
    assert 'dx.engines.create("keras==3.11.3")' in picker.get_attribute("title")
    # beside the mode picker (and the matmul precision's), in the same row of the control panel
    fields = page.locator(".dx-controls > .dx-field").evaluate_all(
        "fields => fields.map(f => f.querySelector('[data-testid]')?.dataset.testid)"
    )
    assert 0 < fields.index("engine") - fields.index("mode") <= 3, fields  # quantize between
    mode_box = page.locator('[data-testid="mode"]').bounding_box()
    engine_box = picker.bounding_box()
    assert abs(mode_box["y"] - engine_box["y"]) < 2 and engine_box["x"] > mode_box["x"]
    label = _card(page, "jax").locator('[data-testid="keras-version"]')
    assert label.inner_text() == f"Keras {library_version('keras')}"


def test_the_call_box_opens_the_op_trace_and_marks_where_backends_part(explorer, artifacts):
    """Conv1D on uint8: the traces of jax (promotes) and torch (raises) part at the convolution;
    the call box opens each card's op list, every step linked to its line in Keras."""
    page = explorer
    _select(page, "target", "Conv1D")
    _select(page, "input-dtype-0", "uint8")

    banner = page.locator('[data-testid="trace-divergence"]')
    banner.wait_for(timeout=PROBE_TIMEOUT_MS)
    assert "conv" in banner.inner_text()  # the op where jax's and torch's traces part
    jax = _card(page, "jax")
    trace = jax.locator('[data-testid="trace"]')
    assert trace.get_attribute("open") is not None  # opened where the traces part
    jax.locator('[data-testid="call-box"]').click()  # the call box closes ...
    assert trace.get_attribute("open") is None
    jax.locator('[data-testid="call-box"]').click()  # ... and opens the trace
    assert trace.get_attribute("open") is not None
    steps = trace.locator('[data-testid="trace-step"]')
    assert steps.count() >= 2
    ops = steps.evaluate_all("items => items.map(i => i.dataset.op)")
    assert any("conv" in op for op in ops), ops
    parted = steps.filter(has=page.locator('[data-testid="trace-part"]'))
    assert parted.count() == 1 and "conv" in parted.get_attribute("data-op")
    link = trace.locator('a[data-testid="trace-source"]').first
    href = link.get_attribute("href")
    assert href.startswith("https://github.com/keras-team/keras/blob/v"), href
    assert "/keras/src/" in href and "#L" in href
    assert _card(page, "torch").locator('[data-testid="trace-part"]').count() == 1
    jax.screenshot(path=artifacts / "explorer-trace-conv1d-uint8.png")


def test_policy_change_redraws_the_cast_path(explorer, artifacts):
    page = explorer
    _select(page, "target", "Conv1D")
    _select(page, "input-dtype-0", "uint8")
    _change(page, lambda: page.fill('[data-testid="policy"]', "mixed_float16"))

    jax = _card(page, "jax")
    assert jax.get_attribute("data-status") == "ok"
    observed = jax.locator('[data-testid="output-dtype"]').inner_text()
    assert observed == jax.locator(
        '[data-testid="cast-path"] .dx-node[data-stage="output"]'
    ).get_attribute("data-dtype")
    read = jax.locator('[data-testid="cast-path"] .dx-node[data-stage="read in call"]')
    assert set(read.evaluate_all("nodes => nodes.map(n => n.dataset.dtype)")) == {"float16"}
    changed = jax.locator('[data-testid="cast-path"] .dx-edge.dx-changed')
    assert any(
        "read as float16" in n
        for n in changed.evaluate_all("edges => edges.map(e => e.dataset.note)")
    )
    assert _card(page, "torch").get_attribute("data-status") == "error"
    page.locator('[data-testid="explorer"]').screenshot(
        path=artifacts / "explorer-conv1d-mixed-float16.png"
    )
    _change(page, lambda: page.fill('[data-testid="policy"]', "float32"))


def test_invalid_kwargs_show_a_clear_message(explorer, artifacts):
    page = explorer
    kwargs = page.locator('[data-testid="kwargs"]')
    _change(page, lambda: kwargs.fill(json.dumps({"filters": 2, "kernel_size": 2, "bogus": 1})))
    for backend in BACKENDS:
        card = _card(page, backend)
        assert card.get_attribute("data-status") in ("invalid", "error")
        assert "bogus" in card.locator('[data-testid="error-message"]').inner_text()
    page.locator('[data-testid="explorer"]').screenshot(
        path=artifacts / "explorer-keras-rejects-kwarg.png"
    )

    kwargs.fill('{"filters": 2,')
    assert "not JSON yet" in page.locator('[data-testid="kwargs-hint"]').inner_text()
    kwargs.press("Tab")  # leaving the field hands the text to Python, which refuses it
    error = page.locator('[data-testid="error"]')
    error.wait_for(timeout=30_000)
    assert "kwargs is not valid JSON" in error.inner_text()
    assert page.locator('[data-testid^="result-"]').count() == 0
    page.locator('[data-testid="explorer"]').screenshot(
        path=artifacts / "explorer-invalid-kwargs.png"
    )
    _change(page, lambda: page.click('[data-testid="kwargs-reset"]'))
    assert page.locator('[data-testid="error"]').count() == 0


def _theme(page, name: str, light: bool) -> None:
    """Choose JupyterLab's theme ``name`` in its Settings menu; wait until the explorer drew it."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
    page.locator(".lm-Menu-itemLabel", has_text="Theme").first.hover()
    page.locator(".lm-Menu-itemLabel").get_by_text(name, exact=True).click()
    flag = "true" if light else "false"
    page.wait_for_selector(f"body[data-jp-theme-light='{flag}']", state="attached", timeout=30_000)


THEMED = """([root, theme]) => {
  if (root.dataset.theme !== theme) return false;
  const bg = getComputedStyle(root).backgroundColor.match(/[\\d.]+/g).slice(0, 3).map(Number);
  return (bg.reduce((a, b) => a + b, 0) / 3 < 128) === (theme === "dark");
}"""


def test_light_and_dark_themes_keep_every_text_at_aa_contrast(explorer, artifacts):
    """JupyterLab Light, then Dark: the explorer (its controls and stacked cards) and a probe's
    notebook card follow the theme, and every text in them reads at WCAG AA (4.5:1) against
    the colour behind it, as measured in the page."""
    page = explorer
    _run_cell(page, 2)
    card = page.locator(".jp-Notebook .jp-Cell").nth(2).locator(".dx-card")
    card.wait_for(timeout=PROBE_TIMEOUT_MS)
    root = page.locator('[data-testid="explorer"]')
    backgrounds, failing = {}, []
    try:
        for name, theme in (("JupyterLab Light", "light"), ("JupyterLab Dark", "dark")):
            if root.get_attribute("data-theme") != theme:
                _theme(page, name, light=theme == "light")
            page.wait_for_function(THEMED, arg=[root.element_handle(), theme], timeout=30_000)
            root.screenshot(path=artifacts / f"explorer-theme-{theme}.png")
            card.screenshot(path=artifacts / f"card-theme-{theme}.png")
            for what, locator, least in (("explorer", root, 40), ("card", card, 10)):
                low, measured = below_aa(locator)
                assert measured >= least, (theme, what, measured)  # the texts were found
                failing += [f"{theme} {what}: {t['what']} {t['text']!r} {t['ratio']}" for t in low]
            backgrounds[theme] = card.evaluate("el => getComputedStyle(el).backgroundColor")
        assert not failing, "\n".join(failing)
        assert backgrounds["light"] != backgrounds["dark"]  # the card followed the theme too
    finally:
        if root.get_attribute("data-theme") != "light":  # the later tests' screenshots: light
            _theme(page, "JupyterLab Light", light=True)


def test_benchmark_control_change_to_rendered_result(explorer, lab, artifacts):
    """Warm: time from a control change to Dense's rendered answer on jax, against the probe.

    ``page_ms``: the change until the answer is drawn (after the next paint). ``ack_ms``: the
    change until the page drew the kernel's pending state (messaging only, no probe).
    ``widget_round_trip_ms``: the kernel's submit-to-answer time for the same request.
    ``python_probe_ms``: the same probe through ``dx.probe`` in the kernel.
    """
    page = explorer
    _select(page, "target", "Dense")
    if page.is_checked('[data-testid="backend-torch"]'):
        _change(page, lambda: page.uncheck('[data-testid="backend-torch"]'))
    _select(page, "input-dtype-0", "float32")
    load_before = os.getloadavg()
    rounds = []
    for i in range(WARMUP_ROUNDS + BENCH_ROUNDS):
        dtype = "float16" if i % 2 == 0 else "float32"
        _change(
            page, lambda dtype=dtype: page.select_option('[data-testid="input-dtype-0"]', dtype)
        )
        page.wait_for_function(
            "() => document.querySelector('[data-testid=\"result-jax\"]')?.dataset.latencyMs",
            timeout=10_000,
        )
        card = _card(page, "jax")
        assert card.get_attribute("data-status") == "ok"
        drawn_input = card.locator('[data-testid="cast-path"] .dx-node[data-stage="input"]')
        assert drawn_input.get_attribute("data-dtype") == dtype  # this round's answer is drawn
        rounds.append(
            {
                "input_dtype": dtype,
                "page_ms": float(card.get_attribute("data-latency-ms")),
                "ack_ms": float(page.get_attribute('[data-testid="explorer"]', "data-ack-ms")),
                "widget_round_trip_ms": float(card.get_attribute("data-round-trip-ms")),
                "probe_total_ms": float(card.get_attribute("data-probe-ms")),
            }
        )
    rounds = rounds[WARMUP_ROUNDS:]
    timing_file = lab.root / "python-timing.json"
    _run_cell(page, 1)
    deadline = time.monotonic() + PROBE_TIMEOUT_MS / 1000
    while not timing_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    python_ms = json.loads(timing_file.read_text())

    def median(values) -> float:
        return round(statistics.median(values), 1)

    summary = {
        "what": "Dense(units=4), input float32 <-> float16, policy float32, jax worker, no cache, "
        f"warm; medians of {BENCH_ROUNDS} rounds after {WARMUP_ROUNDS} warm-up rounds",
        "page_ms": median(r["page_ms"] for r in rounds),
        "ack_ms": median(r["ack_ms"] for r in rounds),
        "widget_round_trip_ms": median(r["widget_round_trip_ms"] for r in rounds),
        "probe_total_ms": median(r["probe_total_ms"] for r in rounds),
        "python_probe_ms": median(python_ms),
        "overhead_ms": median(r["page_ms"] - r["widget_round_trip_ms"] for r in rounds),
        "goal_ms": GOAL_MS,
        "load_average_1min": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "cpus": os.cpu_count(),
        "raw": {"rounds": rounds, "python_probe_ms": python_ms},
    }
    summary["overhead_vs_python_probe_ms"] = round(
        summary["page_ms"] - summary["python_probe_ms"], 1
    )
    summary["goal_met"] = summary["overhead_ms"] <= GOAL_MS
    (artifacts / "widget-timing.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "raw"}, indent=1))


def test_notebook7_shows_the_explorer(explorer, lab, browser, artifacts):
    """The same notebook in Notebook 7's UI (its kernel session is reused)."""
    context = browser.new_context(viewport={"width": 1400, "height": 2400})
    page = context.new_page()
    try:
        page.goto(f"{lab.url}/notebooks/{NOTEBOOK}?token={lab.token}")
        _run_cell(page, 0)
        page.wait_for_function(FIRST_ANSWERS, timeout=PROBE_TIMEOUT_MS)
        _detail_view(page)
        for backend in BACKENDS:
            card = _card(page, backend)
            assert card.get_attribute("data-status") == "ok"
            assert card.locator('[data-testid="output-dtype"]').inner_text() == "float32"
        page.locator('[data-testid="explorer"]').screenshot(
            path=artifacts / "explorer-notebook7.png"
        )
    finally:
        context.close()


# ------------------------------------------------------------- the compact comparison

COMPARE_NOTEBOOK = "compare.ipynb"
FOUR = ["jax", "numpy", "tensorflow", "torch"]
COMPARE_SETUP = f"""\
import dtype_explorer as dx
explorer = dx.DtypeExplorer("Dense", input_dtype="float64", policy="mixed_float16",
                            backends={FOUR!r})
explorer"""
#: One screen: a 1,400 x 1,000 px window.
SCREEN = {"width": 1400, "height": 1000}


@pytest.fixture(scope="module")
def compare_page(lab, browser, artifacts):
    """A notebook showing the explorer for Dense on four backends, in a 1,400 x 1,000 window."""
    _write_notebook(lab.root / COMPARE_NOTEBOOK, COMPARE_SETUP)
    context = browser.new_context(viewport=SCREEN)
    page = context.new_page()
    try:
        # a workspace of its own: the explorer's notebook (and its tab) stays out of this page
        page.goto(lab.open_url(COMPARE_NOTEBOOK, workspace="compare"))
        page.wait_for_selector(".jp-Notebook .jp-Cell .jp-InputArea-editor", timeout=60_000)
        tabs = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tabLabel").all_inner_texts()
        assert tabs == [COMPARE_NOTEBOOK], tabs
        _run_cell(page, 0)
        page.wait_for_selector('[data-testid="compact"]', timeout=PROBE_TIMEOUT_MS)
        page.wait_for_function(ANSWERED_ALL, timeout=PROBE_TIMEOUT_MS * 2)
    except Exception:
        page.screenshot(path=artifacts / "compare-failed-to-show.png")
        raise
    yield page
    context.close()


ANSWERED_ALL = """() => {
  const root = document.querySelector('[data-testid="explorer"]');
  return root && root.dataset.pending === "0" && !!root.querySelector('[data-testid="compact"]');
}"""


def test_compact_view_puts_four_backends_side_by_side_in_one_screen(compare_page, artifacts):
    page = compare_page
    explorer = page.locator('[data-testid="explorer"]')
    page.evaluate("() => document.querySelector('[data-testid=\"explorer\"]').scrollIntoView()")
    page.screenshot(path=artifacts / "compare-four-backends-one-screen.png")
    heads = [page.locator(f'[data-testid="column-{b}"]').bounding_box() for b in FOUR]
    assert all(heads), "a column per backend"
    assert len({round(box["y"]) for box in heads}) == 1, heads  # side by side, not stacked
    assert len({round(box["x"]) for box in heads}) == len(FOUR), heads
    top = explorer.bounding_box()["y"]
    grid = page.locator('[data-testid="compact"]').bounding_box()
    # from the explorer's top (its controls) to the comparison's last row: one screen
    assert grid["y"] + grid["height"] - top <= SCREEN["height"], (top, grid)
    assert grid["x"] + grid["width"] <= SCREEN["width"]
    differing = page.locator('[data-same="false"]').count()
    folded = page.locator('[data-testid="same-on-all"]')
    assert folded.is_visible() and "same on all" in folded.inner_text()
    explorer.screenshot(path=artifacts / "compare-four-backends.png")
    # the cast path opens in place, at its one scale
    page.click('[data-testid="toggle-jax"]')
    svg = page.locator('[data-testid="detail-jax"] [data-testid="cast-path"]')
    width = svg.bounding_box()["width"]
    assert abs(width - float(svg.get_attribute("width"))) < 1.5, width
    page.click('[data-testid="toggle-jax"]')
    # Dense on float64 under mixed_float16: the conversion differs (jax, numpy take float32)
    assert differing >= 1


def test_fit_draws_the_training_step_and_numpy_says_it_cannot_train(compare_page, artifacts):
    page = compare_page
    _select(page, "mode", "fit")
    numpy = page.locator('[data-testid="column-numpy"]')
    assert numpy.get_attribute("data-status") == "unsupported"
    assert page.inner_text('[data-testid="headline-numpy"]').startswith("not supported here:")
    for backend in ("jax", "tensorflow", "torch"):
        assert page.get_attribute(f'[data-testid="column-{backend}"]', "data-status") == "ok"
    assert page.locator('[data-testid^="row-fit:"]').count() >= 4  # loss ... warnings
    page.click('[data-testid="toggle-torch"]')
    fit = page.locator('[data-testid="detail-torch"] [data-testid="fit"]')
    # waited for: is_visible() reads the page at once, and on a loaded machine read it before
    # the detail was drawn (the run of 2026-12-06 04:42); the limit only stops a hang
    fit.wait_for(state="visible", timeout=PROBE_TIMEOUT_MS)
    assert page.inner_text('[data-testid="detail-torch"] [data-testid="fit-optimizer"]')
    assert fit.locator('[data-testid^="gradient-"]').count() >= 2  # kernel and bias
    fit.scroll_into_view_if_needed()
    page.screenshot(path=artifacts / "compare-fit-training-step.png")
    page.click('[data-testid="toggle-torch"]')


def test_dataset_mode_on_jax_is_not_supported_as_fit_on_numpy_is(compare_page, artifacts):
    page = compare_page
    _select(page, "mode", "dataset")
    said = page.inner_text('[data-testid="headline-jax"]')
    assert said.startswith("not supported here: dataset mode runs the target inside tf.data"), said
    assert "_modes.py" not in said
    assert page.get_attribute('[data-testid="column-jax"]', "data-status") == "unsupported"
    assert page.get_attribute('[data-testid="column-tensorflow"]', "data-status") == "ok"
    assert page.locator('[data-testid="divergence"]').count() == 0
    page.screenshot(path=artifacts / "compare-dataset-mode.png")


MODEL_NOTEBOOK = "model_view.ipynb"
MODEL_SETUP = """\
import keras, numpy as np
import dtype_explorer as dx
keras.config.set_dtype_policy("mixed_float16")
try:
    x = keras.Input((4,), name="x")
    shared = keras.layers.Dense(4, name="shared")
    h = shared(keras.layers.Dense(4, name="pre")(shared(x)))
    head = keras.layers.Dense(2, name="head", dtype="float32")(h)
    model = keras.Model(x, head, name="m")
finally:
    keras.config.set_dtype_policy("float32")
report = dx.check_model(model, np.ones((2, 4), "float32"))
raw = {layer.name: layer.compute_dtype for layer in model.layers[1:]}
dx.DtypeExplorer(audit=report)"""


def test_the_model_view_draws_the_audits_graph_and_a_click_selects_the_row(lab, browser, artifacts):
    """Issue 41 item 6, in JupyterLab: the audit's layers as nodes filled by their compute
    dtype (as raw Keras reports it, printed by the kernel beside), a shared layer once, edges
    labelled with dtypes, and a click on a node selecting its rows in the table."""
    _write_notebook(lab.root / MODEL_NOTEBOOK, MODEL_SETUP, "raw")
    context = browser.new_context(viewport=SCREEN)
    page = context.new_page()
    try:
        page.goto(lab.open_url(MODEL_NOTEBOOK, workspace="model"))
        page.wait_for_selector(".jp-Notebook .jp-Cell .jp-InputArea-editor", timeout=60_000)
        _run_cell(page, 0)
        page.wait_for_selector('[data-testid="graph-node"]', timeout=PROBE_TIMEOUT_MS)
        _run_cell(page, 1)
        out = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-OutputArea")
        out.locator("text=shared").wait_for(timeout=60_000)
        raw = ast.literal_eval(out.inner_text().split("]:", 1)[-1].strip())  # the kernel's dict
        nodes = page.locator('[data-testid="graph-node"]')
        paths = nodes.evaluate_all("ns => ns.map(n => n.getAttribute('data-path'))")
        assert sorted(paths) == sorted(["m/x", *(f"m/{name}" for name in raw)])  # shared once
        for name, dtype in raw.items():
            assert page.get_attribute(f'[data-path="m/{name}"]', "data-dtype") == dtype
        dtypes = page.locator('[data-testid="graph-edge"]').evaluate_all(
            "es => es.map(e => e.getAttribute('data-dtype'))"
        )
        assert "float16" in dtypes and len(dtypes) >= 4
        page.click('[data-testid="graph-node"][data-path="m/shared"]')
        selected = page.locator('[data-testid="model-row"].dx-row-selected')
        assert selected.count() == 2  # a row per call of the shared layer
        assert {r.get_attribute("data-path") for r in selected.all()} == {"m/shared"}
        page.locator('[data-testid="model-view"]').screenshot(path=artifacts / "model-view.png")
    finally:
        context.close()

"""The dtype explorer in a marimo notebook: `marimo edit notebooks/explorer_marimo.py`.

marimo shows anywidgets natively: `mo.ui.anywidget(dx.DtypeExplorer(...))`. Every control is
inside the widget, and what it answers is in its traits (`explorer.widget.results`: the
`ProbeResult` dicts by backend; `explorer.widget.wait()` waits for them), so another cell can
read it.
"""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")


@app.cell
def _():
    import marimo as mo

    import dtype_explorer as dx

    return dx, mo


@app.cell
def _(mo):
    mo.md("""
    # What dtype does this Keras layer really produce?

    Pick a layer, its input dtypes and a dtype policy: each backend answers with what Keras
    documents, what its symbolic spec declares and what the call really returns, and the
    cast path in between. The probes run in worker processes, one per backend, with the
    Keras installed here.
    """)
    return


@app.cell
def _(dx, mo):
    # Every installed backend ($DTYPE_EXPLORER_BACKENDS narrows them: the test runs numpy only).
    explorer = mo.ui.anywidget(dx.DtypeExplorer("Dense", input_dtype="uint8", policy="mixed_float16"))
    explorer
    return (explorer,)


@app.cell
def _(explorer, mo):
    # The widget's state is its traits. This cell reruns when a control sends a new request
    # (the element's value), and waits for every backend's answer to it.
    answers = explorer.widget.wait(timeout=600)
    mo.md(
        "\n".join(
            f"- **{backend}**: `{result.spec.target}` on {', '.join(result.spec.input_dtypes)} "
            f"under `{result.spec.policy}` returns `{result.outcome}` ({result.shown_verdict})"
            for backend, result in answers.items()
        )
    )
    return


if __name__ == "__main__":
    app.run()

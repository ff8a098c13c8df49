""" "Copy as code" laid out: a question's ``CodeCopy`` (the ``dx`` call and the raw-Keras
script, computed on the record by ``as_code()``) as text, and as a ``<details>`` in the HTML
cards of a probe, a probe set and an audit.

>>> from dtype_explorer.records import CodeCopy
>>> html = code_html(CodeCopy(dx="result = dx.probe('Dense')", script="print(1)"))
>>> html.startswith("<details class='dx-code'><summary>Copy as code")
True
"""

from __future__ import annotations

from dtype_explorer.records import CodeCopy
from dtype_explorer.views._markup import e


def code_text(code: CodeCopy) -> str:
    """Both pieces of code, each under a comment naming it; what to fill in first."""
    fill = [f"# fill in first: {what}" for what in code.fill_in]
    return "\n".join([*fill, code.clipboard])


def code_html(code: CodeCopy) -> str:
    """A closed ``<details>``: the ``dx`` call and the raw script, each in a ``<pre>``, with
    what to fill in first."""
    fill = "".join(f"<li><code>{e(what)}</code></li>" for what in code.fill_in)
    fill = f"<div class='dx-meta'>Fill in first:</div><ul>{fill}</ul>" if fill else ""
    return (
        "<details class='dx-code'><summary>Copy as code: the dx call and a raw-Keras script"
        f"</summary>{fill}<div class='dx-meta'>dtype-explorer (asks it again):</div>"
        f"<pre class='dx-code-dx'>{e(code.dx)}</pre><div class='dx-meta'>raw Keras, for a bug "
        "report (<code>python repro.py</code>):</div>"
        f"<pre class='dx-code-script'>{e(code.script)}</pre></details>"
    )

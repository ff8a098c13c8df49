"""Write ``js/src/contract-types.js``: JSDoc typedefs of the widget's contract
(``dtype_explorer/frontends/widget_contract.json``), so the page's modules (``// @ts-check``)
and IDEs know the request the page sends and the state it reads, from the one contract.

Run from the repository root after changing the contract (``tests/frontends/test_contract.py``
fails while the file is out of date)::

    python tools/contract_typedefs.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = ROOT / "dtype_explorer" / "frontends" / "widget_contract.json"
OUT = ROOT / "js" / "src" / "contract-types.js"
#: A contract type as JSDoc writes it.
JSDOC = {
    "object": "Object<string, *>",
    "array": "Array<*>",
    "string": "string",
    "integer": "number",
    "null": "null",
}


def jsdoc_type(spec: dict) -> str:
    """The JSDoc type of a contract entry: ``{"type": "array", "items": "string"}`` is
    ``string[]``, ``{"type": ["string", "null"]}`` is ``string | null``.

    >>> jsdoc_type({"type": "array", "items": "string"}), jsdoc_type({"type": ["string", "null"]})
    ('string[]', 'string | null')
    """
    kinds = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
    unknown = [k for k in kinds if k not in JSDOC]
    if unknown:
        raise ValueError(f"unknown contract type(s) {unknown}; valid: {', '.join(JSDOC)}")
    if "items" in spec:
        return " | ".join(f"{JSDOC[spec['items']]}[]" if k == "array" else JSDOC[k] for k in kinds)
    return " | ".join(JSDOC[k] for k in kinds)


def _typedef(name: str, about: str, entries: dict[str, dict], types: dict[str, str]) -> list[str]:
    lines = ["/**", f" * {about}", f" * @typedef {{object}} {name}"]
    for key, spec in entries.items():
        doc = " ".join(spec["doc"].split()).replace("*/", "* /")
        lines.append(f" * @property {{{types.get(key) or jsdoc_type(spec)}}} {key} {doc}")
    lines.append(" */")
    return lines


def typedefs(contract: dict) -> str:
    """The text of ``contract-types.js`` for ``contract``."""
    head = [
        "// @ts-check",
        "// Generated from dtype_explorer/frontends/widget_contract.json by",
        "// tools/contract_typedefs.py: do not edit (tests/frontends/test_contract.py checks it).",
        "",
    ]
    request = _typedef(
        "WidgetRequest",
        "What the page sends in the `request` trait (the kernel refuses any other key).",
        contract["request"],
        {},
    )
    state = _typedef(
        "WidgetState",
        "Every synced trait of the widget, as the page reads them.",
        contract["traits"],
        {"request": "WidgetRequest"},
    )
    return "\n".join([*head, *request, "", *state, "", "export {};", ""])


def main() -> None:
    text = typedefs(json.loads(CONTRACT.read_text(encoding="utf-8")))
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()

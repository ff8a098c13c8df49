"""docs/architecture.md, the map of the code, names only places that exist: every dotted
``dtype_explorer....`` name (or ``keras_run.x``, ``runtime.pool.y``: a package's name first)
resolves to a module or an attribute, and every path it names (``keras_run/trace/``,
``runtime/engines.py``, ``keras_run/_numerics.reference_dtype``) is a file or folder of the
repository, the package or the tests."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAP = ROOT / "docs" / "architecture.md"
PACKAGES = ("records", "keras_run", "runtime", "analyses", "views", "frontends")


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def dotted_names(text: str) -> list[str]:
    """The dotted names of the package the map mentions (``keras_run.make_spec`` read as
    ``dtype_explorer.keras_run.make_spec``)."""
    names = set(re.findall(r"\bdtype_explorer(?:\.\w+)+", text))
    for code in _spans(text):
        head = code.split("(")[0]
        if re.fullmatch(rf"(?:{'|'.join(PACKAGES)})(?:\.\w+)+", head):
            names.add(f"dtype_explorer.{head}")
    return sorted(names)


def _spans(text: str) -> list[str]:
    """The code spans of ``text``, outside its fenced blocks (the package tree)."""
    return re.findall(r"`([^`]+)`", re.sub(r"```.*?```", "", text, flags=re.S))


def paths(text: str) -> list[str]:
    """The paths the map names in code spans (the first word of a command)."""
    found = set()
    for code in _spans(text):
        word = code.split()[0] if code.split() else ""
        if word.strip("/") and "/" in word and not word.startswith(("http", "<", "/")):
            found.add(word.removeprefix("./"))
    return sorted(found)


def _exists(path: str) -> bool:
    for base in (ROOT, ROOT / "dtype_explorer", ROOT / "tests"):
        if any(base.glob(path.rstrip("/"))):
            return True
        stem, dot, attribute = path.rpartition(".")
        if dot and "/" not in attribute and (base / f"{stem}.py").is_file():
            module = ".".join((base / stem).relative_to(ROOT).parts)
            return _resolves(f"{module}.{attribute}")
    return False


def test_every_dotted_name_on_the_map_resolves():
    names = dotted_names(MAP.read_text(encoding="utf-8"))
    assert len(names) >= 5
    assert [n for n in names if not _resolves(n)] == []


def test_every_path_on_the_map_exists():
    named = paths(MAP.read_text(encoding="utf-8"))
    assert len(named) >= 40
    assert [p for p in named if not _exists(p)] == []


def test_the_map_check_fails_on_a_place_that_does_not_exist():
    text = "`keras_run/_gone.py`, `keras_run/trace/` and `dtype_explorer.keras_run.no_such_name`"
    assert [n for n in dotted_names(text) if not _resolves(n)] == [
        "dtype_explorer.keras_run.no_such_name"
    ]
    assert [p for p in paths(text) if not _exists(p)] == ["keras_run/_gone.py"]

"""The shape of the package, checked rather than only stated (docs/architecture.md draws it).

* import-linter's contracts (``.importlinter``): the roles are layered, views import no engine,
  runtime or analysis, private modules stay in their package, no import cycles;
* imports of the package's own modules happen at module level only, so the graph the tools
  read is the real one; a function may import only a framework that must stay out of
  ``import dtype_explorer`` (Keras, its backends, pandas, plotly);
* ``import dtype_explorer`` and its public names import no framework at all;
* only the engine (``keras_run``) imports Keras's internals (``keras.src``), and the worker's
  one device query.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dtype_explorer"
#: The only things a function may import: frameworks kept out of ``import dtype_explorer``.
LATE_IMPORTS = (
    "keras",
    "tf_keras",
    "tensorflow",
    "jax",
    "torch",
    "pandas",
    "plotly",
    "distributed",
    "pyarrow",
    "duckdb",
    "jupyter_client",  # the Keras 2 kernel's registry and start (optional: runtime/_kernel2)
    "ipykernel",
)
#: What ``import dtype_explorer`` must not import: the late imports, and IPython (the magic's).
FRAMEWORKS = (*LATE_IMPORTS, "IPython")
#: The package that runs Keras: the only one that imports its internals.
ENGINE = PACKAGE / "keras_run"
#: Imports of ``keras.src`` allowed outside the engine, by file and module: the worker asks
#: torch's Keras which device it computes on.
KERAS_SRC_ALLOWED = {("runtime/_worker.py", "keras.src.backend.torch.core")}


def test_import_contracts_are_kept():
    linter = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(linter)],
        cwd=ROOT,  # lint-imports reads .importlinter there
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def _late_imports(path: Path) -> list[tuple[int, str]]:
    """Imports inside functions (``TYPE_CHECKING`` blocks are not imports)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.Import):
                found += [(inner.lineno, alias.name) for alias in inner.names]
            elif isinstance(inner, ast.ImportFrom):
                found.append((inner.lineno, "." * inner.level + (inner.module or "")))
    return found


def test_functions_import_only_frameworks_kept_out_of_the_package_import():
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, name in _late_imports(path)
        if name.split(".")[0] not in LATE_IMPORTS
    ]
    assert not wrong, "\n".join(wrong)


def _keras_src_imports(path: Path) -> list[tuple[int, str]]:
    """Every import of ``keras.src`` (or below) in ``path``, at any level."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            names = names[:1] if node.module.startswith("keras.src") else names
        else:
            continue
        found += [(node.lineno, n) for n in names if n == "keras.src" or n.startswith("keras.src.")]
    return found


def test_only_the_engine_imports_keras_internals():
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if ENGINE not in path.parents
        for line, name in _keras_src_imports(path)
        if (path.relative_to(PACKAGE).as_posix(), name) not in KERAS_SRC_ALLOWED
    ]
    assert not wrong, "\n".join(wrong)


def test_the_keras_internals_checker_sees_every_form(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import keras.src.ops\nfrom keras.src.layers import Layer\nfrom keras import src\n"
        "import keras\nfrom keras import layers\n"
        "def f():\n    from keras.src.models.functional import Functional\n"
    )
    assert _keras_src_imports(sample) == [
        (1, "keras.src.ops"),
        (2, "keras.src.layers"),
        (3, "keras.src"),
        (7, "keras.src.models.functional"),
    ]


def test_the_checker_sees_a_function_level_import(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from dtype_explorer import records\n    import keras\n")
    assert _late_imports(sample) == [(2, "dtype_explorer"), (3, "keras")]


def test_importing_the_package_and_its_public_names_imports_no_framework():
    names = ["probe", "survey", "promotion_table", "check_model", "ProbeResult", "Survey"]
    names += ["AuditReport", "cache", "catalog", "pool", "shutdown", "InvalidSpecError"]
    code = (
        "import sys, json, dtype_explorer as dx\n"
        f"for name in {names!r}: getattr(dx, name)\n"
        "import dtype_explorer.views, dtype_explorer.frontends.cli\n"
        f"print(json.dumps([m for m in {FRAMEWORKS!r} if m in sys.modules]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


# -- package faces: the lazy table, the TYPE_CHECKING imports and __all__ agree ---------------


def _dotted(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _faces() -> list[Path]:
    """Every package ``__init__`` with a lazy table (``_EXPORTS``)."""
    return [p for p in sorted(PACKAGE.rglob("__init__.py")) if "_EXPORTS" in p.read_text()]


def face_disagreements(init: Path) -> list[str]:
    """Where a package's ``TYPE_CHECKING`` imports differ from its ``_EXPORTS`` table (read as
    ``dtype_explorer.lazy`` reads it: ``module``, ``module:attribute``, or a module exported
    as itself): each name is imported under TYPE_CHECKING from where the table says it lives."""
    tree = ast.parse(init.read_text(encoding="utf-8"))
    table: dict[str, str] = {}
    imported: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "_EXPORTS":
            table = ast.literal_eval(node.value)
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom):
                    for alias in inner.names:
                        imported[alias.asname or alias.name] = f"{inner.module}.{alias.name}"
    expected = {}
    for name, where in table.items():
        module, _, attribute = where.partition(":")
        exported_as_module = not attribute and module.rsplit(".", 1)[-1] == name
        expected[name] = module if exported_as_module else f"{module}.{attribute or name}"
    return [
        f"{name}: _EXPORTS {expected.get(name)}, TYPE_CHECKING {imported.get(name)}"
        for name in sorted(set(expected) | set(imported))
        if expected.get(name) != imported.get(name)
    ]


def test_every_lazy_package_keeps_its_names_in_one_table():
    lazy_without_table = [
        p.relative_to(ROOT).as_posix()
        for p in sorted(PACKAGE.rglob("__init__.py"))
        if "lazy.exports(" in p.read_text()
        and "lazy.exports(__name__, _EXPORTS)" not in p.read_text()
    ]
    assert lazy_without_table == []
    assert len(_faces()) >= 12


def test_each_face_imports_its_names_under_type_checking_from_where_the_table_says():
    wrong = {p.relative_to(ROOT).as_posix(): face_disagreements(p) for p in _faces()}
    assert {k: v for k, v in wrong.items() if v} == {}


def test_each_faces_all_is_its_tables_public_names_and_each_resolves():
    for init in _faces():
        name = _dotted(ROOT, init)
        module = importlib.import_module(name)
        table = module._EXPORTS
        own = {
            node.name
            for node in ast.parse(init.read_text(encoding="utf-8")).body
            if isinstance(node, ast.FunctionDef | ast.ClassDef)
        }
        public = [n for n in table if not n.startswith("_")]
        assert [n for n in module.__all__ if n not in own] == public, name
        for exported in table:
            assert getattr(module, exported) is not None, (name, exported)


def test_the_face_check_fails_where_the_table_and_the_imports_differ(tmp_path):
    init = tmp_path / "__init__.py"
    init.write_text(
        "from typing import TYPE_CHECKING\n"
        '_EXPORTS: dict[str, str] = {"a": "p._m", "b": "p.b", "c": "p._n:d", "e": "p._m"}\n'
        "if TYPE_CHECKING:\n"
        "    from p import b\n    from p._m import a\n    from p._n import d as c\n"
        "    from p._x import e\n    from p._m import f\n"
    )
    assert face_disagreements(init) == [
        "e: _EXPORTS p._m.e, TYPE_CHECKING p._x.e",
        "f: _EXPORTS None, TYPE_CHECKING p._m.f",
    ]

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
    "openvino",
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
#: torch's and openvino's Keras which device it computes on.
KERAS_SRC_ALLOWED = {
    ("runtime/_worker.py", "keras.src.backend.torch.core"),
    ("runtime/_worker.py", "keras.src.backend.torch.ops.core"),  # keras-nightly's place
    ("runtime/_worker.py", "keras.src.backend.openvino.core"),
}


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


# -- limits, checked: files, function bodies, private names -----------------------------------

#: The most lines a module may have, and a function's body (its docstring not counted).
MAX_FILE_LINES = 600
MAX_BODY_LINES = 80
#: Modules that are data tables (one entry per Keras target, read as a table), not code: the
#: file limit does not apply to them.
DATA_TABLES = frozenset({"keras_run/catalog/_layers.py"})


def _is_module(root: Path, dotted: str) -> bool:
    """Whether ``dotted`` names a module or package under ``root`` (the folder holding it)."""
    path = root.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _dotted(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def long_files(package: Path, data_tables: frozenset[str] = frozenset()) -> list[str]:
    """Modules of ``package`` over :data:`MAX_FILE_LINES` lines (``data_tables`` exempt)."""
    return [
        f"{path.relative_to(package).as_posix()}: {lines} lines"
        for path in sorted(package.rglob("*.py"))
        if path.relative_to(package).as_posix() not in data_tables
        for lines in [len(path.read_text(encoding="utf-8").splitlines())]
        if lines > MAX_FILE_LINES
    ]


def long_functions(package: Path) -> list[str]:
    """Functions of ``package`` whose body (from its first statement after the docstring to its
    last line) is over :data:`MAX_BODY_LINES` lines."""
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            body = node.body
            if (
                len(body) > 1
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
            ):
                body = body[1:]  # the docstring is not the body
            lines = node.end_lineno - body[0].lineno + 1
            if lines > MAX_BODY_LINES:
                found.append(f"{path.relative_to(package).as_posix()}:{node.lineno} {node.name}")
    return found


def private_imports(package: Path) -> list[str]:
    """Underscored names one module of ``package`` takes from another: ``from m import _x``
    or ``m._x`` on an imported module, where ``_x`` is not itself a module (a private module
    imported inside its package is import-linter's to check)."""
    root = package.parent
    found = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        here = _dotted(root, path)
        base = here if path.name == "__init__.py" else here.rpartition(".")[0]
        modules: dict[str, str] = {}  # local name -> the module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = base.split(".")
                    origin = ".".join(parts[: len(parts) - node.level + 1])
                    module = ".".join(p for p in (origin, node.module) if p)
                else:
                    module = node.module or ""
                if module.split(".")[0] != package.name:
                    continue
                for alias in node.names:
                    if _is_module(root, f"{module}.{alias.name}"):
                        modules[alias.asname or alias.name] = f"{module}.{alias.name}"
                    elif _private(alias.name):
                        found.append(
                            f"{path.relative_to(root)}:{node.lineno} {module}.{alias.name}"
                        )
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname and alias.name.split(".")[0] == package.name:
                        modules[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in modules
                and _private(node.attr)
                and not _is_module(root, f"{modules[node.value.id]}.{node.attr}")
            ):
                found.append(
                    f"{path.relative_to(root)}:{node.lineno} {modules[node.value.id]}.{node.attr}"
                )
    return found


def test_modules_are_at_most_600_lines_except_data_tables():
    assert long_files(PACKAGE, DATA_TABLES) == []


def test_function_bodies_are_at_most_80_lines():
    assert long_functions(PACKAGE) == []


def test_no_underscored_name_is_imported_across_modules():
    assert private_imports(PACKAGE) == []


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    package = tmp_path / "pkg"
    for name, text in {"__init__.py": "", **files}.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text, encoding="utf-8")
    return package


def test_the_file_limit_fails_on_a_601_line_module(tmp_path):
    package = _package(tmp_path, {"big.py": "x = 1\n" * 601, "ok.py": "x = 1\n" * 600})
    assert long_files(package) == ["big.py: 601 lines"]
    assert long_files(package, frozenset({"big.py"})) == []  # a data table is exempt


def test_the_body_limit_fails_on_an_81_line_function(tmp_path):
    doc = '    """A docstring\n    of two lines."""\n'
    package = _package(
        tmp_path,
        {
            "long.py": "def f():\n" + doc + "    x = 1\n" * 81,
            "ok.py": "def g():\n" + doc + "    x = 1\n" * 80,
        },
    )
    assert long_functions(package) == ["long.py:1 f"]


def test_the_private_name_check_fails_on_a_cross_module_private_import(tmp_path):
    package = _package(
        tmp_path,
        {
            "_a.py": "_HALF = ('float16', 'bfloat16')\ndef _helper():\n    pass\n",
            "b.py": "from pkg._a import _HALF\n",
            "c.py": "from pkg import _a\n_a._helper()\n",
            "d.py": "from . import _a\nfrom ._a import _helper\n",
            "fine.py": "from pkg import _a\nfrom pkg._a import __name__ as n\nprint(_a.__doc__)\n",
        },
    )
    assert private_imports(package) == [
        "pkg/b.py:1 pkg._a._HALF",
        "pkg/c.py:2 pkg._a._helper",
        "pkg/d.py:2 pkg._a._helper",
    ]


# -- package faces: the lazy table, the TYPE_CHECKING imports and __all__ agree ---------------


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

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

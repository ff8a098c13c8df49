"""The test tiers: every test is marked by what it uses (like Keras's root conftest.py), from
one table, :data:`USES`: the fixtures it asks (by name, or what those fixtures' own code calls),
the module's path, or what the module imports or calls. ``pure`` marks the tests that use none
of them: no Keras call in a worker, no engine, no browser, no notebook, no other process.
``./dev.sh check`` runs the fast tier (the pure tests and the architecture checks,
``--tier=fast``); ``./dev.sh test`` runs it first, then the rest (``--tier=rest``). The hooks
are in conftest.py; the markers are registered in pyproject.toml (``--strict-markers``).

The table reads text, so it can be wrong both ways. A record built by hand with
``backend="torch"`` is no worker (the table no longer reads a bare ``backend=``); a helper that
hides a worker or a process from the text is caught by :class:`NoProcess`: in the fast tier, a
test that starts a process fails, saying to mark it (``pytestmark = pytest.mark.subprocess``
or ``workers``), so that the fast tier stays the one without other processes."""

from __future__ import annotations

import doctest
import inspect
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from _pytest.doctest import DoctestItem


@dataclass(frozen=True)
class Uses:
    """How a test is known to use something: a fixture name (exact, or ending ``_engine``),
    a path under tests/ (prefix), or a regular expression over its module's source (or its
    doctest's examples) and over the source of the fixtures it asks."""

    about: str
    fixtures: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    source: str | None = None


USES = {
    "workers": Uses(
        "asks Keras on a backend through real worker processes",
        fixtures=("warm_workers", "two_numpy_workers"),
        source=r"\bpool\.|\bdx\.(probe|survey|bisect|trace|check|compare|audit|atlas|explore)"
        r"|\b(probe|survey|run_many|check_model|build_atlas|write_atlas|bisect)\(|dtype_check"
        r"|DtypeExplorer|runner\.invoke|run_front|\"--backend\"",
    ),
    "engine": Uses(
        "creates or runs a Keras engine (another Keras 3 release, or Keras 2)",
        fixtures=("_engine", "engine_copy"),
        source=r"\bengines\.(create|kernel|ensure|require|get|remove|list)\b|[\"']--engine[\"']",
    ),
    "keras2": Uses(
        "runs Keras 2 (tf_keras)",
        fixtures=("tf_keras_engine", "keras2", "raw_keras2"),
        source=r"tf_keras|keras2",
    ),
    "browser": Uses(
        "drives a real JupyterLab or the docs site in Debian's Chromium",
        fixtures=("browser", "lab", "page"),
        paths=("frontends/browser/",),
    ),
    "notebook": Uses(
        "runs a notebook in a Jupyter kernel (nbval, nbclient)",
        fixtures=("executed_lessons",),
        paths=("notebooks/",),
        source=r"nbclient|nbval|NotebookClient",
    ),
    "docs": Uses("builds the documentation site with mkdocs", paths=("docs/test_site.py",)),
    "cluster": Uses("starts a Dask cluster", source=r"\bdask\b|LocalCluster"),
    "subprocess": Uses(
        "runs Python (a script, the CLI) in a process of its own",
        source=r"\bsubprocess\b|sys\.executable",
    ),
}
PURE = "pure"
#: The markers of tests/ and pyproject.toml (registered there: --strict-markers).
TIER_MARKERS = (*USES, PURE)
TESTS = Path(__file__).resolve().parent


def _source(obj) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return ""


def item_text(item: pytest.Item) -> str:
    """The text a test's uses are read from: its module's source (a doctest: its examples)."""
    if isinstance(item, DoctestItem) and TESTS in Path(str(item.path)).resolve().parents:
        return Path(str(item.path)).read_text(encoding="utf-8")  # a test module's: as its tests
    if isinstance(item, DoctestItem):
        skip = doctest.OPTIONFLAGS_BY_NAME["SKIP"]
        return "\n".join(e.source for e in item.dtest.examples if not e.options.get(skip))
    module = getattr(item, "module", None)
    return _source(module) if module is not None else ""


def uses_of(item: pytest.Item, module_text: str) -> set[str]:
    """The :data:`USES` markers that apply to ``item``."""
    fixtures = set(getattr(item, "fixturenames", ()))
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    # Fixtures from elsewhere (conftest.py): what their own code calls counts too.
    fixture_text = "\n".join(
        _source(d.func)
        for name in fixtures
        if not name.startswith("_")  # the autouse ones of every test
        for d in defs.get(name, ())
        if TESTS in Path(inspect.getsourcefile(d.func) or "/").resolve().parents
    )
    try:
        where = Path(str(item.path)).resolve().relative_to(TESTS).as_posix()
    except ValueError:
        where = ""  # a doctest of the package
    found = set()
    for marker, uses in USES.items():
        if (
            any(f == n or (f.endswith(n) and n[0] == "_") for f in fixtures for n in uses.fixtures)
            or any(where.startswith(p) for p in uses.paths)
            or (uses.source and re.search(uses.source, module_text + "\n" + fixture_text))
        ):
            found.add(marker)
    return found


def module_uses(path: Path) -> set[str]:
    """The :data:`USES` markers every test of the test module ``path`` gets from its path and
    source alone (read as text, before it is imported)."""
    where = path.resolve().relative_to(TESTS).as_posix()
    text = path.read_text(encoding="utf-8")
    return {
        marker
        for marker, uses in USES.items()
        if any(where.startswith(p) for p in uses.paths)
        or (uses.source and re.search(uses.source, text))
    }


#: Test files of the fast tier whatever they use: the checks of the code's layout.
FAST_FILES = ("test_architecture.py",)


#: Programs a library runs to look at the machine (``platform.processor()`` runs ``uname``,
#: ``ctypes.util.find_library`` ``ldconfig``, a font cache ``fc-list``), sometimes only on a
#: fresh machine: no test's own process, so :class:`NoProcess` lets them run.
MACHINE_PROBES = frozenset(
    {"uname", "ldconfig", "gcc", "cc", "ld", "objdump", "fc-list", "fc-match", "lscpu", "getconf"}
)


class NoProcess:
    """While a fast-tier test's setup or call runs, starting a process (``multiprocessing``, or
    ``subprocess`` but for :data:`MACHINE_PROBES`) raises, naming the test's tier
    (:data:`FAST_FILES` excepted); put back after. A context manager: ``with NoProcess(item):``.
    """

    def __init__(self, item: pytest.Item) -> None:
        self.item = item

    def __enter__(self) -> NoProcess:
        import multiprocessing.process
        import subprocess

        name = self.item.nodeid
        start, popen = multiprocessing.process.BaseProcess.start, subprocess.Popen.__init__

        def refuse() -> None:
            raise AssertionError(
                f"{name} is in the fast tier (tests/tiers.py read nothing it uses) but started "
                "a process: mark its module with what it uses (pytestmark = "
                "pytest.mark.subprocess, or workers)"
            )

        def refused_start(process, *args, **kwargs):
            refuse()

        def refused_popen(process, args, *rest, **kwargs):
            first = args if isinstance(args, (str, bytes, os.PathLike)) else next(iter(args), "")
            words = os.fsdecode(first).split()  # a shell line's program is its first word
            if not words or Path(words[0]).name not in MACHINE_PROBES:
                refuse()
            return popen(process, args, *rest, **kwargs)

        self._saved = [
            (multiprocessing.process.BaseProcess, "start", start),
            (subprocess.Popen, "__init__", popen),
        ]
        multiprocessing.process.BaseProcess.start = refused_start
        subprocess.Popen.__init__ = refused_popen
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, attribute, original in self._saved:
            setattr(owner, attribute, original)


def in_fast_tier(item: pytest.Item) -> bool:
    """Whether ``item`` belongs to the fast tier (``./dev.sh check``)."""
    return item.get_closest_marker(PURE) is not None or item.path.name in FAST_FILES

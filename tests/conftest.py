"""Test session setup: the in-process backend is TensorFlow (Keras's default) unless
KERAS_BACKEND says otherwise; the other backends are reached through real worker processes.
Each session gets a fresh, empty result cache and cache key, removed at the end."""

import contextlib
import gc
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
import scheduling
from _pytest.doctest import DoctestItem
from tiers import (
    FAST_FILES,
    PURE,
    TESTS,
    USES,
    NoProcess,
    in_fast_tier,
    item_text,
    module_uses,
    uses_of,
)

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# One worker per backend unless a test asks for more (tests/runtime/test_pool_scale.py): the
# fault tests name the one worker's log, whatever the machine's cores.
os.environ.setdefault("DTYPE_EXPLORER_WORKERS_PER_BACKEND", "1")
# XLA (jax's compiler, and TensorFlow's where Keras compiles a step with it) builds every
# program of the session with its cheapest code generation (no LLVM optimisation, the older
# elemental emitters for fusions): the tests ask which dtypes and values come out, never how
# fast the compiled code runs, and most of a jax test's time was compiling (the catalog's jax
# smoke: 71-74 -> 32-34 CPU-s; benchmarks/README.md, "Where a whole run's time goes"). Dtypes
# are the same; a value may differ from a default build in its last bits (68 of the catalog's
# 486 outputs on jax, by a few units in the last place), the same in the test's process, its
# workers and its engines, which inherit the variable. It is part of their answers'
# environment and cache key (``versions.NUMERIC_VARIABLES``). The lessons' Binder runs leave
# it out (``lesson_runs.LEAKS``): they are timed as users run them.
TEST_XLA_FLAGS = (
    "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
    " --xla_cpu_use_fusion_emitters=false"
)
if TEST_XLA_FLAGS not in os.environ.get("XLA_FLAGS", ""):  # (an xdist process inherits them)
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {TEST_XLA_FLAGS}".strip()
_CACHE_DIR = tempfile.mkdtemp(prefix="dx-test-cache-")
os.environ["DTYPE_EXPLORER_CACHE_DIR"] = _CACHE_DIR
# The Keras 2 engine registers a Jupyter kernel (user=True): into a temporary data dir, never
# the real user's.
_JUPYTER_DIR = tempfile.mkdtemp(prefix="dx-test-jupyter-")
os.environ["JUPYTER_DATA_DIR"] = _JUPYTER_DIR


# Engines (Keras releases pip-installed, ``_created_engine``) outlive the session: created
# once per machine, in a folder keyed by this Python and the installed libraries they layer
# over (a changed venv gets a folder of its own), outside the session's temporary cache. Their
# workers still check every file of them at start (``engines.verify_site``); tests that damage
# an engine use a folder of their own. DTYPE_EXPLORER_TEST_ENGINES_DIR moves the folder.
def _engines_dir() -> Path:
    import dtype_explorer as dx

    installed = dx.engines.base_versions()
    key = hashlib.sha256(json.dumps([sys.version, installed]).encode()).hexdigest()[:12]
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dx-test-engines"
    base = Path(os.environ.get("DTYPE_EXPLORER_TEST_ENGINES_DIR", default))
    return base / f"py{sys.version_info.major}.{sys.version_info.minor}-{key}" / "engines"


os.environ.setdefault("DTYPE_EXPLORER_ENGINES_DIR", str(_engines_dir()))
# The cache's signing key: never the real user's (in their config directory). It also signs
# the engines' records (runtime/_site.py), so it is kept beside the engines that outlive the
# session (a key per session would refuse them all in the next); the result cache is still
# the session's own and empty, so no row of an earlier session can be read.
_KEY_DIR = str(Path(os.environ["DTYPE_EXPLORER_ENGINES_DIR"]).parent)
os.environ["DTYPE_EXPLORER_CACHE_KEY_FILE"] = os.path.join(_KEY_DIR, "cache.key")
# The browser tests' Chromium (tests/frontends/browser, tests/docs): Debian's, never downloaded.
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _drop_refused_engines() -> list[str]:
    """The kept engines whose signed record this session's key refuses (made with another
    key, or before engines were signed: a machine that ran an older checkout) are removed, so
    the fixtures below and the lessons (which create engines themselves) make them again
    instead of failing on a leftover. What was removed, by spec."""
    from dtype_explorer import engines

    dropped = []
    for engine in engines.created():
        try:
            engines.verify_site(engine)
        except engines.EngineError:
            engines.remove(engine.spec)
            dropped.append(engine.spec)
    return dropped


def pytest_sessionstart(session: pytest.Session) -> None:
    """Once per run, before any test (in the controller when pytest-xdist runs the tests in
    several processes, so that no process removes an engine another just created)."""
    if hasattr(session.config, "workerinput") or session.config.getoption("tier") == "fast":
        return
    dropped = _drop_refused_engines()
    if dropped:
        print(f"\nkept engines refused by this key, removed: {', '.join(dropped)}")


@pytest.fixture(scope="session", autouse=True)
def _fresh_cache_and_workers():
    yield
    from dtype_explorer import pool

    pool.shutdown()
    shutil.rmtree(_CACHE_DIR, ignore_errors=True)
    shutil.rmtree(_JUPYTER_DIR, ignore_errors=True)


@pytest.fixture(scope="module", autouse=True)
def _environment_kept():
    """Each test file starts from the environment the one before it started from, whatever ran
    first: what a file leaves in ``os.environ`` would reach every later file's workers,
    zygotes (another key) and scripts in the same pytest process. Dask's ``LocalCluster``
    leaves its workers' settings for good (``OMP_NUM_THREADS=1``, ``MKL_NUM_THREADS=1``,
    ``OPENBLAS_NUM_THREADS=1``, ``PYTHONHASHSEED``...), and importing TensorFlow sets
    ``TF2_BEHAVIOR`` and the ``TPU_*`` variables."""
    before = dict(os.environ)
    yield
    if os.environ != before:
        os.environ.clear()
        os.environ.update(before)


@pytest.fixture(scope="module")
def shell():
    """A real IPython shell with ``%load_ext dtype_explorer`` done (``%dtype_check`` tests)."""
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "dtype_explorer")
    return ip


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium (never a downloaded one), headless, driven by Playwright; a missing
    Chromium or playwright fails the test, never skips it."""
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: apt-get install -y chromium"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        yield chromium
        chromium.close()


def _created_engine(spec: str):
    """An engine created once per machine (``DTYPE_EXPLORER_ENGINES_DIR``, above) and reused by
    later sessions; creating one needs the package index: when it cannot be reached the test
    fails (never skips), saying so."""
    from dtype_explorer import engines

    try:
        return engines.create(spec, progress=False)
    except engines.EngineError as exc:
        pytest.fail(f"creating the engine {spec} needs the package index (pip): {exc}")


@pytest.fixture(scope="session")
def keras_3_11_engine():
    """Keras 3.11.3 layered over the installed backends: the last release before 3.12.0, whose
    Discretization(dtype="float32") answers float32 where 3.12.0 on answer int32."""
    return _created_engine("keras==3.11.3")


@pytest.fixture(scope="session")
def tf_keras_engine():
    """Keras 2: the tf_keras release matching the installed tensorflow (installed in CI:
    a missing tensorflow fails here, never skips)."""
    import tensorflow  # noqa: F401

    return _created_engine("tf_keras")


@pytest.fixture(scope="session")
def keras_3_2_engine():
    """Keras 3.2.1: a release whose ``keras.tree`` lacks ``flatten_with_path`` (3.1.x-3.5.x)
    and whose tree lives in ``keras.src.utils.tree``."""
    return _created_engine("keras==3.2.1")


@pytest.fixture(scope="session")
def keras_3_4_engine():
    """Keras 3.4.1: ``keras.src.tree`` without ``flatten_with_path``."""
    return _created_engine("keras==3.4.1")


@pytest.fixture(scope="session")
def keras_3_5_engine():
    """Keras 3.5.0: the last release without ``keras.tree.flatten_with_path``."""
    return _created_engine("keras==3.5.0")


#: The keras-nightly build the tests ask (a fixed one: "nightly" moves every night, and a kept
#: engine per build would be made again each day); its ops.leaky_relu(int32) on numpy answers
#: float32 where 3.15.1 answers int32 (tests/runtime/test_engine_nightly.py).
NIGHTLY_BUILD = "keras-nightly==3.16.0.dev2026102704"


@pytest.fixture(scope="session")
def keras_nightly_engine():
    """Keras's main as the keras-nightly package built it on 2026-10-27, layered over the
    installed backends."""
    return _created_engine(NIGHTLY_BUILD)


@pytest.fixture(scope="session")
def executed_lessons(tf_keras_engine, tmp_path_factory):
    """Every lesson executed once in this run (``tests/lesson_runs.py``): the Keras 3 ones in a
    rebuilt Binder environment, measured, 7b on the Keras 2 kernel. The Binder tests check
    them and the docs site is built from them."""
    import lesson_runs

    _first_to_run_the_lessons(tmp_path_factory)
    return lesson_runs.run_every_lesson(
        tmp_path_factory.mktemp("lessons"), tf_keras_engine.kernel_name
    )


def _first_to_run_the_lessons(tmp_path_factory) -> None:
    """Fails if another pytest process of this run already executed the lessons: the
    scheduler split their unit (tests/scheduling.py), and every lesson would run twice."""
    shared = tmp_path_factory.getbasetemp()
    process = os.environ.get("PYTEST_XDIST_WORKER")
    if process is not None:  # popen-gw0, popen-gw1... share their parent
        shared = shared.parent
    mark = shared / "lessons-executed-by"
    try:
        descriptor = os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        pytest.fail(
            f"the lessons already ran in this run, in pytest process "
            f"{mark.read_text(encoding='utf-8')!r}; this is {process!r}: the scheduler split "
            f"the lessons' unit (tests/scheduling.py) and every lesson would run twice"
        )
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(process or "main")


# ------------------------------------------------------------------------------ the tiers
# Every test is marked by what it uses, from the table in tests/tiers.py (which says how);
# `./dev.sh check` runs the fast tier, `./dev.sh test` runs it first, then the rest.


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--tier",
        choices=("fast", "rest"),
        default=None,
        help="fast: the pure tier and tests/test_architecture.py (./dev.sh check); "
        "rest: every other test (./dev.sh test runs fast, then rest)",
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """In the fast tier, a test module none of whose tests can be pure is not even imported,
    nor a package module without a doctest (the daily tier stays under a minute)."""
    if config.getoption("tier") != "fast" or collection_path.suffix != ".py":
        return None
    if TESTS in collection_path.resolve().parents:
        if collection_path.name.startswith("test_") and collection_path.name not in FAST_FILES:
            return bool(module_uses(collection_path)) or None
        return None
    return ">>>" not in collection_path.read_text(encoding="utf-8") or None


#: pytest-timeout's limit for the tests that read the lessons' one execution: the first one's
#: setup builds Binder and runs every lesson (10 min on an idle 2-core machine, more under
#: load), whichever test that is.
LESSONS_TIMEOUT = 3600


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``./dev.sh test``'s ``--dist loadfile``: a file a unit of work, the files that read the
    lessons' one execution one unit (tests/scheduling.py says why it is our own)."""
    if config.getoption("dist") == "loadfile":
        return scheduling.FilesAndLessons(config, log)
    return None


def _no_lesson_reader_outside_their_unit(items: list[pytest.Item], lessons: frozenset[str]) -> None:
    """A test that reads the lessons from a file the scheduler would not put in their unit
    (``tests/scheduling.py``) is refused: under ``./dev.sh test`` the lessons would run twice."""
    for item in items:
        reads = scheduling.LESSONS_FIXTURE in getattr(item, "fixturenames", ())
        if reads and scheduling.unit_of(item.nodeid, lessons) != scheduling.LESSONS_UNIT:
            raise pytest.UsageError(
                f"{item.nodeid} reads {scheduling.LESSONS_FIXTURE} but its file does not name "
                "it: name it there (tests/scheduling.py), or the lessons would run twice"
            )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    texts: dict[object, str] = {}
    for item in items:
        key = item.dtest.name if isinstance(item, DoctestItem) else item.path
        if key not in texts:
            texts[key] = item_text(item)
        markers = uses_of(item, texts[key])
        markers |= {m.name for m in item.iter_markers() if m.name in USES}
        for name in sorted(markers) or [PURE]:
            item.add_marker(name)
    tier = config.getoption("tier")
    if tier is not None:
        keep = [item for item in items if in_fast_tier(item) == (tier == "fast")]
        kept = {id(item) for item in keep}
        config.hook.pytest_deselected(items=[item for item in items if id(item) not in kept])
        items[:] = keep
    for item in items:  # the first to ask makes the Binder build and runs every lesson
        if "executed_lessons" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.timeout(LESSONS_TIMEOUT), append=False)
    _no_lesson_reader_outside_their_unit(items, scheduling.lesson_files())


def _guarded(item: pytest.Item):
    """The fast tier's guard around a test's phase (``tiers.NoProcess``), or nothing."""
    fast = item.config.getoption("tier") == "fast" and item.path.name not in FAST_FILES
    return NoProcess(item) if fast else contextlib.nullcontext()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    """In the fast tier, a test's fixtures start no process (``tiers.NoProcess``)."""
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """In the fast tier, a test starts no process (``tiers.NoProcess``)."""
    with _guarded(item):
        return (yield)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything the collection left in this process (the test files' imports: TensorFlow,
    jax, torch, keras-hub, the package) goes out of the cycle collector's way, as the tool's
    workers do (``runtime/_worker.py``). Keras runs a full collection itself where it deletes a
    variable (``Layer.__delattr__``, on every layer a ``quantize`` replaces) and in
    ``clear_session``; here that walked every object of those libraries, 0.33 s a collection,
    over half of a GPTQ or AWQ audit's time. What the tests make afterwards is collected as
    before, and Keras's answers do not change: only how many objects a collection walks.
    Frozen for good (``keras_run.freeze_for_good``), so that an audit's ``heap_frozen`` does
    not count them each time."""
    from dtype_explorer.keras_run import freeze_for_good

    gc.collect()
    freeze_for_good()


def _children() -> set[int]:
    from tests.on_backend import tool_children

    return {child.pid for child in tool_children()}


@pytest.fixture(autouse=True)
def _pure_stays_pure(request):
    """A test of the pure tier that leaves a new worker process running was marked wrongly:
    it fails, naming the table to fix (so the daily tier stays fast). Checked when no process
    ran before it (always in the fast tier, which runs first)."""
    if request.node.get_closest_marker(PURE) is None:
        yield
        return
    before = _children()
    yield
    if before:  # workers of earlier tests may be replaced meanwhile: only a clean start tells
        return
    started = _children()
    assert not started, (
        f"a test of the pure tier started processes {sorted(started)} (workers?): "
        "add what it uses to USES in tests/conftest.py"
    )


# Scripts the tests run in other processes (a Keras 2 engine's Python, a plain tf_keras run):
# never imported here, not even by --doctest-modules.
collect_ignore_glob = ["*_script.py"]

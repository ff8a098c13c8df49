"""How ``./dev.sh test`` spreads the rest tier over pytest processes (pytest-xdist): each test
file is one unit of work, so that its module fixtures are made once (as ``--dist loadfile``),
except that every file whose tests read the lessons' one execution (``executed_lessons``,
``tests/lesson_runs.py``) is one unit together, so that the process that executes the lessons
also checks them and builds the site from them: no lesson runs twice.

This is a scheduler of our own (``pytest_xdist_make_scheduler`` in conftest.py), decided from
the test ids alone, because pytest-xdist's ``--dist loadgroup`` stopped grouping with pytest
9.2: it renames a test's id after collection (``test@group``), and that rename no longer takes
effect (pytest-dev/pytest-xdist#1386), so the lesson files were split between the processes
and every lesson ran once in each.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

#: The unit of the files that read the lessons' one execution.
LESSONS_UNIT = "lessons"
#: The fixture that executes every lesson once (tests/conftest.py).
LESSONS_FIXTURE = "executed_lessons"
ROOT = Path(__file__).resolve().parents[1]


def lesson_files(tests: Path = ROOT / "tests") -> frozenset[str]:
    """The test files (relative to the checkout, as pytest's ids name them) whose source reads
    the lessons' execution, directly or through a fixture of their own."""
    return frozenset(
        path.relative_to(ROOT).as_posix()
        for path in tests.rglob("test_*.py")
        if LESSONS_FIXTURE in path.read_text(encoding="utf-8")
    )


def unit_of(nodeid: str, lessons: frozenset[str]) -> str:
    """The unit of work of the test ``nodeid``: its file, or :data:`LESSONS_UNIT`.

    >>> site = "tests/docs/test_site.py"
    >>> unit_of(f"{site}::test_page_fetches_nothing[index.html]", frozenset({site}))
    'lessons'
    >>> unit_of("dtype_explorer/shapes.py::dtype_explorer.shapes.parse_shapes", frozenset())
    'dtype_explorer/shapes.py'
    """
    file = nodeid.split("::", 1)[0]
    return LESSONS_UNIT if file in lessons else file


def dispatch_key(nodeids: list[str], lessons: frozenset[str]) -> list[tuple[bool, int]]:
    """The key, test by test, that puts the tests in the order their units go out: the
    lessons' unit first (the longest by far: the Binder build, every lesson, the site), then
    the units with the most tests (a stable sort keeps each unit's tests as collected).

    >>> site = "tests/docs/test_site.py"
    >>> ids = ["tests/a.py::x", "tests/b.py::y", "tests/b.py::z", f"{site}::s"]
    >>> keys = dispatch_key(ids, frozenset({site}))
    >>> [ids[i] for i in sorted(range(len(ids)), key=keys.__getitem__)]
    ['tests/docs/test_site.py::s', 'tests/b.py::y', 'tests/b.py::z', 'tests/a.py::x']
    """
    units = [unit_of(nodeid, lessons) for nodeid in nodeids]
    counts = Counter(units)
    return [(unit != LESSONS_UNIT, -counts[unit]) for unit in units]


class FilesAndLessons(LoadScopeScheduling):
    """A file a unit, the lesson files one unit; units go out in the order the processes
    collected them (``--no-loadscope-reorder``), which conftest sorts by :func:`dispatch_key`
    in each process (the order cannot be changed here: the scheduler names each test to a
    process by its index in that process's own collection), a unit to a free process."""

    def __init__(self, config, log=None) -> None:
        super().__init__(config, log)
        self.lessons = lesson_files()

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid, self.lessons)

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


class FilesAndLessons(LoadScopeScheduling):
    """A file a unit, the lesson files one unit; units go out in file order (as collected:
    ``--no-loadscope-reorder``), a unit to a free process.

    Not the longest first: a sort of the items in ``pytest_collection_modifyitems`` keyed on
    ``--dist`` never ran (pytest-xdist resets ``--dist`` to ``no`` in its processes), and made
    to run, the lessons' unit first and then the files with the most tests, two whole runs each
    had one test stall ~55 s that takes under a second in file order, for no gain in time. The
    order cannot be set here either: the scheduler names each test to a process by its index in
    that process's own collection."""

    def __init__(self, config, log=None) -> None:
        super().__init__(config, log)
        self.lessons = lesson_files()

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid, self.lessons)

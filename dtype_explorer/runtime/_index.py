"""Every call to the package index, through this interpreter's pip (its wheel tags,
Requires-Python and configuration: index URL, proxies, certificates): the ``--dry-run``
resolution of an engine's release against the installed packages, its ``--target`` install,
and the list of a package's releases that ``dx.bisect`` reads (``pip index versions``).
pip runs in its own process group, its lines streamed to a callback: a cancel, a
``KeyboardInterrupt`` or the step timeout kills pip and what it started. pip's failures
come back in words (offline, no such release with the closest ones, another Python).

>>> pip()[1:3]
['-m', 'pip']
>>> canon("tf_keras"), canon("ML.Dtypes")
('tf-keras', 'ml-dtypes')
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

from packaging.version import InvalidVersion, Version

from dtype_explorer.errors import InvalidSpecError, unknown

#: Seconds pip may take for one step (it retries the index itself; the check imports TF).
STEP_TIMEOUT = 600.0
#: Seconds the package index may take to list a package's releases.
INDEX_TIMEOUT_S = 120.0
#: Distributions that install the same modules under another name: TensorFlow's CPU-only and
#: platform builds are ``import tensorflow`` too, but pip cannot see that they satisfy a
#: ``tensorflow`` requirement (tf_keras's), and would plan the full wheel beside them.
SAME_MODULES = {"tensorflow": ("tensorflow-cpu", "tensorflow-intel", "tensorflow-macos")}

#: Receives each line a command prints.
Lines = Callable[[str], None]


class EngineError(InvalidSpecError):
    """An engine could not be created or used: offline, no such release, a release that
    cannot run with the installed backends (naming the versions), or one not created yet."""


class PackageIndexError(ConnectionError):
    """The package index could not list the Keras releases (offline, or unreachable)."""


def pip() -> list[str]:
    """pip of this interpreter: wheel tags and Requires-Python are the workers' own."""
    return [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]


def run(
    command: list[str],
    line: Lines,
    cancel: threading.Event | None,
    env: dict[str, str] | None = None,
) -> tuple[int, list[str]]:
    """Run ``command`` in its own process group, streaming its lines to ``line``; returns
    its exit code and last lines. A cancel, a ``KeyboardInterrupt`` or the step timeout kills
    the whole group (pip and what it started) and raises."""
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        bufsize=1,
        start_new_session=True,
        env=env,
    )
    done = threading.Event()
    deadline = time.monotonic() + STEP_TIMEOUT
    timed_out = threading.Event()

    def kill() -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)

    def watch() -> None:
        while not done.wait(0.05):
            if time.monotonic() > deadline:
                timed_out.set()
            if timed_out.is_set() or (cancel is not None and cancel.is_set()):
                kill()
                return

    threading.Thread(target=watch, name="dx-engine-watch", daemon=True).start()
    tail: list[str] = []
    try:
        assert process.stdout is not None
        for raw in process.stdout:
            text = raw.rstrip()
            if not text or "is ignored: it is neither a file nor a directory" in text:
                continue
            tail.append(text)
            del tail[:-40]
            line(text)
        code = process.wait()
    except BaseException:
        kill()
        process.wait()
        raise
    finally:
        done.set()
    if cancel is not None and cancel.is_set():
        raise KeyboardInterrupt("engine creation cancelled")
    if timed_out.is_set():
        raise EngineError(f"{' '.join(command[3:6])}... took over {STEP_TIMEOUT:g} s; stopped")
    return code, tail


def resolve(requirement: str | Sequence[str], line: Lines, cancel: threading.Event | None) -> list:
    """What pip would install for ``requirement`` (one, or several resolved together) into the
    installed environment, which it does not change (``--dry-run --report``): the release plus
    only the dependencies that environment lacks, as ``(name, version)`` pairs."""
    wanted = [requirement] if isinstance(requirement, str) else list(requirement)
    with tempfile.TemporaryDirectory(prefix="dx-engine-") as scratch:
        report = Path(scratch) / "report.json"
        code, tail = run(
            [
                *pip(),
                "install",
                "--dry-run",
                "--quiet",
                "--only-binary=:all:",
                "--report",
                str(report),
                *wanted,
            ],
            line,
            cancel,
        )
        if code != 0 or not report.is_file():
            raise pip_failure(f"cannot resolve {' '.join(wanted)}", tail)
        installs = json.loads(report.read_text(encoding="utf-8")).get("install", [])
        plan = [(i["metadata"]["name"], i["metadata"]["version"]) for i in installs]
        return [(n, v) for n, v in plan if not _installed_under_another_name(n, v)]


def install(
    pins: Sequence[str], target: Path, wanted: str, line: Lines, cancel: threading.Event | None
) -> None:
    """Install exactly ``pins`` (``name==version``, wheels only, no dependencies) into the
    directory ``target``; pip's failure raises :class:`EngineError` about ``wanted``. Not
    byte-compiled: the engine compiles its files itself, named where they will be
    (``_engine_build.compiled_and_hashed``), so pip's pass was done twice."""
    code, tail = run(
        [
            *pip(),
            "install",
            "--no-deps",
            "--no-compile",
            "--only-binary=:all:",
            "--progress-bar",
            "off",
            "--target",
            str(target),
            *pins,
        ],
        line,
        cancel,
    )
    if code != 0:
        raise pip_failure(f"cannot install {wanted}", tail)


def _installed_under_another_name(name: str, version: str) -> bool:
    """Whether the plan's ``name==version`` is installed under another name of the same
    modules (tensorflow-cpu for tensorflow) in the same major.minor series."""
    series = version.split(".")[:2]
    for other in SAME_MODULES.get(canon(name), ()):
        try:
            installed = metadata.version(other)
        except metadata.PackageNotFoundError:
            continue
        if installed.split(".")[:2] == series:
            return True
    return False


def pip_failure(what: str, tail: list[str]) -> EngineError:
    """pip's failure in words: offline, no such release (with the closest), or pip's error."""
    text = "\n".join(tail)
    errors = [line for line in tail if line.startswith("ERROR")] or tail[-2:]
    listed = re.search(r"\(from versions: ([^)]*)\)", text)
    available = [v.strip() for v in listed.group(1).split(",")] if listed else []
    offline = (
        any(
            s in text for s in ("NewConnectionError", "Network is unreachable", "Temporary failure")
        )
        or "Could not fetch URL" in text
        or (listed is not None and available == ["none"])
    )
    if offline:
        return EngineError(
            f"{what}: the package index could not be reached (offline, or a proxy or index "
            "setting blocks it). Creating an engine needs the index once; probes on it need "
            f"no network afterwards. pip said: {' '.join(errors)[:300]}"
        )
    if "No matching distribution found" in text:
        wanted = re.search(r"==\s*([\w.]+)", what)
        if wanted and ".dev" in wanted.group(1) and available:  # a nightly build: its neighbours
            near = ", ".join(nearest(wanted.group(1), available))
            return EngineError(
                f"{what}: no such build on the package index; the closest it lists: {near} "
                f"(newest: {max(available, key=_version_key)}); engine='nightly' takes the newest"
            )
        if wanted:
            major = wanted.group(1).split(".")[0] + "."
            available = [v for v in available if v.startswith(major)]
        if wanted and available:
            try:
                raise unknown("release", wanted.group(1), available)
            except InvalidSpecError as exc:
                close = str(exc)
            return EngineError(f"{what}: no such release on the package index ({close})")
        return EngineError(f"{what}: no such release on the package index ({' '.join(errors)})")
    if "Requires-Python" in text or "requires a different Python" in text:
        return EngineError(
            f"{what}: it does not support this Python ({sys.version.split()[0]}): "
            f"{' '.join(errors)[:300]}"
        )
    return EngineError(f"{what}: pip failed: {' '.join(errors)[:400]}")


def nearest(version: str, available: Sequence[str], count: int = 4) -> list[str]:
    """The ``count`` versions of ``available`` nearest to ``version`` in release order (those
    just before it and just after it), oldest first.

    >>> nearest("3.16.0.dev2026102799", ["3.16.0.dev2026102704", "3.16.0.dev2026102604",
    ...                                  "3.16.0.dev2026102504", "2.5.0.dev2021020510"], 2)
    ['3.16.0.dev2026102604', '3.16.0.dev2026102704']
    """
    ordered = sorted(set(available), key=_version_key)
    key = _version_key(version)
    at = sum(1 for v in ordered if _version_key(v) < key)
    low = max(0, min(at - count // 2, len(ordered) - count))
    return ordered[low : low + count]


def _version_key(version: str) -> tuple:
    """Release order of a version pip lists (``packaging``'s; one it cannot read sorts first)."""
    try:
        return (1, Version(version))
    except InvalidVersion:
        return (0, version)


@functools.cache
def index_releases(package: str = "keras", *, pre: bool = False) -> tuple[str, ...]:
    """Every release of ``package`` the package index lists (``pip index versions``, with
    pip's own configuration: index URL, proxies, certificates). Asked once per process.

    Args:
        package: the distribution's name.
        pre: list pre-releases and dev builds too (``--pre``): ``keras-nightly`` has only
            those.

    Returns:
        The releases, as the index lists them (newest first).

    Raises:
        PackageIndexError: pip could not list them (offline, or the index is unreachable).

    >>> "3.12.0" in index_releases()                                    # doctest: +SKIP
    True
    """
    command = [*pip(), "index", "versions", *(["--pre"] if pre else []), package]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=INDEX_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise PackageIndexError(
            f"could not list the {package} releases from the package index: {error}"
        ) from None
    match = re.search(r"^Available versions:\s*(.+)$", done.stdout, flags=re.MULTILINE)
    if done.returncode != 0 or match is None:
        lines = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
        said = lines[-1] if lines else (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise PackageIndexError(
            f"could not list the {package} releases from the package index (offline, or the "
            f"index is unreachable; pip's configuration sets which index): {said}"
        )
    return tuple(v.strip() for v in match.group(1).split(",") if v.strip())


def canon(name: str) -> str:
    """A distribution's name as pip compares it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()

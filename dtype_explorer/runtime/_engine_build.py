"""An engine's build: its packages resolved against the installed ones (a release that would
replace one is refused), installed into a temporary folder beside the engines, imported in a
subprocess over the installed backends, compiled, hashed and signed into ``engine.json``, then
renamed into place, so that an engine exists whole or not at all; and the creation's progress
(a tqdm bar over its steps, or lines to a callable). ``engines.create`` holds the engine's
lock around :func:`build` and reads the engine it made."""

from __future__ import annotations

import compileall
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from dtype_explorer.runtime import _engine_check as engine_check
from dtype_explorer.runtime import _index
from dtype_explorer.runtime import _plan as plans
from dtype_explorer.runtime import _site as site_files
from dtype_explorer.runtime._engine_check import base_versions
from dtype_explorer.runtime._index import canon

#: How a creation shows its progress: a bar (``True``), nothing (``False``), or each line to a
#: callable.
Progress = bool | Callable[[str], None]


class Steps:
    """Progress of one creation: a tqdm bar over its steps, or lines to a callable."""

    TOTAL = 4

    def __init__(self, spec: str, progress: Progress) -> None:
        self.spec = spec
        self.callback = progress if callable(progress) else None
        self.bar: Any = None
        if progress is True:
            self.bar = tqdm(total=self.TOTAL, desc=f"engine {spec}", unit="step", leave=False)

    def __enter__(self) -> Steps:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()

    def advance(self, text: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(text[:60], refresh=False)
            self.bar.update(1)
        self.line(f"[engine] {text}")

    def line(self, text: str) -> None:
        if self.callback is not None:
            self.callback(text)


def build(
    package: str,
    version: str,
    plan: list[tuple[str, str]] | None,
    final: Path,
    steps: Steps,
    cancel: threading.Event | None,
) -> None:
    """Resolve, install into a temporary directory, check, describe and sign, then rename to
    ``final`` (the caller holds the engine's lock). Nothing is left behind when it fails."""
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=final.parent))
    try:
        started = time.monotonic()
        wanted = f"{package}=={version}"
        if plan is None:
            steps.advance(f"resolving {wanted} against the installed packages")
            plan = _index.resolve(wanted, steps.line, cancel)
        plans.refuse_replacements(wanted, package, plan)
        if not any(canon(n) == canon(package) for n, _ in plan):
            plan.append((package, version))  # the installed release itself: layered anyway
        pins = [f"{n}=={v}" for n, v in plan]
        steps.advance(f"installing {' '.join(pins)}")
        _index.install(pins, tmp / "site", wanted, steps.line, cancel)
        installed_s = time.monotonic() - started
        steps.advance(f"checking that {wanted} imports over the installed backends")
        engine_check.check(tmp / "site", package, version, steps.line, cancel)
        files = compiled_and_hashed(tmp / "site", final / "site")
        info = {
            "spec": wanted,
            "package": package,
            "version": version,
            "packages": pins,
            "base": base_versions(),
            "python": sys.version.split()[0],
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "install_seconds": round(installed_s, 2),
            "site_sha256": site_files.total(files),
            "site_files": files,
        }
        info[site_files.MAC_FIELD] = site_files.sign(info)  # with the key outside the folder
        (tmp / "engine.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
        if cancel is not None and cancel.is_set():
            raise KeyboardInterrupt("engine creation cancelled")
        os.rename(tmp, final)  # atomic on one filesystem; final does not exist (lock held)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def compiled_and_hashed(site: Path, final_site: Path) -> dict[str, str]:
    """Compile ``site`` (named as it will be, ``final_site``), then hash every file."""
    compileall.compile_dir(str(site), ddir=str(final_site), quiet=2, force=True)
    return site_files.digest(site)  # a link or a FIFO in it: SiteError, an EngineError

"""Which ``keras-nightly`` build ``engine="nightly"`` names: the newest the package index lists
(``pip index versions --pre keras-nightly``, asked once per process), or, when the index cannot
be reached, the newest one created here (said in a warning). The name is pinned before anything
runs, is cached or is recorded: an answer names the build that gave it, with its date.

>>> newest_listed(["3.16.0.dev2026102604", "3.16.0.dev2026102704", "2.5.0.dev2021020510"])
'3.16.0.dev2026102704'
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable

from packaging.version import InvalidVersion, Version

from dtype_explorer.records import NIGHTLY_PACKAGE
from dtype_explorer.runtime._index import EngineError, PackageIndexError, index_releases


def newest_listed(versions: Iterable[str]) -> str | None:
    """The newest dev build among ``versions`` (``None`` when there is none)."""
    builds = []
    for text in versions:
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        if version.is_devrelease:
            builds.append(version)
    return str(max(builds)) if builds else None


def newest(created: Iterable[str]) -> str:
    """``keras-nightly==<the newest build>``: the package index's, else (offline) the newest of
    ``created`` (the builds of the engines created here), with a warning.

    Raises:
        EngineError: the index cannot be reached and no nightly engine was created here.
    """
    try:
        listed = index_releases(NIGHTLY_PACKAGE, pre=True)
    except PackageIndexError as exc:
        build = newest_listed(created)
        if build is None:
            raise EngineError(
                f"engine='nightly' names the newest {NIGHTLY_PACKAGE} build, which the package "
                f"index lists, and no nightly engine was created here to fall back on: {exc}"
            ) from None
        warnings.warn(
            f"the package index could not be reached; engine='nightly' is the newest nightly "
            f"created here, {NIGHTLY_PACKAGE}=={build}, which may not be Keras's main today",
            stacklevel=3,
        )
        return f"{NIGHTLY_PACKAGE}=={build}"
    build = newest_listed(listed)
    if build is None:
        raise EngineError(f"the package index lists no {NIGHTLY_PACKAGE} build; listed: {listed}")
    return f"{NIGHTLY_PACKAGE}=={build}"

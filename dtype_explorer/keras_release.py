"""Which Keras releases dtype-explorer runs on, and the one check of the Keras this Python
would import, made when ``dtype_explorer`` is imported.

The range is Keras 3 from :data:`LOWEST` on (``pyproject.toml``: ``keras>=3.1,<4``; a test
keeps the two in step). 3.0.x lacks ``keras.tree``, which every probe uses; the releases from
3.1.0 on run, and what one of them lacks (a quantization mode, a layer's ``path``, a
``DTypePolicyMap``) is said in its own words where it is asked for. A Keras older than
:data:`LOWEST` is refused at import, with one error naming the range, the release found and
the command that fixes it, instead of failures probe by probe.

The check is cheap: Keras is not imported (on TensorFlow, its default backend, that costs
seconds): the ``keras`` package is found as the import system would find it, and its version
read from the name of the ``keras-<version>.dist-info`` folder beside it (a ``pip install
--target`` folder or an engine's site holds the same). Where no such folder says (Keras from a
source checkout), nothing is refused.

>>> parse("3.10.0"), parse("3.16.0.dev2026102704"), parse("not a version")
((3, 10, 0), (3, 16, 0), None)
>>> supported("3.0.5"), supported("3.1.0"), supported("3.15.1")
(False, True, True)
"""

from __future__ import annotations

import importlib.machinery
import os
import re
from collections.abc import Sequence

#: The lowest Keras release dtype-explorer runs on, and the first it does not (Keras 4).
LOWEST = "3.1.0"
BELOW = "4"
#: The range as pip writes it (``pyproject.toml``'s runtime dependency says the same).
REQUIREMENT = f"keras>={LOWEST},<{BELOW}"

_RELEASE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")
#: The distributions that install the ``keras`` package (Keras's main is ``keras-nightly``).
_DISTRIBUTIONS = ("keras", "keras_nightly")


class KerasReleaseError(ImportError):
    """The Keras this Python imports is older than the lowest release dtype-explorer runs on."""


def parse(version: str) -> tuple[int, int, int] | None:
    """A version's release numbers (major, minor, micro), ``None`` for text that has none."""
    found = _RELEASE.match(version)
    if found is None:
        return None
    major, minor, micro = found.groups()
    return int(major), int(minor), int(micro or 0)


def supported(version: str) -> bool:
    """Whether Keras ``version`` is recent enough: :data:`LOWEST` or later (a version that
    cannot be read is let be; a Keras 4, which pip does not install beside dtype-explorer, is
    left to say what it lacks)."""
    release = parse(version)
    lowest = parse(LOWEST)
    return release is None or lowest is None or release >= lowest


def installed(path: Sequence[str] | None = None) -> tuple[str, str] | None:
    """The version and folder of the ``keras`` package the import system finds first on
    ``path`` (default ``sys.path``), read without importing it; ``None`` where there is none
    or no ``dist-info`` folder beside it names its version.

    Args:
        path: the folders to search, as ``sys.path`` lists them.

    Returns:
        ``(version, folder)``, or ``None``.
    """
    spec = importlib.machinery.PathFinder.find_spec("keras", path)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = next(iter(spec.submodule_search_locations))
    site = os.path.dirname(folder)
    try:
        names = os.listdir(site)
    except OSError:
        return None
    for name in sorted(names):
        stem, _, suffix = name.rpartition(".")
        project, _, version = stem.partition("-")
        if suffix == "dist-info" and project.lower() in _DISTRIBUTIONS and version:
            return version, folder
    return None


def check(path: Sequence[str] | None = None) -> None:
    """Refuse a Keras older than :data:`LOWEST`, naming the range, the release found and how to
    get a supported one.

    Args:
        path: the folders to search (default ``sys.path``).

    Raises:
        KerasReleaseError: the Keras found is older than :data:`LOWEST`.
    """
    found = installed(path)
    if found is None or supported(found[0]):
        return
    version, folder = found
    raise KerasReleaseError(
        f"dtype-explorer runs on Keras {LOWEST} and later Keras 3 releases ({REQUIREMENT}); "
        f"this Python imports Keras {version} (from {folder}). Install a supported Keras: "
        f'pip install -U "{REQUIREMENT}" (then restart the kernel or the process).'
    )

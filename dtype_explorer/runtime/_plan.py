"""What an engine installs: the packages besides the release (the Keras 2 engine's extras, the
tf_keras series matching the installed TensorFlow), and the check that pip's plan only adds
packages to the installed environment, never replaces one (``refuse_replacements``).

>>> next_minor("2.21")
'2.22'
"""

from __future__ import annotations

from importlib import metadata

from dtype_explorer.runtime._index import EngineError, canon
from dtype_explorer.versions import library_version

#: What the Keras 2 engine installs beside tf_keras: the packages its users' code imports
#: (``hub.KerasLayer``), resolved with it against the installed TensorFlow. tensorflow-hub
#: 0.16.1 imports ``pkg_resources``, which setuptools 81 and later no longer ship.
KERAS2_EXTRAS = ("tensorflow-hub", "setuptools<81")
#: Installed distributions an engine's site may shadow: build tooling, never a backend.
SHADOWABLE = ("setuptools",)


def refuse_replacements(wanted: str, package: str, plan: list[tuple[str, str]]) -> None:
    """An engine only adds packages: one whose plan would replace an installed distribution
    with another release (another tensorflow, numpy, ...) cannot run with the installed
    backends. The same release installed already (tensorflow-hub, in the Keras 2 kernel that
    runs on an engine) replaces nothing."""
    installed = {canon(d.metadata["Name"] or ""): d.version for d in metadata.distributions()}
    replaced = [
        f"{n}=={v} (installed: {installed[canon(n)]})"
        for n, v in plan
        if canon(n) != canon(package)
        and installed.get(canon(n), v) != v  # the same release installed already: no change
        and canon(n) not in SHADOWABLE
    ]
    if replaced:
        raise EngineError(
            f"{wanted} cannot run with the installed backends: it needs {', '.join(replaced)}. "
            "An engine only adds a Keras release beside the installed libraries, it never "
            "replaces them; pick a release whose requirements the installed versions meet"
            + (
                " (tf_keras: the one matching tensorflow, engine='tf_keras')"
                if "tf" in wanted
                else ""
            )
        )


def tf_keras_series() -> str:
    """``"2.21"``: the tf_keras series matching the installed tensorflow."""
    tf = library_version("tensorflow")
    if tf == "missing":
        raise EngineError("the Keras 2 engine (tf_keras) needs tensorflow installed; it is not")
    return ".".join(tf.split(".")[:2])


def next_minor(series: str) -> str:
    major, minor = series.split(".")
    return f"{major}.{int(minor) + 1}"

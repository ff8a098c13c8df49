"""Engines: which Keras answers a probe, beside the backend.

An engine is named by a short text (``ProbeSpec.engine``): ``None`` is the installed Keras,
``"keras==3.11.3"`` a Keras 3 release layered over the installed backends, ``"tf_keras"``
Keras 2 (the ``tf_keras`` release that matches the installed TensorFlow, on the tensorflow
backend only), ``"keras-nightly==3.16.0.dev2026102704"`` Keras's main as the ``keras-nightly``
package built it that day, and ``"nightly"`` the newest such build (a moving name, which
``dx.engines.pin`` turns into the exact one before anything runs or is cached).
:func:`engine_spec` checks such a text and writes it one way; :class:`Engine` is a created
engine as ``dx.engines.list()`` shows it.

>>> engine_spec("3.11.3"), engine_spec("tf_keras"), engine_spec(None)
('keras==3.11.3', 'tf_keras', None)
>>> engine_package("tf_keras==2.21.0")
('tf_keras', '2.21.0')
>>> engine_spec("keras-nightly"), engine_package("keras_nightly==3.16.0.dev2026102704")
('nightly', ('keras-nightly', '3.16.0.dev2026102704'))
>>> engine_label("keras-nightly==3.16.0.dev2026102704")
'keras-nightly==3.16.0.dev2026102704 (Keras main, nightly of 2026-10-27 04h)'
"""

from __future__ import annotations

import re
from typing import Any, Literal

from packaging.version import Version
from pydantic import Field

from dtype_explorer.errors import InvalidSpecError, closest, received
from dtype_explorer.records._base import Record

EnginePackage = Literal["keras", "tf_keras", "keras-nightly"]
#: The package Keras's main is built into every night (it installs the ``keras`` module).
NIGHTLY_PACKAGE = "keras-nightly"
#: The moving name of the newest ``keras-nightly`` build; pinned before use (``dx.engines.pin``).
NIGHTLY = "nightly"
#: The forms an engine is named by (anything else is refused before pip ever sees it).
ENGINE_FORMS = (
    "None (the installed Keras)",
    "'keras==3.X.Y' (a Keras 3 release)",
    "'nightly' (the newest keras-nightly build: Keras's main)",
    "'keras-nightly==3.X.Y.devYYYYMMDDHH' (one nightly build)",
    "'tf_keras'",
)
_KERAS = re.compile(r"(?:keras\s*==\s*)?(3\.\d{1,3}\.\d{1,3})")
_TF_KERAS = re.compile(r"tf[_-]keras(?:\s*==\s*(2\.\d{1,3}\.\d{1,3}))?")
_NIGHTLY = re.compile(r"(?:keras[_-])?nightly(?:\s*==\s*(\d{1,3}\.\d{1,3}\.\d{1,3}\.dev\d{10}))?")
#: A Keras 3 release named another way than ``keras==3.X.Y`` (one ``=``, ``>=``, no patch).
_KERAS_LIKE = re.compile(r"(?:keras\s*[=<>~!]{0,3}\s*)?(3\.\d{1,3})(\.\d{1,3})?", re.IGNORECASE)
#: A nightly build's date, as its version carries it: ``.devYYYYMMDDHH``.
_BUILT = re.compile(r"\.dev(\d{4})(\d{2})(\d{2})(\d{2})$")
#: The Keras 2 engine runs on this backend only.
TF_KERAS_BACKEND = "tensorflow"


def engine_spec(value: Any) -> str | None:
    """``value`` checked and written one way: ``None``, ``"keras==3.X.Y"``, ``"nightly"``,
    ``"keras-nightly==3.X.Y.devYYYYMMDDHH"``, ``"tf_keras"`` or ``"tf_keras==2.X.Y"``. Only
    these forms pass, so no pip option can ride along.

    Args:
        value: ``None``, ``"keras==3.12.0"`` (or just ``"3.12.0"``), ``"nightly"`` (or
            ``"keras-nightly"``), ``"keras-nightly==3.16.0.dev2026102704"``, ``"tf_keras"``
            or ``"tf_keras==2.21.0"``.

    Returns:
        The engine's name, or ``None`` for the installed Keras.

    Raises:
        InvalidSpecError: any other value, repeated, with the closest form.

    >>> engine_spec("keras == 3.12.0"), engine_spec("keras==3.11.03")
    ('keras==3.12.0', 'keras==3.11.3')
    >>> engine_spec("keras==3.12")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dtype_explorer.errors.InvalidSpecError: engine must be None (the installed Keras), ...
    >>> engine_spec("keras=3.11")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dtype_explorer.errors.InvalidSpecError: engine must be ...; did you mean 'keras==3.11.Y'? ...
    >>> engine_spec("nightlyy")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dtype_explorer.errors.InvalidSpecError: engine must be ...; did you mean 'nightly'?
    """
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        keras = _KERAS.fullmatch(text)
        if keras:  # (one name per release: "3.11.03" is pip's 3.11.3, so is the engine)
            return f"keras=={Version(keras.group(1))}"
        nightly = _NIGHTLY.fullmatch(text)
        if nightly:
            build = nightly.group(1)
            return f"{NIGHTLY_PACKAGE}=={Version(build)}" if build else NIGHTLY
        tf_keras = _TF_KERAS.fullmatch(text)
        if tf_keras:
            return f"tf_keras=={Version(tf_keras.group(1))}" if tf_keras.group(1) else "tf_keras"
    raise InvalidSpecError(
        f"engine must be {', '.join(ENGINE_FORMS[:-1])} or {ENGINE_FORMS[-1]} (Keras 2, on "
        f"tensorflow); received: {received(value)}{_close_form(value)}"
    )


def _close_form(value: Any) -> str:
    """``"; did you mean 'nightly'?"`` for a name close to a form's, else ``""``."""
    if not isinstance(value, str):
        return ""
    text = value.strip()
    version = text.partition("==")[2].strip()
    if ".dev" in version and not text.startswith(NIGHTLY_PACKAGE):  # "keras==3.16.0.dev..."
        return f"; a dev build is named {NIGHTLY_PACKAGE}=={version}"
    if ".dev" in version:
        return "; a nightly's version is 3.X.Y.devYYYYMMDDHH (its date and hour)"
    release = _KERAS_LIKE.fullmatch(text)
    if release:  # "keras=3.11.3", "keras>=3.11", "3.11": a Keras 3 release, misnamed
        minor, patch = release.groups()
        if patch:
            return f"; did you mean 'keras=={minor}{patch}'?"
        return f"; did you mean 'keras=={minor}.Y'? (a release is named by all three numbers)"
    match = closest(text.partition("==")[0].strip(), (NIGHTLY, NIGHTLY_PACKAGE, "tf_keras"))
    return f"; did you mean {match!r}?" if match else ""


def is_moving(name: str | None) -> bool:
    """Whether an engine's name (:func:`engine_spec`'s) names no one build: ``"nightly"``
    is whichever build is newest, so it is pinned (``dx.engines.pin``) before anything runs,
    is cached or is recorded.

    >>> is_moving("nightly"), is_moving("keras-nightly==3.16.0.dev2026102704")
    (True, False)
    """
    return name == NIGHTLY


def pinned_engine(value: Any) -> str | None:
    """:func:`engine_spec` of a name that names one build: what a probe's spec holds.

    Raises:
        InvalidSpecError: ``"nightly"`` (``dx.engines.pin`` names the newest build first), or
            any value :func:`engine_spec` refuses.

    >>> pinned_engine("nightly")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dtype_explorer.errors.InvalidSpecError: a probe's engine names one build: ...
    """
    name = engine_spec(value)
    if is_moving(name):
        raise InvalidSpecError(
            "a probe's engine names one build: 'nightly' is whichever keras-nightly is newest, "
            "so dx.engines.pin('nightly') names it first (dx.probe, dx.bisect and the other "
            f"entry points do); received: engine={received(value)}"
        )
    return name


def nightly_date(version: str) -> str | None:
    """The date and hour a nightly build carries in its version (``.devYYYYMMDDHH``), or
    ``None`` for a version that carries none (a release).

    >>> nightly_date("3.16.0.dev2026102704"), nightly_date("3.15.1")
    ('2026-10-27 04h', None)
    """
    built = _BUILT.search(version)
    if built is None:
        return None
    year, month, day, hour = built.groups()
    return f"{year}-{month}-{day} {hour}h"


def answered_by(engine: str | None, versions: dict[str, str]) -> str:
    """The Keras that answered, as an answer names it: ``"keras 3.11.3"``, ``"keras 3.15.1
    (installed)"``, ``"keras 3.16.0.dev2026102704 (nightly 2026-10-27 04h)"``: the version
    its worker reported (``versions["keras"]``), else the engine's.

    >>> answered_by(None, {"keras": "3.15.1"}), answered_by("keras==3.11.3", {})
    ('keras 3.15.1 (installed)', 'keras 3.11.3')
    """
    version = versions.get("keras") or (engine or "").partition("==")[2] or "?"
    if engine is None:
        return f"keras {version} (installed)"
    built = nightly_date(version) if engine.startswith(NIGHTLY_PACKAGE) else None
    return f"keras {version}" + (f" (nightly {built})" if built else "")


def release_label(version: str) -> str:
    """A Keras version as a bisection names it: a nightly build with its date.

    >>> release_label("3.15.1"), release_label("3.16.0.dev2026102704")
    ('3.15.1', '3.16.0.dev2026102704 (nightly 2026-10-27 04h)')
    """
    date = nightly_date(version)
    return f"{version} (nightly {date})" if date else version


def engine_label(name: str | None) -> str:
    """An engine's name as every answer shows it: a nightly build with its date.

    >>> engine_label(None), engine_label("keras==3.11.3")
    ('keras (installed)', 'keras==3.11.3')
    """
    if name is None:
        return "keras (installed)"
    date = nightly_date(name) if name.startswith(NIGHTLY_PACKAGE) else None
    return f"{name} (Keras main, nightly of {date})" if date else name


def check_engine_backend(engine: str | None, backend: str) -> None:
    """Refuse a backend the engine cannot run on: Keras 2 runs on tensorflow only.

    Args:
        engine: an engine's name (checked by :func:`engine_spec`).
        backend: the backend asked for.

    Raises:
        InvalidSpecError: Keras 2 asked on another backend.

    >>> check_engine_backend("tf_keras", "tensorflow")
    """
    name = engine_spec(engine)
    if name is not None and name.startswith("tf_keras") and backend != TF_KERAS_BACKEND:
        raise InvalidSpecError(
            f"the Keras 2 engine ({name!r}) runs on the tensorflow backend only; "
            f"received: backend={backend!r}"
        )


def engine_package(spec: str) -> tuple[EnginePackage, str | None]:
    """``(package, version)`` of an engine's name; the version is ``None`` for ``"tf_keras"``
    (the release matching the installed TensorFlow).

    Args:
        spec: an engine's name (checked by :func:`engine_spec`).

    Returns:
        ``("keras", "3.12.0")``, ``("tf_keras", None)``, ``("keras-nightly", None)`` for
        ``"nightly"``, ...
    """
    name = engine_spec(spec)
    if name is None:
        raise InvalidSpecError("the installed Keras (engine=None) is not a created engine")
    if name == NIGHTLY:
        return NIGHTLY_PACKAGE, None
    package, _, version = name.partition("==")
    return package, version or None  # type: ignore[return-value]


class Engine(Record):
    """A created engine: a Keras release (or ``tf_keras``, or a ``keras-nightly`` build)
    installed on its own, used by its workers on top of the installed backends.

    ``spec`` names it pinned (``"keras==3.11.3"``, ``"tf_keras==2.21.0"``,
    ``"keras-nightly==3.16.0.dev2026102704"``); ``packages`` is
    what was installed (``keras==3.0.5`` brings ``dm-tree``); ``base`` holds the versions of
    the installed libraries it was checked with; ``disk_bytes`` is its size on disk.
    """

    spec: str
    package: EnginePackage
    version: str
    path: str
    disk_bytes: int = 0
    packages: tuple[str, ...] = ()
    base: dict[str, str] = Field(default_factory=dict)
    python: str = ""
    created: str = ""
    install_seconds: float | None = None
    #: The SHA-256 over its installed files, recorded at creation (``None``: created before
    #: dtype-explorer recorded it; such an engine refuses to start).
    site_sha256: str | None = None

    @property
    def name(self) -> str:
        """The engine's directory name: ``keras-3.11.3``, ``tf_keras-2.21.0``,
        ``keras-nightly-3.16.0.dev2026102704``."""
        return f"{self.package}-{self.version}"

    @property
    def site(self) -> str:
        """The directory its workers put first on ``sys.path``."""
        return f"{self.path}/site"

    @property
    def kernel_name(self) -> str | None:
        """The Jupyter kernel of a Keras 2 engine (``dtype-explorer-tf_keras-2.21.0``: its
        notebooks' ``tf.keras`` is Keras 2); ``None`` for a Keras 3 engine, which has none."""
        return f"dtype-explorer-{self.name}".lower() if self.package == "tf_keras" else None

    @property
    def backends(self) -> tuple[str, ...] | None:
        """The backends it runs on: ``("tensorflow",)`` for Keras 2, ``None`` for every one."""
        return (TF_KERAS_BACKEND,) if self.package == "tf_keras" else None

    def versions(self) -> dict[str, str]:
        """What a result of this engine carries in ``versions``: the Keras that answered
        (``keras``; for Keras 2 also ``tf_keras``; for a nightly build its date, ``nightly``)
        and the engine's name."""
        found = {"keras": self.version, "engine": self.spec}
        if self.package == "tf_keras":
            found["tf_keras"] = self.version
        date = nightly_date(self.version) if self.package == NIGHTLY_PACKAGE else None
        if date is not None:
            found["nightly"] = date
        return found

    def __str__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str | None:
        return None  # the repr

    @property
    def label(self) -> str:
        """Its name as answers show it (:func:`engine_label`: a nightly with its date)."""
        return engine_label(self.spec)

    def summary(self) -> str:
        """``keras==3.11.3  17.0 MiB  /root/.cache/dtype-explorer/engines/keras-3.11.3``."""
        return f"{self.label:18s} {self.disk_bytes / 2**20:6.1f} MiB  {self.path}"

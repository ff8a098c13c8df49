"""Engines: which Keras answers a probe, beside the backend.

An engine is named by a short text (``ProbeSpec.engine``): ``None`` is the installed Keras,
``"keras==3.11.3"`` a Keras 3 release layered over the installed backends, ``"tf_keras"``
Keras 2 (the ``tf_keras`` release that matches the installed TensorFlow, on the tensorflow
backend only). :func:`engine_spec` checks such a text and writes it one way; :class:`Engine`
is a created engine as ``dx.engines.list()`` shows it.

>>> engine_spec("3.11.3"), engine_spec("tf_keras"), engine_spec(None)
('keras==3.11.3', 'tf_keras', None)
>>> engine_package("tf_keras==2.21.0")
('tf_keras', '2.21.0')
"""

from __future__ import annotations

import re
from typing import Any, Literal

from packaging.version import Version
from pydantic import Field

from dtype_explorer.errors import InvalidSpecError, received
from dtype_explorer.records._base import Record

EnginePackage = Literal["keras", "tf_keras"]
#: The forms an engine is named by (anything else is refused before pip ever sees it).
ENGINE_FORMS = ("None (the installed Keras)", "'keras==3.X.Y' (a Keras 3 release)", "'tf_keras'")
_KERAS = re.compile(r"(?:keras\s*==\s*)?(3\.\d{1,3}\.\d{1,3})")
_TF_KERAS = re.compile(r"tf[_-]keras(?:\s*==\s*(2\.\d{1,3}\.\d{1,3}))?")
#: The Keras 2 engine runs on this backend only.
TF_KERAS_BACKEND = "tensorflow"


def engine_spec(value: Any) -> str | None:
    """``value`` checked and written one way: ``None``, ``"keras==3.X.Y"``, ``"tf_keras"`` or
    ``"tf_keras==2.X.Y"``. Only these forms pass, so no pip option can ride along.

    Args:
        value: ``None``, ``"keras==3.12.0"`` (or just ``"3.12.0"``), ``"tf_keras"`` or
            ``"tf_keras==2.21.0"``.

    Returns:
        The engine's name, or ``None`` for the installed Keras.

    Raises:
        InvalidSpecError: any other value, repeated.

    >>> engine_spec("keras == 3.12.0"), engine_spec("keras==3.11.03")
    ('keras==3.12.0', 'keras==3.11.3')
    >>> engine_spec("keras==3.12")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dtype_explorer.errors.InvalidSpecError: engine must be None (the installed Keras), ...
    """
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        keras = _KERAS.fullmatch(text)
        if keras:  # (one name per release: "3.11.03" is pip's 3.11.3, so is the engine)
            return f"keras=={Version(keras.group(1))}"
        tf_keras = _TF_KERAS.fullmatch(text)
        if tf_keras:
            return f"tf_keras=={Version(tf_keras.group(1))}" if tf_keras.group(1) else "tf_keras"
    raise InvalidSpecError(
        f"engine must be {', '.join(ENGINE_FORMS[:-1])} or {ENGINE_FORMS[-1]} (Keras 2, on "
        f"tensorflow); received: {received(value)}"
    )


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
        ``("keras", "3.12.0")``, ``("tf_keras", None)``, ...
    """
    name = engine_spec(spec)
    if name is None:
        raise InvalidSpecError("the installed Keras (engine=None) is not a created engine")
    package, _, version = name.partition("==")
    return package, version or None  # type: ignore[return-value]


class Engine(Record):
    """A created engine: a Keras release (or ``tf_keras``) installed on its own, used by its
    workers on top of the installed backends.

    ``spec`` names it pinned (``"keras==3.11.3"``, ``"tf_keras==2.21.0"``); ``packages`` is
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
        """The engine's directory name: ``keras-3.11.3``, ``tf_keras-2.21.0``."""
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
        (``keras``; for Keras 2 also ``tf_keras``) and the engine's name."""
        found = {"keras": self.version, "engine": self.spec}
        if self.package == "tf_keras":
            found["tf_keras"] = self.version
        return found

    def __str__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str | None:
        return None  # the repr

    def summary(self) -> str:
        """``keras==3.11.3  17.0 MiB  /root/.cache/dtype-explorer/engines/keras-3.11.3``."""
        return f"{self.spec:18s} {self.disk_bytes / 2**20:6.1f} MiB  {self.path}"

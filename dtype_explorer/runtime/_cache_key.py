"""The result cache's key for the installed Keras (``cache.key`` adds an engine's stamp): the
full spec, the versions that answer it, where it runs and the settings a worker starts with,
read without importing a backend. Its own module, with no record imported, so that a cached
read (:mod:`dtype_explorer.runtime.cache_read`, :mod:`dtype_explorer.runtime.printed`)
computes it without the cache's storage stack.

>>> from dtype_explorer.records import ProbeSpec
>>> spec = ProbeSpec(target="Dense", input_dtypes=("float32",), policy="float32",
...                  backend="numpy", kwargs={"units": 2}, shapes=((2, 3),))
>>> installed_key(spec).startswith(spec.cache_key() + "|")
True
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

from dtype_explorer.versions import library_version, placement, settings, versions

if TYPE_CHECKING:
    from dtype_explorer.records import ProbeSpec


def installed_key(spec: ProbeSpec) -> str:
    """The cache key of ``spec`` answered by the installed Keras (no engine's stamp)."""
    return f"{spec.cache_key()}|{answered_by(spec.backend, spec.mode)}"


def answered_by(backend: str, mode: str = "call") -> str:
    """The part of every key that says what answers on ``backend`` in ``mode``: the versions,
    where it runs and the settings a worker starts with (a stored answer's key and a printed
    one's). A ``dataset`` probe runs inside ``tf.data`` on any backend: TensorFlow's version
    (``"missing"`` when it is not installed) is in its key too."""
    return f"{_stamp(backend, mode == 'dataset')}|{compact(placement())}|{compact(settings())}"


@functools.cache
def _stamp(backend: str, with_tensorflow: bool) -> str:
    found = versions(backend)
    if with_tensorflow:
        found.setdefault("tensorflow", library_version("tensorflow"))
    return compact(found)


def compact(values: dict[str, Any]) -> str:
    """``values`` as the key writes them: sorted JSON without spaces."""
    return json.dumps(values, sort_keys=True, separators=(",", ":"))

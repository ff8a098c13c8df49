"""Keras's own objects in a worker, checked for a user's changes: a fingerprint of what Keras
and its backend hold, taken before a user's code first runs, compared and put back later.

A user's layer runs in the same process as later built-in probes. The settings check
(:mod:`._keras_state`) sees floatx, the policy and the backends' flags, not a patched class
(``keras.layers.Dense.call = ...``), a replaced module attribute (``keras.ops.matmul = ...``)
or an impostor in the custom-object registry (``get_custom_objects()["Dense"] = ...``). A
:class:`Snapshot` holds, by identity:

* every ``keras`` module's ``__dict__`` (``keras.src.*``, the public ``keras.*`` API, the
  backend's ``keras.src.backend.<name>``), value by value;
* the ``__dict__`` of every class those modules define (layers, ops' ``Operation`` classes,
  ``Layer``, ``KerasTensor``, ``DTypePolicy``, ...), and the code of each function in it (a
  ``__code__`` swapped in place keeps the function's identity);
* the custom-object registry (``GLOBAL_CUSTOM_OBJECTS`` and ``GLOBAL_CUSTOM_NAMES``);
* the top-level dicts of the backend libraries imported (``numpy``, ``jax.numpy``, ...).

Modules imported after the snapshot, submodules a lazy import attached to a package, and the
empty ``__annotations__`` Python gives a class when it is first read, are not changes.
:func:`changes` names what differs (a registry's class keys too); :func:`restore` puts the
snapshot's objects back and says what it could not.

>>> before = snapshot()                                        # doctest: +SKIP
>>> import keras; keras.layers.Dense.call = lambda self, x: x  # doctest: +SKIP
>>> changes(before)                                            # doctest: +SKIP
['keras.src.layers.core.dense.Dense.call']
>>> restore(before)                                            # doctest: +SKIP
(['keras.src.layers.core.dense.Dense.call'], [])
"""

from __future__ import annotations

import dataclasses
import operator
import sys
import types
from typing import Any

#: Backend libraries whose top-level namespace is checked too (when imported).
LIBRARY_MODULES = (
    "numpy",
    "jax",
    "jax.numpy",
    "jax.lax",
    "torch",
    "torch.nn.functional",
    "tensorflow",
    "ml_dtypes",
)
_PACKAGES = ("keras", "tf_keras")
#: Names a module's dict gains by itself (``warnings`` keeps its registry there).
_IGNORED = frozenset({"__warningregistry__"})
_REGISTRY = "keras.src.saving.object_registration"
_REGISTRY_DICTS = ("GLOBAL_CUSTOM_OBJECTS", "GLOBAL_CUSTOM_NAMES")


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """Keras's objects by name, as a shallow copy of each namespace (which keeps the objects
    themselves alive, so that their identities stay theirs and they can be put back)."""

    modules: dict[str, tuple[Any, dict[str, Any]]]  # name -> (module, its dict then)
    classes: dict[str, tuple[type, dict[str, Any], dict[str, Any]]]  # + each function's code
    registry: dict[str, tuple[dict, dict[str, Any]]]


def _modules() -> dict[str, types.ModuleType]:
    found = {
        name: module
        for name, module in list(sys.modules.items())
        if isinstance(module, types.ModuleType) and name.partition(".")[0] in _PACKAGES
    }
    found.update({n: sys.modules[n] for n in LIBRARY_MODULES if n in sys.modules})
    return found


def _namespace(module: types.ModuleType) -> dict[str, Any]:
    namespace = dict(vars(module))
    for name in _IGNORED & namespace.keys():
        del namespace[name]
    return namespace


def _codes(namespace: dict[str, Any]) -> dict[str, Any]:
    return {n: v.__code__ for n, v in namespace.items() if isinstance(v, types.FunctionType)}


def snapshot() -> Snapshot:
    """Read every Keras module, class and registry now (a few tens of milliseconds).

    Returns:
        The snapshot, for :func:`changes` and :func:`restore`.
    """
    modules = {name: (m, _namespace(m)) for name, m in _modules().items()}
    classes = {}
    for name, (_module, namespace) in modules.items():
        if name.partition(".")[0] not in _PACKAGES:
            continue
        for value in namespace.values():
            if isinstance(value, type) and _ours(value):
                own = dict(vars(value))
                classes.setdefault(_qualified(value), (value, own, _codes(own)))
    registry_module = sys.modules.get(_REGISTRY)
    registry = {
        attr: (table, dict(table))
        for attr in _REGISTRY_DICTS
        if isinstance(table := getattr(registry_module, attr, None), dict)
    }
    return Snapshot(modules, classes, registry)


def _ours(cls: type) -> bool:
    return str(getattr(cls, "__module__", "")).partition(".")[0] in _PACKAGES


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _differs(before: dict[str, Any], now: dict[str, Any], *, modules: bool) -> list[str]:
    """Names whose value is no longer the same object (or is gone, or new; for a module's
    dict, a new submodule attribute is not a change)."""
    if modules and not _IGNORED.isdisjoint(now):
        now = {n: v for n, v in now.items() if n not in _IGNORED}
    if before.keys() == now.keys() and all(map(operator.is_, before.values(), now.values())):
        return []  # the usual case, at C speed
    changed = [n for n, v in before.items() if n not in now or now[n] is not v]
    # a registry's keys may be classes (GLOBAL_CUSTOM_NAMES): ordered by their names
    return sorted(changed + _added(before, now, modules=modules), key=str)


def changes(before: Snapshot) -> list[str]:
    """What differs from ``before``, by dotted name (``keras.src.layers.core.dense.Dense.call``,
    ``GLOBAL_CUSTOM_OBJECTS['Dense']``).

    Args:
        before: a :func:`snapshot`.

    Returns:
        The changed names, sorted; ``[]`` when Keras is as it was.
    """
    found = []
    for name, (module, namespace) in before.modules.items():
        found += [f"{name}.{n}" for n in _differs(namespace, vars(module), modules=True)]
    for name, (cls, namespace, codes) in before.classes.items():
        now = vars(cls)
        found += [f"{name}.{n}" for n in _differs(namespace, dict(now), modules=False)]
        found += [
            f"{name}.{n}.__code__"
            for n, c in codes.items()
            if now.get(n) is namespace[n] and _code(now[n]) is not c
        ]
    for attr, (table, contents) in before.registry.items():
        found += [f"{attr}[{n!r}]" for n in _differs(contents, table, modules=False)]
    return sorted(set(found))


def _code(value: Any) -> Any:
    return getattr(value, "__code__", None)


def restore(before: Snapshot) -> tuple[list[str], list[str]]:
    """Put back every object that differs from ``before``.

    Args:
        before: a :func:`snapshot`.

    Returns:
        ``(restored, unrestorable)``: the names put back, and those still different
        afterwards (a process with any of those must not answer again).
    """
    changed = changes(before)
    if not changed:
        return [], []
    for _name, (module, namespace) in before.modules.items():
        _put_back(vars(module), namespace, lambda n, v, m=module: setattr(m, n, v))
        for n in _added(namespace, vars(module), modules=True):
            delattr(module, n)
    for _name, (cls, namespace, codes) in before.classes.items():
        _put_back(dict(vars(cls)), namespace, lambda n, v, c=cls: setattr(c, n, v))
        for n in _added(namespace, dict(vars(cls)), modules=False):
            delattr(cls, n)
        for n, code in codes.items():
            function = vars(cls).get(n)
            if isinstance(function, types.FunctionType) and function.__code__ is not code:
                function.__code__ = code
    for _attr, (table, contents) in before.registry.items():
        table.clear()
        table.update(contents)
    still = set(changes(before))
    return [n for n in changed if n not in still], sorted(still)


def _put_back(now: dict[str, Any], before: dict[str, Any], put: Any) -> None:
    for n, v in before.items():
        if n not in now or now[n] is not v:
            try:
                put(n, v)
            except (AttributeError, TypeError):  # a read-only attribute: reported by restore
                continue


def _added(before: dict[str, Any], now: dict[str, Any], *, modules: bool) -> list[str]:
    return [
        n
        for n, v in list(now.items())
        if n not in before
        and n not in _IGNORED
        and not (modules and isinstance(v, types.ModuleType))
        and not _lazy_annotations(n, v)
    ]


def _lazy_annotations(name: Any, value: Any) -> bool:
    """Python (3.10+) stores an empty ``__annotations__`` in a class's dict the first time
    anyone reads it (TensorFlow's tracing does): not a change to the class."""
    return name == "__annotations__" and isinstance(value, dict) and not value

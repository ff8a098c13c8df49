"""Which layer a spec names, and what makes it for the build stage: the catalog's entry (or a
user layer's, :func:`layer_entry`) and the class the build calls (:func:`layer_class`): the
catalog's class, the user's, or an :class:`InstanceMaker` making fresh copies of a user's
instance.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import catalog
from dtype_explorer.keras_run.catalog import LayerEntry, OpEntry
from dtype_explorer.keras_run.model import Packed
from dtype_explorer.keras_run.probe._observe import Invalid
from dtype_explorer.keras_run.probe._stages import input_count, timed
from dtype_explorer.records import ProbeSpec, Supplied


def layer_entry(spec: ProbeSpec, target: Any) -> LayerEntry:
    """The entry a layer probe runs with: the catalog's for a catalog name; for a user's
    class or instance, :func:`catalog.custom_entry`, except that an instance of Keras's own
    layer class (``Packed.keras_class``) keeps that class's contract, group and input roles
    from the catalog (an adapted ``TextVectorization`` chooses its output dtype itself, as the
    class does: the policy rule does not judge it), with the user's inputs, not the catalog's.

    Args:
        spec: the question.
        target: what was asked about: ``None`` for a catalog name, a user's class, or the
            instance as packed (``Packed``).

    Returns:
        The ``LayerEntry``.

    Raises:
        InvalidSpecError: the name is an op's, or a layer the catalog cannot probe alone.
    """
    if not spec.target.startswith("custom:"):
        found = catalog.entry(spec.target)
        if isinstance(found, OpEntry):
            raise InvalidSpecError(f"{spec.target!r} is an op, not a layer")
        if found.skip:
            raise InvalidSpecError(f"{found.name} cannot be probed standalone: {found.skip}")
        return found
    if target is None:
        raise InvalidSpecError(f"{spec.target!r} needs the layer itself (target=...)")
    custom = catalog.custom_entry(spec.target, getattr(target, "call", None), input_count(spec))
    keras_class = getattr(target, "keras_class", None) if isinstance(target, Packed) else None
    own = catalog.entry(keras_class) if keras_class in catalog.names() else None
    if not isinstance(own, LayerEntry):
        return custom
    return dataclasses.replace(custom, contract=own.contract, group=own.group, roles=own.roles)


def layer_class(
    spec: ProbeSpec, target: Any, timings: dict[str, float] | None = None
) -> Callable[..., Any]:
    """What the build stage calls to make the layer: the catalog's class, the user's class,
    or, for the user's instance (``Packed``), an :class:`InstanceMaker`: a fresh copy of it as
    it is, or, where ``spec.policy`` is not its own, rebuilt from its config under that policy
    (its ``notes`` say what that dropped)."""
    import keras

    if target is None:
        return getattr(keras.layers, catalog.entry(spec.target).name)
    if isinstance(target, Packed):
        return InstanceMaker(target, spec.policy, timings if timings is not None else {})
    return target


class InstanceMaker:
    """Makes the probed copies of a user's instance: each call a fresh copy from its archive
    (or rebuilt under the asked policy); :meth:`widened` the numerics reference's copy.

    Attributes:
        notes: the ``Supplied`` record of a rebuild under another policy, else ``()``.
    """

    def __init__(self, packed: Packed, policy: str, timings: dict[str, float]) -> None:
        self.packed = packed
        self.rebuild = policy != packed.policy
        self.policy = policy
        self.notes: tuple[Supplied, ...] = ()
        with timed(timings, "load_ms"):
            try:
                first = self._make()
            except Exception as error:
                raise Invalid(error, "load") from error
        self._first: list[Any] = [first]

    def _make(self) -> Any:
        if not self.rebuild:
            return self.packed.load()
        layer, note = self.packed.rebuilt(self.policy)
        self.notes = (note,)
        return layer

    def __call__(self, **kwargs: Any) -> Any:
        return self._first.pop() if self._first else self._make()

    def serialized(self) -> Any:
        """The copy the probe is about to call, as ``keras.saving.serialize_keras_object``
        writes it (for "copy as code"); ``None`` once it was taken."""
        import keras

        return keras.saving.serialize_keras_object(self._first[0]) if self._first else None

    def widened(self, dtype: str) -> Any:
        """A copy under the policy ``dtype``, for the numerics reference."""
        return self.packed.widened(dtype)

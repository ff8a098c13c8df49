"""keras-hub's own round trip (``check_model(..., mode="save")`` on a keras-hub backbone or
task): ``model.save_to_preset(dir)``, then ``type(model).from_preset(dir)``, once as saved and
once with ``dtype=`` the model's policy, each compared as the other formats are
(:mod:`._roundtrip`). keras-hub is never imported here: a model that has ``save_to_preset``
and a class with ``from_preset`` is one of its models (``keras_hub.models.Backbone`` and
``Task``). keras-hub resolves a preset's dtype itself: as saved when ``dtype=`` is given; a
float policy saved becomes Keras's global policy when it is not (a bfloat16 backbone loads
back float32 under the default policy); a ``DTypePolicyMap`` (a quantized model) is kept.

>>> class Plain:
...     pass
>>> preset_formats(Plain())
()
"""

from __future__ import annotations

import os
from typing import Any

#: The label a preset round trip carries in the report (``RoundTrip.format``).
PRESET = "preset"


def preset_formats(model: Any) -> tuple[str, ...]:
    """The preset round trips that apply to ``model``: none unless it is a keras-hub model;
    ``"preset"`` (``from_preset`` as saved) and ``"preset, dtype=<policy>"``."""
    if not callable(getattr(model, "save_to_preset", None)):
        return ()
    if not callable(getattr(type(model), "from_preset", None)):
        return ()
    return (PRESET, f"{PRESET}, dtype={_policy_name(model)}")


def is_preset(fmt: str) -> bool:
    """Whether ``fmt`` (a ``RoundTrip.format``) names a preset round trip."""
    return fmt == PRESET or fmt.startswith(PRESET + ",")


def save_preset(model: Any, base: str) -> str:
    """``model.save_to_preset`` into a new directory next to ``base`` (one per round trip:
    each loads what it saved); returns the directory."""
    directory = f"{base}-preset-{len(os.listdir(os.path.dirname(base)))}"
    model.save_to_preset(directory)
    return directory


def load_preset(model: Any, directory: str, fmt: str) -> Any:
    """``type(model).from_preset(directory)``, with ``dtype=`` as ``fmt`` names it."""
    _, _, dtype = fmt.partition(", dtype=")
    kwargs = {"dtype": dtype} if dtype else {}
    return type(model).from_preset(directory, **kwargs)


def _policy_name(model: Any) -> str:
    policy = model.dtype_policy
    default = getattr(policy, "default_policy", None)  # a DTypePolicyMap: its default
    return str(getattr(default, "name", None) or policy.name)

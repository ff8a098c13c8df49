"""The bindings the op trace (``_trace``) replaces: every function of ``keras.src.ops``,
``keras.src.random`` and the active backend's modules, found by identity wherever a loaded Keras
or user module binds it, grouped by namespace so that putting the wrappers in place and the
originals back is one ``dict.update`` each."""

from __future__ import annotations

import importlib
import operator
import sys
import types
from collections.abc import Callable
from typing import Any, NamedTuple

from dtype_explorer.keras_run.trace import _frames as frames

#: The ``keras.ops`` modules (and ``keras.random``) and how a user names their functions.
OPS_MODULES = {
    "keras.src.ops.numpy": "ops",
    "keras.src.ops.core": "ops",
    "keras.src.ops.math": "ops",
    "keras.src.ops.nn": "ops.nn",
    "keras.src.ops.linalg": "ops.linalg",
    "keras.src.ops.image": "ops.image",
    "keras.src.random.random": "random",
}
BACKEND_SUBMODULES = ("core", "numpy", "nn", "math", "linalg", "image", "random", "rnn")
#: Functions that take or return no tensors (metadata, scopes, decorators): not wrapped.
SKIP_NAMES = frozenset(
    {
        "shape", "dtype", "is_tensor", "convert_to_numpy", "name_scope", "device_scope",
        "compute_output_spec", "random_seed_dtype", "custom_gradient", "is_int_dtype",
        "is_float_dtype", "standardize_dtype", "cudnn_ok", "jax_draw_seed",
        "torch_seed_generator", "tf_draw_seed", "draw_seed", "make_default_seed", "get_device",
        "to_torch_dtype", "is_flash_attention_enabled", "device", "in_stateless_scope",
        "backend", "get_autocast_scope", "is_nnx_enabled",
        # openvino's core: helpers that build its graph (its nodes' types and outputs)
        "align_operand_types", "get_ov_output", "shape_to_ov_output", "ov_to_keras_type",
    }
)  # fmt: skip
#: The attribute of the trace's wrappers (``_trace._make_wrapper``): never wrapped again.
WRAPPER_MARK = "_dx_trace_shown"
#: Private helpers layer code imports by name and calls.
PRIVATE_ALLOW = frozenset({"_saturate_cast"})


class Patch(NamedTuple):
    """One binding a trace replaces: ``namespace[key]`` is ``original`` or ``wrapper``."""

    namespace: dict
    key: str
    original: Any
    wrapper: Callable[..., Any]


class Group(NamedTuple):
    """The patches of one module's namespace, so that installing and removing are one
    ``dict.update`` each."""

    namespace: dict
    #: ``getter(namespace)``: the values bound now, in the order of ``originals``.
    getter: Callable[[dict], tuple]
    originals: tuple
    wrappers: tuple
    #: ``{key: wrapper}`` and ``{key: original}``: what installing and removing set.
    wrapped: dict[str, Any]
    unwrapped: dict[str, Any]


def collect_targets() -> dict[int, tuple[Any, str]]:
    """``id(function) -> (function, the name a user reads)`` for every wrapped function."""
    import keras.src.ops
    import keras.src.random  # noqa: F401
    from keras.src.backend import backend as active

    modules = dict(OPS_MODULES)
    for sub in BACKEND_SUBMODULES:  # keras-nightly moved them into ``ops``: either is read
        for where in (f"{active()}.{sub}", f"{active()}.ops.{sub}"):
            modules[f"keras.src.backend.{where}"] = f"backend.{sub}"
    targets = {}
    for name, shown in modules.items():
        module = sys.modules.get(name)
        if module is None:
            if name not in OPS_MODULES:
                continue
            module = importlib.import_module(name)
        for attr, fn in vars(module).items():
            if not isinstance(fn, types.FunctionType) or fn.__module__ != name:
                continue
            if hasattr(fn, WRAPPER_MARK):  # a wrapper already (of a patch made meanwhile)
                continue
            if (attr.startswith("_") and attr not in PRIVATE_ALLOW) or attr in SKIP_NAMES:
                continue
            targets[id(fn)] = (fn, f"{shown}.{attr}")
    return targets


def discover(
    wrappers: dict[tuple[str, int], Callable[..., Any]], make: Callable[[Any, str], Any]
) -> list[Patch]:
    """Every binding of a wrapped function in a loaded Keras or user module, each with its
    wrapper (``wrappers``, made by ``make(function, shown name)`` where missing)."""
    targets = collect_targets()
    patches = []
    for name, module in list(sys.modules.items()):
        if module is None:
            continue
        keras_or_main = name == "keras" or name.startswith("keras.") or name == "__main__"
        if not keras_or_main and (
            name.startswith(("dtype_explorer", "_pytest", "pytest"))
            or not frames.user_module(module)
        ):
            continue
        d = getattr(module, "__dict__", None)
        if not isinstance(d, dict):
            continue
        for key, value in list(d.items()):
            hit = targets.get(id(value))
            if hit is None or hit[0] is not value:
                continue
            fn, shown = hit
            if name == "keras.src.backend":  # layer code writes backend.cast, backend.rnn
                shown = f"backend.{key}"
            wrapper = wrappers.get((shown, id(fn)))
            if wrapper is None:
                wrapper = wrappers[(shown, id(fn))] = make(fn, shown)
            patches.append(Patch(d, key, fn, wrapper))
    return patches


def group(patches: list[Patch]) -> list[Group]:
    """The patches by module namespace."""
    by: dict[int, tuple[dict, list[Patch]]] = {}
    for patch in patches:
        by.setdefault(id(patch.namespace), (patch.namespace, []))[1].append(patch)
    groups = []
    for d, items in by.values():
        keys = tuple(p.key for p in items)
        origs = tuple(p.original for p in items)
        wraps = tuple(p.wrapper for p in items)
        getter = operator.itemgetter(*keys)
        if len(keys) == 1:
            getter = (lambda g: lambda m: (g(m),))(getter)
        groups.append(
            Group(d, getter, origs, wraps, dict(zip(keys, wraps)), dict(zip(keys, origs)))
        )
    return groups


def holds(d: dict, getter: Callable, values: tuple) -> bool:
    """Whether ``d`` binds ``values`` (by identity) where ``getter`` reads: one comparison of
    tuples, which compares items by identity first (the values are functions, whose equality
    is identity); anything bound there that will not compare is not them."""
    try:
        return bool(getter(d) == values)
    except Exception:  # a missing key, or a value whose == raises
        return False


def unbind_from_new_modules(
    wrappers: dict[tuple[str, int], Callable[..., Any]], known: set[str]
) -> None:
    """A module imported while the trace was open may have bound a wrapper by name
    (``from keras.src.ops.numpy import add``): give it the original function back (``known``:
    the modules already looked at)."""
    by_id = {id(w): w for w in wrappers.values()}
    for name, module in list(sys.modules.items()):
        if name in known or module is None:
            continue
        known.add(name)
        d = getattr(module, "__dict__", None)
        if not isinstance(d, dict):
            continue
        for key, value in list(d.items()):
            w = by_id.get(id(value))
            if w is not None and w is value:
                d[key] = value.__wrapped__

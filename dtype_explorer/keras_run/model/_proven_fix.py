"""A fix that is proven, for an overflow: the model copied with some layers in float32 (the
others as they were, the same weights), run untraced on the same sample, its leaf layers'
outputs checked for inf/NaN (``float32_fix``). The copy is made as a user would make it:

* ``layer-dtype``: ``keras.models.clone_model`` with ``dtype="float32"`` in the configs of the
  named layers: the layers clone_model visits (a Sequential's or Functional's own, and those
  of the models nested in it);
* ``policy-map``: a layer made inside another layer's own code (keras-hub's
  ``transformer_layer_0/self_attention``) is out of clone_model's reach. The model is made
  again from its config with ``dtype=`` a ``keras.dtype_policies.DTypePolicyMap`` keyed by
  the layers' paths (``Layer.path``), in which each layer looks up its own policy when it
  reads its dtype (a keras-hub backbone passes its dtype on to every layer it makes). A layer
  with no ``build()`` of its own (``Softmax``, ``Dropout``) is never given a path, so the map
  reaches it only through its default policy: the trial names it (``unreached``), and the
  nearest layer clone_model visits is tried in float32 next.

The layers themselves are tried first (their own ``dtype=``, else the map), the set grown
by the first leaf layer still producing inf/NaN, then the nearest layers around them that
clone_model visits, grown the same way. The fix shown is the first copy that ran finite.

>>> import keras, numpy as np
>>> inputs = keras.Input((100,))
>>> big = keras.layers.Dense(2, kernel_initializer="ones", dtype="mixed_float16", name="big")
>>> model = keras.Model(inputs, big(inputs), name="m")
>>> fix = float32_fix(model, np.full((1, 100), 1e3, "float32"), ["m/big"])
>>> fix.chosen.how, fix.chosen.layers
('layer-dtype', ('m/big',))
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.errors import InvalidSpecError, as_sentence
from dtype_explorer.keras_run._arrays import numpy_values
from dtype_explorer.keras_run.model._copy import cloned_with_weights
from dtype_explorer.keras_run.model._layer_damage import compare, run_leaves
from dtype_explorer.keras_run.model._model_trace import layer_paths
from dtype_explorer.keras_run.model._samples import declared_inputs, describe_model, keras_flatten
from dtype_explorer.records import FixMeasure

#: The most rounds ``float32_fix`` grows the set in.
MAX_ROUNDS = 3


@dataclasses.dataclass(frozen=True)
class Trial:
    """One copy tried: ``how`` it was made, the ``layers`` (audit paths) put in float32, the
    ``policy_map`` keys (layer paths) and ``default_policy`` of a map, the inf/NaN the copy's
    leaf layers still produced (``nonfinite``, by path, in forward order), the layers of the
    set the change left in another dtype (``unreached``), and what stopped it (``error``:
    raised; ``skipped``: not run, why)."""

    how: str
    layers: tuple[str, ...]
    policy_map: dict[str, str] = dataclasses.field(default_factory=dict)
    default_policy: str = ""
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    nonfinite: dict[str, int] = dataclasses.field(default_factory=dict)
    ran: bool = False
    unreached: tuple[str, ...] = ()
    unreached_why: str = ""
    error: str = ""
    skipped: str = ""
    copy: Any = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def works(self) -> bool:
        return self.ran and not self.error and not self.nonfinite

    def text(self, ran: bool = True) -> str:
        """``m/big, m/next in float32 (dtype=): 12 inf/NaN`` (``ran``: the copy was run
        here, its inf/NaN counted; else only made)."""
        way = "DTypePolicyMap" if self.how == "policy-map" else "dtype="
        what = f"{', '.join(self.layers)} in float32 ({way})"
        if self.skipped:
            return f"{what}: not run, {self.skipped}"
        if self.error:
            return f"{what}: raised {self.error}"
        if not ran:
            return what
        left = f"{sum(self.nonfinite.values())} inf/NaN"
        if self.unreached:
            shown = ", ".join(p.rsplit("/", 1)[-1] for p in self.unreached[:4])
            left += f" ({shown} kept {'their' if len(self.unreached) > 1 else 'its'} dtype"
            left += f": {self.unreached_why})" if self.unreached_why else ")"
        return f"{what}: {left}"


@dataclasses.dataclass(frozen=True)
class Float32Fix:
    """Every copy ``float32_fix`` tried, in order; ``chosen``: the first that ran finite."""

    trials: tuple[Trial, ...]

    @property
    def chosen(self) -> Trial | None:
        return next((t for t in self.trials if t.works), None)


@dataclasses.dataclass(frozen=True)
class _Target:
    keras_path: str | None
    nested: bool


def float32_fix(
    model: Any, sample: Any, start: list[str], kwargs: dict | None = None
) -> Float32Fix:
    """The layers to keep in float32, from ``start`` (the layers that overflowed), each set
    run on a copy (see the module).

    Args:
        model: the audited Keras model (never changed).
        sample: the audited sample.
        start: the audit paths of the layers that overflowed (``"m/block/attention"``).
        kwargs: the call's keyword arguments.

    Returns:
        A ``Float32Fix``: every copy tried and what it left.
    """
    tree = _tree(model)
    targets = {p: _target(tree[p][0]) if p in tree else _Target(None, False) for p in start}
    trials: list[Trial] = []
    for way in (_own, _above):  # the layers themselves first, then the layers around them
        if _grown(way, model, tree, dict(targets), (sample, kwargs), trials):
            break
    return Float32Fix(tuple(trials))


def float32_copy(model: Any, paths: list[str]) -> Trial | None:
    """A copy of ``model`` with the layers at ``paths`` in float32: their own ``dtype=``
    where clone_model visits them, else a ``DTypePolicyMap`` of their paths, else the nearest
    layers around them that clone_model visits; the first copy made that reached them all
    (else the last tried; ``None``: none could be tried). It is not run here: whether it
    fixes a finding is for the audit's rules, re-run on ``Trial.copy`` (a layer raising on a
    dtype re-run there, as in the audit), to say.

    Args:
        model: the audited Keras model (never changed).
        paths: the audit paths of the layers to put in float32.

    Returns:
        The ``Trial`` (``ran``: the copy was made, set in ``copy``; ``error``: why not).
    """
    tree = _tree(model)
    targets = {p: _target(tree[p][0]) if p in tree else _Target(None, False) for p in paths}
    last = None
    for way in (_own, _above):
        trial = way(model, tree, targets)
        if trial is None:
            continue
        last = _made(trial, model)
        if last.ran and not last.error and not last.unreached:
            return last
    return last


def _made(trial: Trial, model: Any) -> Trial:
    """``trial``'s copy made, not run."""
    if trial.skipped:
        return trial
    try:
        copy = _copy_of(trial, model)
    except Exception as error:  # a copy that cannot be made: said, with why
        return dataclasses.replace(trial, error=_said(error))
    unreached = _unreached(copy, trial.layers, model.name)
    why = _why_unreached(copy, unreached, model.name) if trial.how == "policy-map" else ""
    return dataclasses.replace(trial, ran=True, unreached=unreached, unreached_why=why, copy=copy)


def _copy_of(trial: Trial, model: Any) -> Any:
    if trial.how == "policy-map":
        return with_policy_map(model, trial.policy_map, trial.default_policy)
    return with_float32(model, trial.layers, trial.options)


def _grown(way: Any, model: Any, tree: dict, targets: dict, run: tuple, trials: list) -> bool:
    """Copies made ``way`` tried (appended to ``trials``), the set grown by the first leaf
    still producing inf/NaN, until one runs finite (``True``) or none is left to try."""
    for _ in range(MAX_ROUNDS):
        trial = way(model, tree, targets)
        if trial is None:
            return False
        trial = _run(trial, model, *run)
        trials.append(trial)
        if trial.works:
            return True
        if any(p in trial.nonfinite for p in trial.unreached):
            return False  # the change did not reach where it overflows: a bigger set would not
        grown = _next_target(trial, targets, model.name) if trial.ran and not trial.error else None
        if grown is None:
            return False
        targets[grown[0]] = grown[1]
    return False


def _tree(model: Any) -> dict[str, tuple[Any, bool]]:
    """Every layer of ``model`` by audit path, and whether clone_model visits it."""
    found = {path: layer for layer, path, _ in layer_paths(model).values()}
    recursive = "recursive" in inspect.signature(_clone_model()).parameters
    tree = {}
    for path, layer in found.items():
        parts = path.split("/")
        above = ["/".join(parts[:i]) for i in range(1, len(parts))]
        visited = bool(above) and all(
            declared_inputs(found[a]) is not None and (recursive or a == model.name)
            for a in above
            if a in found
        )
        tree[path] = (layer, visited)
    return tree


def _clone_model() -> Any:
    import keras

    return keras.models.clone_model


def _target(layer: Any) -> _Target:
    nested = any(c is not layer for c in layer._flatten_layers(include_self=False))
    return _Target(getattr(layer, "path", None) or None, nested)


def _own(model: Any, tree: dict, targets: dict[str, _Target]) -> Trial | None:
    """The targets themselves in float32: their own dtype= where clone_model visits them all,
    else a DTypePolicyMap of their paths (``None``: the model takes neither)."""
    paths = tuple(targets)
    if all(tree.get(p, (None, False))[1] for p in paths):
        return Trial("layer-dtype", paths, options=_clone_options(paths))
    return _map_trial(model, targets) if _takes_dtype(model) else None


def _above(model: Any, tree: dict, targets: dict[str, _Target]) -> Trial | None:
    """The nearest layers around the targets that clone_model visits, in float32 (``None``:
    the targets are visited themselves, or nothing around them is)."""
    paths = tuple(targets)
    if all(tree.get(p, (None, False))[1] for p in paths):
        return None  # the same copy as ``_own``'s
    above = _visited_above(tree, paths)
    return Trial("layer-dtype", above, options=_clone_options(above)) if above else None


def _takes_dtype(model: Any) -> bool:
    """The model's config carries its dtype (a keras-hub backbone; made again with another)."""
    try:
        return "dtype" in model.get_config()
    except Exception:
        return False


def _map_trial(model: Any, targets: dict[str, _Target]) -> Trial:
    import keras

    own = model.dtype_policy
    keys: dict[str, str] = {}
    # quantized: its entries kept (no DTypePolicyMap before Keras 3.4.0: made, it says so)
    if isinstance(own, getattr(keras.dtype_policies, "DTypePolicyMap", ())):
        keys = {key: policy.name for key, policy in own.items()}
        own = own.default_policy
    pathless = [p for p, t in targets.items() if t.keras_path is None]
    for target in _outermost(targets).values():
        if target.keras_path is not None:
            keys[target.keras_path] = "float32"
            if target.nested:
                keys[f"{re.escape(target.keras_path)}/.*"] = "float32"
    trial = Trial("policy-map", tuple(targets), policy_map=keys, default_policy=own.name)
    if pathless:
        names = ", ".join(p.rsplit("/", 1)[-1] for p in pathless)
        return dataclasses.replace(
            trial,
            unreached=tuple(pathless),
            skipped=f"{names} has no path (a layer with no build() of its own is never given "
            "one), so a DTypePolicyMap cannot name it",
        )
    return trial


def _outermost(targets: dict[str, _Target]) -> dict[str, _Target]:
    """The targets not inside another target."""
    return {p: t for p, t in targets.items() if not any(p.startswith(o + "/") for o in targets)}


def _visited_above(tree: dict, paths: tuple[str, ...]) -> tuple[str, ...]:
    """For each path, itself or the nearest layer above it that clone_model visits (none for
    the model itself), the outermost kept."""
    found = []
    for path in paths:
        while path and not tree.get(path, (None, False))[1]:
            path = path.rpartition("/")[0]
        if path:
            found.append(path)
    found = list(dict.fromkeys(found))
    return tuple(p for p in found if not any(p.startswith(o + "/") for o in found))


def _clone_options(paths: tuple[str, ...]) -> dict[str, Any]:
    """``recursive=True`` where a layer of ``paths`` is inside a nested model."""
    return {"recursive": True} if any(p.count("/") > 1 for p in paths) else {}


def _run(trial: Trial, model: Any, sample: Any, kwargs: dict | None) -> Trial:
    """``trial``'s copy made and run once on ``sample``, untraced."""
    if trial.skipped:
        return trial
    try:
        copy = _copy_of(trial, model)
        unreached = _unreached(copy, trial.layers, model.name)
        left = nonfinite_outputs(copy, sample, kwargs, root=model.name)
    except Exception as error:  # a copy that cannot be made or run: said, with why
        return dataclasses.replace(trial, error=_said(error))
    why = _why_unreached(copy, unreached, model.name) if trial.how == "policy-map" else ""
    return dataclasses.replace(
        trial, ran=True, nonfinite=left, unreached=unreached, unreached_why=why, copy=copy
    )


def _why_unreached(copy: Any, unreached: tuple[str, ...], root: str) -> str:
    """Why a DTypePolicyMap left ``unreached`` in another dtype: no path (a layer with no
    build() of its own), or the map not passed on to it."""
    layers = _paths(copy, root)
    pathless = [p for p in unreached if p in layers and not getattr(layers[p], "path", None)]
    if len(pathless) == len(unreached):
        return "no path of its own: a layer with no build() is never given one"
    return "the map was not passed on to it: it was made with a dtype of its own, or none"


def _said(error: Exception) -> str:
    return f"{type(error).__name__}: {as_sentence(str(error))}"[:300]


def with_float32(model: Any, paths: tuple[str, ...], options: dict | None = None) -> Any:
    """A copy of a Sequential or Functional ``model`` (``keras.models.clone_model``) with the
    layers at ``paths`` (audit paths) under the float32 policy, the others rebuilt from their
    configs as they are, weights copied."""
    wanted = {id(layer) for layer, path, _ in layer_paths(model).values() if path in paths}

    def clone(layer: Any) -> Any:
        config = layer.get_config()
        if id(layer) in wanted:
            config = {**config, "dtype": "float32"}
        with remade_as_built():
            return type(layer).from_config(config)

    names = [p.rsplit("/", 1)[-1] for p in paths]
    what = f"copy {describe_model(model)} with {names} in float32"
    return cloned_with_weights(model, clone, what, **(options or {}))


def remade_as_built() -> Any:
    """A scope in which layers the user made in this process are made again from their own
    configs: outside Keras's safe mode, which refuses a ``TFSMLayer`` (its SavedModel) or a
    ``Lambda``'s bytecode in a config *file*. These configs come from the user's live layers,
    which already ran that code here (a model that arrives in a worker was loaded in safe mode:
    ``model/_instance.py``), so the copy runs nothing the user's model did not."""
    from keras.src.saving.serialization_lib import SafeModeScope

    return SafeModeScope(False)


def with_policy_map(model: Any, keys: dict[str, str], default: str) -> Any:
    """``model`` made again from its config with ``dtype=`` a ``DTypePolicyMap`` of ``keys``
    (layer paths or patterns -> policy names) over ``default``, built, its weights copied."""
    import keras

    config = model.get_config()
    if "dtype" not in config:
        raise InvalidSpecError(f"the config of {describe_model(model)} takes no dtype")
    policy_map = keras.dtype_policies.DTypePolicyMap(default_policy=default)
    for key, policy in keys.items():
        policy_map[key] = policy
    with remade_as_built():
        copy = type(model).from_config({**config, "dtype": policy_map})
    build = model.get_build_config() if hasattr(model, "get_build_config") else None
    if not copy.built and build:
        copy.build_from_config(build)
    copy.set_weights(model.get_weights())
    return copy


def _unreached(copy: Any, paths: tuple[str, ...], root: str) -> tuple[str, ...]:
    """The layers at or under ``paths`` in ``copy`` that do not compute in float32."""
    import keras

    found = []
    for path, layer in _paths(copy, root).items():
        inside = any(path == p or path.startswith(p + "/") for p in paths)
        wide = getattr(layer, "compute_dtype", "float32") == "float32"
        if inside and not wide and not isinstance(layer, keras.layers.InputLayer):
            found.append(path)
    return tuple(found)


def _next_target(
    trial: Trial, targets: dict[str, _Target], root: str
) -> tuple[str, _Target] | None:
    """The first leaf of ``trial``'s copy still producing inf/NaN outside its set."""
    tree = _paths(trial.copy, root)
    for path in trial.nonfinite:
        covered = any(path == p or path.startswith(p + "/") for p in (*trial.layers, *targets))
        if not covered and path in tree:
            return path, _target(tree[path])
    return None


def _paths(copy: Any, root: str) -> dict[str, Any]:
    """Every layer of ``copy`` by audit path, its root named ``root`` (the model's name: a
    copy made from a config without one is named afresh)."""
    return {root + path[len(copy.name) :]: layer for layer, path, _ in layer_paths(copy).values()}


def nonfinite_outputs(
    model: Any, sample: Any, kwargs: dict | None = None, root: str | None = None
) -> dict[str, int]:
    """How many inf/NaN each leaf layer's outputs hold, by audit path (under ``root``, by
    default the model's name), in forward order (only those with any)."""
    counts: dict[str, int] = {}
    for (path, _), (_, arrays) in run_leaves(model, sample, kwargs)[0].items():
        n = sum(int(a.size - np.isfinite(a).sum()) for a in arrays)
        if n:
            key = f"{root or model.name}/{path}"
            counts[key] = counts.get(key, 0) + n
    return counts


def float_outputs(model: Any, sample: Any, kwargs: dict | None = None) -> list[np.ndarray]:
    """The float arrays ``model`` returns on ``sample`` (a reference to measure against)."""
    return _floats(model(sample, **(kwargs or {})))


def overflow_measures(
    model: Any,
    sample: Any,
    paths: list[str],
    kwargs: dict | None,
    reference: list[np.ndarray] | None,
) -> dict[str, FixMeasure]:
    """``model`` run once on ``sample``, measured for each of ``paths`` (audit paths): the
    inf/NaN in its leaf outputs, the least headroom of the leaf outputs at or under the path,
    and its first float output against ``reference`` (the same model in float32).

    Args:
        model: the model, or its fixed copy.
        sample: the audited sample.
        paths: the findings' audit paths.
        kwargs: the call's keyword arguments.
        reference: the float32 model's float outputs (``None``: the error is not measured).

    Returns:
        A ``FixMeasure`` by path (``finding`` left ``True``: the caller's rule says).
    """
    leaves, returned = run_leaves(model, sample, kwargs)
    nonfinite = sum(
        int(a.size - np.isfinite(a).sum()) for _, arrays in leaves.values() for a in arrays
    )
    output = None
    outs = _floats(returned)
    if reference and outs and outs[0].shape == reference[0].shape:
        output = compare(outs[0], reference[0], path=model.name, layer_class=type(model).__name__)
    found = {}
    for at in paths:
        below = at.partition("/")[2]
        room = [
            (bits, dtypes.describe(a))
            for (path, _), (_, arrays) in leaves.items()
            if below and (path == below or path.startswith(below + "/"))
            for a in arrays
            if a.size and (bits := _headroom(a)) is not None
        ]
        bits, dtype = min(room) if room else (None, "")
        found[at] = FixMeasure(
            finding=True, at=at, nonfinite=nonfinite, output=output, headroom_bits=bits,
            dtype=dtype,
        )  # fmt: skip
    return found


def _floats(returned: Any) -> list[np.ndarray]:
    return [
        numpy_values(t)
        for t in keras_flatten(returned)
        if dtypes.family(dtypes.describe(t)) == "float"
    ]


def _headroom(array: np.ndarray) -> float | None:
    """``log2(largest finite / amax)`` of ``array``'s finite values (``None``: none non-zero);
    an array holding inf has none left: ``-inf`` is not a number a view can show, so 0."""
    values = np.abs(array[np.isfinite(array)].astype(np.float64))
    if not np.isfinite(array).all():
        return 0.0
    amax = float(values.max()) if values.size else 0.0
    if not amax:
        return None
    return float(np.log2(dtypes.float_limits(dtypes.describe(array))[0] / amax))

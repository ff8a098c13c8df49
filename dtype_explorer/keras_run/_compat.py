"""What dtype-explorer needs from Keras that not every release it runs on has (3.1.0 on:
``keras_release.LOWEST``), taken from what the running release has; each difference, the
release that brought it and what is done before it:

- ``keras.tree.flatten_with_path`` (3.6.0): the paths are walked here (dicts by sorted key,
  sequences by index, as ``keras.tree`` orders them) and checked leaf by leaf against that
  release's own ``keras.tree.flatten`` (:func:`flatten_with_path`);
- Keras's symbolic scope (3.5.0, the traces Keras runs to build a layer): before it no call is
  inside one; a ``KerasTensor`` argument still tells a symbolic call (:func:`in_symbolic_scope`);
- ``Layer.quantize(mode, type_check=)`` (3.5.0): ``Model.quantize`` called ``quantize(mode)``
  before (:func:`quantize_kwargs`);
- ``QUANTIZATION_MODES`` (3.3.0): 3.1.x and 3.2.x had ``int8`` in their ``Model.quantize``'s
  own check, read from its code; 3.0.x had no ``quantize`` (``_facts.quantization_modes``, a
  fact of the release the front ends validate with);
- ``Layer.quantization_mode`` (3.4.0): before, the layer's dtype policy says it
  (:func:`layer_quantization_mode`); ``Layer.path`` (3.4.0): before, a layer's variables are
  named under its name (:func:`layer_path`);
- public ``keras.dtype_policies.get`` (3.3.0): ``keras.src.dtype_policies.get`` is the same
  function on every release (:func:`get_policy`);
- ``.keras`` archives in memory (3.2.0): 3.1.x writes one as 3.2.0 does, with 3.1's own parts,
  and reads it back through a temporary file (:func:`save_archive`, :func:`load_archive`);
- ``Model.export(verbose=)`` (3.6.0): before, what it prints is kept from the user's output
  (:func:`export_saved_model`).

What a release lacks that a question asks for (a quantization mode, a ``DTypePolicyMap``) is
not made up here: Keras's own refusal is the answer.

>>> [(path, leaf) for path, leaf in flatten_with_path({"b": [1, 2], "a": 3})]
[(('a',), 3), (('b', 0), 1), (('b', 1), 2)]
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import inspect
import io
import json
import os
import tempfile
import zipfile
from collections.abc import Callable
from typing import Any

__all__ = [
    "any_symbolic_tensors",
    "export_saved_model",
    "flatten_with_path",
    "get_policy",
    "in_symbolic_scope",
    "layer_path",
    "layer_quantization_mode",
    "load_archive",
    "quantize_kwargs",
    "save_archive",
]


def flatten_with_path(structure: Any) -> list[tuple[tuple[Any, ...], Any]]:
    """Every leaf of ``structure`` with its path (dict keys, sequence indices), in the order
    the running Keras release's ``keras.tree.flatten`` gives the leaves.

    Args:
        structure: a nest of dicts, lists and tuples (Keras's own tracked containers too).

    Returns:
        ``[(path, leaf), ...]``: ``path`` a tuple of keys and indices.

    >>> flatten_with_path([None, (4,)])
    [((0,), None), ((1, 0), 4)]
    """
    import keras

    own = getattr(keras.tree, "flatten_with_path", None)
    if own is not None:
        return list(own(structure))
    walked = _walk(structure, ())
    leaves = keras.tree.flatten(structure)  # the release's own order decides
    if len(leaves) == len(walked) and all(a is b for a, (_, b) in zip(leaves, walked)):
        return walked
    return [((i,), leaf) for i, leaf in enumerate(leaves)]  # an order we cannot name: by index


def _walk(structure: Any, path: tuple[Any, ...]) -> list[tuple[tuple[Any, ...], Any]]:
    """Dicts by sorted key (as ``keras.tree`` orders them), lists and tuples by index."""
    if isinstance(structure, dict):
        return [pair for key in sorted(structure) for pair in _walk(structure[key], (*path, key))]
    if isinstance(structure, list | tuple):
        return [pair for i, item in enumerate(structure) for pair in _walk(item, (*path, i))]
    return [(path, structure)]


def any_symbolic_tensors(args: tuple = (), kwargs: dict | None = None) -> bool:
    """Whether ``args`` or ``kwargs`` hold a ``KerasTensor`` anywhere in their structure:
    a symbolic call (a functional graph being built), as Keras's own check says.

    >>> any_symbolic_tensors((1.0, [2.0]))
    False
    """
    from keras.src.backend import any_symbolic_tensors as keras_check

    return bool(keras_check(args, kwargs))


def in_symbolic_scope() -> bool:
    """Whether this call runs inside Keras's symbolic scope (a build's trace); ``False`` on
    releases before 3.5.0, which have none.

    >>> in_symbolic_scope()
    False
    """
    return _symbolic_scope()()


@functools.cache
def _symbolic_scope() -> Callable[[], bool]:
    try:
        from keras.src.backend.common.symbolic_scope import in_symbolic_scope as own
    except ImportError:  # Keras 3.1.x-3.4.x
        return lambda: False
    return own


@functools.cache
def quantize_kwargs() -> dict[str, Any]:
    """The keyword arguments the running release's ``Model.quantize`` gives each layer's
    ``quantize(mode, ...)``: ``{"type_check": True}`` where ``Layer.quantize`` takes it (Keras
    3.5.0 on), else none.

    >>> quantize_kwargs()
    {'type_check': True}
    """
    import keras

    taken = inspect.signature(keras.layers.Layer.quantize).parameters
    return {"type_check": True} if "type_check" in taken else {}


def layer_quantization_mode(layer: Any) -> str | None:
    """``layer.quantization_mode`` (Keras 3.4.0 on); before, its dtype policy's (a quantized
    policy has one); ``None`` for a float layer.

    >>> import keras
    >>> layer_quantization_mode(keras.layers.Dense(2)) is None
    True
    """
    if isinstance(getattr(type(layer), "quantization_mode", None), property):
        return layer.quantization_mode
    return getattr(getattr(layer, "dtype_policy", None), "quantization_mode", None)


def get_policy(identifier: Any) -> Any:
    """``keras.dtype_policies.get(identifier)``: the policy Keras makes of a name, a config or
    a policy (``keras.src.dtype_policies.get``, public only from 3.3.0).

    >>> get_policy("mixed_float16").compute_dtype
    'float16'
    """
    from keras.src import dtype_policies

    return dtype_policies.get(identifier)


def save_archive(target: Any, buffer: io.BytesIO) -> None:
    """``target`` written to ``buffer`` as a ``.keras`` archive, weights in h5 (Keras's main,
    keras-nightly 3.16.0.dev, writes h5 only and takes no format). 3.1.x has no in-memory save,
    and its ``save_model`` reads ``target.built``, which a metric or a loss lacks: there the
    archive is written as 3.2.0's ``_save_model_to_fileobj`` writes it, with 3.1's own parts."""
    from keras.src.saving import saving_lib

    save = getattr(saving_lib, "_save_model_to_fileobj", None)
    if save is not None:
        formats = ("h5",) if len(inspect.signature(save).parameters) > 2 else ()
        save(target, buffer, *formats)
        return
    with saving_lib.ObjectSharingScope():
        config = saving_lib.serialize_keras_object(target)
    metadata = {
        "keras_version": saving_lib.keras_version,
        "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S"),
    }
    with zipfile.ZipFile(buffer, "w") as archive:
        with archive.open(saving_lib._METADATA_FILENAME, "w") as file:
            file.write(json.dumps(metadata).encode())
        with archive.open(saving_lib._CONFIG_FILENAME, "w") as file:
            file.write(json.dumps(config).encode())
        weights = saving_lib.H5IOStore(saving_lib._VARS_FNAME + ".h5", archive=archive, mode="w")
        assets = saving_lib.DiskIOStore(saving_lib._ASSETS_DIRNAME, archive=archive, mode="w")
        saving_lib._save_state(
            target,
            weights_store=weights,
            assets_store=assets,
            inner_path="",
            visited_trackables=set(),
        )
        weights.close()
        assets.close()


def load_archive(archive: bytes, **kwargs: Any) -> Any:
    """``saving_lib.load_model`` of a ``.keras`` archive held in memory (``kwargs``: its
    ``compile=``, ``safe_mode=``); on 3.1.x through a temporary file."""
    from keras.src.saving import saving_lib

    if hasattr(saving_lib, "_load_model_from_fileobj"):
        return saving_lib.load_model(io.BytesIO(archive), **kwargs)
    with tempfile.TemporaryDirectory(prefix="dx-archive-") as folder:
        path = os.path.join(folder, "model.keras")
        with open(path, "wb") as file:
            file.write(archive)
        return saving_lib.load_model(path, **kwargs)


def export_saved_model(model: Any, path: str) -> None:
    """``model.export(path, format="tf_saved_model")`` without its printout: ``verbose=False``
    where the release's ``export`` takes it (3.6.0 on); before, what it prints (the served
    signature) is kept from the user's output."""
    taken = inspect.signature(model.export).parameters
    if "verbose" in taken:
        model.export(path, format="tf_saved_model", verbose=False)
        return
    with contextlib.redirect_stdout(io.StringIO()):
        model.export(path, format="tf_saved_model")


def layer_path(layer: Any) -> str:
    """``layer.path`` (Keras 3.4.0 on); before, its name, under which its variables are named.

    >>> import keras
    >>> layer_path(keras.layers.Dense(2, name="d"))
    'd'
    """
    return getattr(layer, "path", None) or layer.name

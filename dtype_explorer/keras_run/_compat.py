"""What the probe needs from Keras that not every release it runs on has, taken from what the
release running it has.

``keras.tree.flatten_with_path`` came with Keras 3.6.0; on Keras 3.1.x to 3.5.x the paths are
walked here (dicts by sorted key, sequences by index, as ``keras.tree`` orders them) and
checked leaf by leaf against that release's own ``keras.tree.flatten``.

>>> [(path, leaf) for path, leaf in flatten_with_path({"b": [1, 2], "a": 3})]
[(('a',), 3), (('b', 0), 1), (('b', 1), 2)]
"""

from __future__ import annotations

from typing import Any

__all__ = ["flatten_with_path"]


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

"""What the probe needs from Keras that not every release it runs on has, taken from what the
release running it has.

``keras.tree.flatten_with_path`` came with Keras 3.6.0; Keras 3.1.x to 3.5.x flatten their
structures with ``optree`` (in the ``"keras"`` namespace, ``None`` a leaf), so the same call
made on ``optree`` gives those releases the same leaves in the same order as their own
``keras.tree.flatten``.

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
    try:
        import optree
    except ImportError:  # a release that flattens without optree (dm-tree): own recursion
        return _walk(structure, ())
    paths, leaves, _ = optree.tree_flatten_with_path(
        structure, none_is_leaf=True, namespace="keras"
    )
    return list(zip(paths, leaves))


def _walk(structure: Any, path: tuple[Any, ...]) -> list[tuple[tuple[Any, ...], Any]]:
    """Dicts by sorted key (as ``keras.tree`` orders them), lists and tuples by index."""
    if isinstance(structure, dict):
        return [pair for key in sorted(structure) for pair in _walk(structure[key], (*path, key))]
    if isinstance(structure, list | tuple):
        return [pair for i, item in enumerate(structure) for pair in _walk(item, (*path, i))]
    return [(path, structure)]

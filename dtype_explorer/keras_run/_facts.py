"""The facts of this process's Keras that the front ends validate with, read from Keras itself
(its ``ALLOWED_DTYPES``, its quantization modes, and which policy names
``keras.dtype_policies.get`` accepts) and stored as :mod:`dtype_explorer.keras_facts`'
snapshot. Importing this module installs :func:`read_facts` as the snapshot's reader.

>>> facts = read_facts()
>>> "bfloat16" in facts["allowed_dtypes"], facts["policies"]["mixed_float16"]
(True, True)
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from typing import Any

from dtype_explorer import keras_facts

#: Policy names Keras accepts beyond dtype names (``DTypePolicy._parse_name``).
_MIXED = ("mixed_float16", "mixed_bfloat16")


def read_facts() -> dict[str, Any]:
    """Ask this process's Keras (imported here if it is not yet) for the facts.

    Returns:
        ``allowed_dtypes`` (in Keras's order), ``quantization_modes`` and ``policies``
        (every dtype, mixed and ``<mode>_from_<dtype>`` name -> whether Keras accepts it).
    """
    from keras.src.backend.common import dtypes as keras_dtypes

    allowed = list(keras_dtypes.ALLOWED_DTYPES)
    modes = list(quantization_modes())  # int8 only on 3.1.x-3.2.x, none on 3.0.x
    python = getattr(keras_dtypes, "PYTHON_DTYPES_MAP", {})  # not in Keras 3.1 (an engine)
    plain = [*_MIXED, *allowed, *(k for k in python if isinstance(k, str))]
    policies = {name: keras_facts.keras_accepts(name) for name in plain}
    sources = [name for name in plain if policies[name]]
    for mode in modes:
        for source in sources:
            name = f"{mode}_from_{source}"
            policies[name] = keras_facts.keras_accepts(name)
    return {"allowed_dtypes": allowed, "quantization_modes": modes, "policies": policies}


def write_facts_snapshot() -> dict[str, Any]:
    """Read the facts from this process's Keras and write them as the snapshot
    (``keras_facts.store``).

    Returns:
        The snapshot as a dict.
    """
    return keras_facts.store(read_facts())


@functools.cache
def quantization_modes() -> tuple[str, ...]:
    """The quantization modes of the running release: its ``QUANTIZATION_MODES``; on a release
    before that list (3.1.x, 3.2.x), the modes its ``Model.quantize`` accepts, read from its own
    check; none where ``Model`` has no ``quantize`` (3.0.x).

    >>> "int8" in quantization_modes()
    True
    """
    from keras.src.dtype_policies import dtype_policy

    listed = getattr(dtype_policy, "QUANTIZATION_MODES", None)
    if listed is not None:
        return tuple(listed)
    import keras

    quantize = getattr(keras.Model, "quantize", None)
    if quantize is None:
        return ()
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(quantize)))
    except (OSError, TypeError, SyntaxError):  # no source to read: no mode is claimed
        return ()
    return accepted_modes(tree)


def accepted_modes(tree: ast.AST) -> tuple[str, ...]:
    """The modes a ``quantize`` method's ``if mode not in (...)`` check accepts (``()``: none).

    >>> accepted_modes(ast.parse("if mode not in ('int8',): raise ValueError(mode)"))
    ('int8',)
    """
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Name)
            and node.left.id == "mode"
            and [type(op) for op in node.ops] == [ast.NotIn]
            and isinstance(node.comparators[0], ast.Tuple | ast.List)
        ):
            items = node.comparators[0].elts
            if all(isinstance(i, ast.Constant) and isinstance(i.value, str) for i in items):
                return tuple(i.value for i in items)  # type: ignore[attr-defined]
    return ()


keras_facts.set_reader(read_facts)

"""The facts of this process's Keras that the front ends validate with, read from Keras itself
(its ``ALLOWED_DTYPES``, its quantization modes, and which policy names
``keras.dtype_policies.get`` accepts) and stored as :mod:`dtype_explorer.keras_facts`'
snapshot. Importing this module installs :func:`read_facts` as the snapshot's reader.

>>> facts = read_facts()
>>> "bfloat16" in facts["allowed_dtypes"], facts["policies"]["mixed_float16"]
(True, True)
"""

from __future__ import annotations

from typing import Any

from dtype_explorer import keras_facts
from dtype_explorer.keras_run._compat import quantization_modes

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


keras_facts.set_reader(read_facts)

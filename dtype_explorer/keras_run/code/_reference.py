"""Each step of the user's code that computed in a 16-bit float, measured against the same op
run again on its inputs widened to float32 (``TraceStep.wrong``): the damage that raises
nothing, a float16 ``cumsum`` that stops at 2048 on tensorflow while jax and torch sum in
float32 inside it. The op is run again only where its result is arithmetic on its inputs'
values (the catalog's ``computes_on_values``: not a cast, a creation, an index, a random
draw; what a 16-bit creation lost of the numbers asked, the trace measures itself, step
``creation``), on copies: what the user's code computed is never touched. A difference beyond
``_numerics.error_limit`` of the 16-bit dtype (64 ulps, at least 1e-3 of the values' scale) is
the first wrong number, worded as the probe words it (``_numerics.check_values``).

>>> import keras, numpy as np
>>> x = keras.ops.convert_to_tensor(np.ones(3000, "float16"))
>>> out = keras.ops.cumsum(x)
>>> found = float32_reference("ops.cumsum", keras.ops.cumsum, (x,), {}, out)
>>> found is None or found.value == 2048.0  # tensorflow's float16 sum stops at 2048
True
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.keras_run import catalog
from dtype_explorer.keras_run._arrays import numpy_values
from dtype_explorer.keras_run._numerics import check_values, error_limit
from dtype_explorer.records import ValueFinding

#: The dtype a 16-bit step's inputs are widened to.
WIDE = "float32"


@functools.cache
def _computes(op: str) -> bool:
    """Whether the catalog's op named ``op`` (as a trace step names it) computes on values."""
    found = catalog.find(op)  # None: a backend function, a layer's entry point
    return found is not None and found.computes_on_values


def float32_reference(op: str, fn: Any, args: tuple, kwargs: dict, out: Any) -> ValueFinding | None:
    """The first wrong number of ``out`` (what ``fn(*args, **kwargs)``, the op ``op``, gave)
    against ``fn`` run again with every 16-bit float tensor among its arguments widened to
    float32, or ``None`` (right within the 16-bit dtype's limit, or not an op run again).

    Args:
        op: the step's name (``ops.cumsum``).
        fn: the op itself (unwrapped).
        args: its positional arguments as the code gave them.
        kwargs: its keyword arguments.
        out: what it returned.

    Returns:
        A ``ValueFinding`` (``reference_dtype`` float32), or ``None``.
    """
    if not _computes(op):
        return None
    import keras

    def widened(x: Any) -> Any:
        half = hasattr(x, "dtype") and hasattr(x, "shape") and dtypes.describe(x) in dtypes.HALF
        return keras.ops.cast(x, WIDE) if half else x

    wide_args, wide_kwargs = keras.tree.map_structure(widened, (list(args), dict(kwargs)))
    ref = fn(*wide_args, **wide_kwargs)
    outs, refs = keras.tree.flatten(out), keras.tree.flatten(ref)
    if len(outs) != len(refs):
        return None
    for i, (got, want) in enumerate(zip(outs, refs, strict=True)):
        dtype = dtypes.describe(got) if hasattr(got, "dtype") else ""
        if dtype not in dtypes.HALF:
            continue
        mine, theirs = numpy_values(got), numpy_values(want)
        found = check_values(
            np.asarray(mine, np.float64),
            dtype,
            np.asarray(theirs, np.float64),
            WIDE,
            limit=error_limit(dtype),
            output=i,
            integer_path=False,
        )
        if found is not None:
            return found
    return None

"""The user's own code traced: a function or a cell run as written, once, with the op trace on.

``traced_run`` opens the op trace (``keras_run/trace``, the probe's: its wrappers of every
Keras op, its hooks of the user's Python operators, its records) with the user's line named on
every step, makes Keras's own entry points steps of their own for as long as it is open
(``_named``: each layer's ``__call__``, variables made and assigned, the optimizer's
``apply`` and loss scaling, wrapped on their classes by the trace's own wrapper and put back
afterwards), and reads the environment and what the code returned. Each step computed in a
16-bit float is measured against its op run again on its inputs widened to float32
(``_reference``, ``TraceStep.wrong``). ``_eager`` runs the backend's compiled functions op by
op for a run that asks it (``eager=True``). Nothing here changes what the code computes: the
wrappers call the function as given, the op run again gets copies, and the other values are
read after the code is done.

User code runs as the user: in the user's process it may change the user's state exactly as it
would untraced (a policy it sets stays set: only the tool's own ``--policy``/``--floatx`` are
put back by the caller).

>>> import keras
>>> def f(x):
...     return keras.ops.cast(x, "float16") * 2
>>> import numpy as np
>>> value, run = traced_run(f, (np.ones(2, "float32"),), {}, what="f")
>>> run.steps[0].op, run.returned_dtype
('ops.cast', 'float16')
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dtype_explorer import lazy

_EXPORTS: dict[str, str] = {
    "TracedRun": "dtype_explorer.keras_run.code._run",
    "as_called": "dtype_explorer.keras_run.code._run",
    "traced_run": "dtype_explorer.keras_run.code._run",
    "code_environment": "dtype_explorer.keras_run.code._run",
    "compiled_run_eagerly": "dtype_explorer.keras_run.code._eager",
    "describe_returned": "dtype_explorer.keras_run.code._values",
    "user_traceback": "dtype_explorer.keras_run.code._values",
}

if TYPE_CHECKING:  # the real imports, for readers, IDEs and type checkers
    from dtype_explorer.keras_run.code._eager import compiled_run_eagerly
    from dtype_explorer.keras_run.code._run import (
        TracedRun,
        as_called,
        code_environment,
        traced_run,
    )
    from dtype_explorer.keras_run.code._values import describe_returned, user_traceback

__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)

#: The public names: the table's.
__all__ = [name for name in _EXPORTS if not name.startswith("_")]

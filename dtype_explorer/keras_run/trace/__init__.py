"""The op trace: every op an eager Keras call ran, with its dtypes and the line that ran it.

``_op_trace`` opens the trace around a call (``op_trace``; the module-attribute wrapping),
``_state`` holds its state (the process's, and each trace's: ``Trace``), ``_compiled`` steps
aside while ``torch.compile`` traces the user's code,
``_in_place`` says how long the wrappers stay in place (kept in a worker by ``keep_installed``;
for a probe in the user's process by ``in_place``), ``_bindings`` finds the functions it wraps,
``_frames`` tells where an op was called from, ``_operators`` records the user's Python
operators, ``_records`` is what a step holds (``Step``, then ``TraceStep``), ``_values`` what
its values show (inf/NaN made, what its casts and variable reads lost), ``_placement``
where a step ran and the kernel path taken, and ``_call_trace`` what a layer's ``call()`` is
handed (wrappers on its entry points, its variables as read).

It may import the foundation, ``records`` and ``keras_run._compat``; nothing else of the
engine (the probe paths, the model passes and Keras 2 import it, never the reverse). Other
rooms use the names below; the modules stay private to this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dtype_explorer import lazy

#: Public name -> the module that holds it, imported on first use (``dtype_explorer.lazy``).
_EXPORTS: dict[str, str] = {
    "CallRecorder": "dtype_explorer.keras_run.trace._call_trace",
    "variable_dtypes": "dtype_explorer.keras_run.trace._call_trace",
    "variable_name": "dtype_explorer.keras_run.trace._call_trace",
    "wrapped_entry_points": "dtype_explorer.keras_run.trace._call_trace",
    "in_place": "dtype_explorer.keras_run.trace._in_place",
    "op_trace": "dtype_explorer.keras_run.trace._op_trace",
    "operator_limit": "dtype_explorer.keras_run.trace._op_trace",
    "traced_callable": "dtype_explorer.keras_run.trace._op_trace",
    "unwrapped": "dtype_explorer.keras_run.trace._op_trace",
    "wrapped_like": "dtype_explorer.keras_run.trace._op_trace",
    "op_kernel": "dtype_explorer.keras_run.trace._placement",
    "MAX_STEPS": "dtype_explorer.keras_run.trace._state",
    "Trace": "dtype_explorer.keras_run.trace._state",
    "placed": "dtype_explorer.keras_run.trace._placement",
}

if TYPE_CHECKING:  # the real imports, for readers, IDEs and type checkers
    from dtype_explorer.keras_run.trace._call_trace import (
        CallRecorder,
        variable_dtypes,
        variable_name,
        wrapped_entry_points,
    )
    from dtype_explorer.keras_run.trace._in_place import in_place
    from dtype_explorer.keras_run.trace._op_trace import (
        op_trace,
        operator_limit,
        traced_callable,
        unwrapped,
        wrapped_like,
    )
    from dtype_explorer.keras_run.trace._placement import op_kernel, placed
    from dtype_explorer.keras_run.trace._state import MAX_STEPS, Trace

__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)

#: The public names: the table's.
__all__ = [name for name in _EXPORTS if not name.startswith("_")]

"""The audit of a model (``check_model``): its real forward pass, the findings drawn from it.

``_check`` is the entry point; it runs the pass through the engine and the runtime, re-probes
layers on other backends (``_reprobe``), measures each layer against a wider reference
(``_reference``: float32 for a 16-bit model, float64 for float64 data narrowed), predicts
(``_predict``), takes fit steps (``_fit``), quantizes (``_quantize``), saves and loads
(``_save``), and audits Keras 2 models (``_keras2``, ``_keras2_modes``,
``_tf_keras``, with the engine's defaults of ``_engine``). The findings are pure functions of
records: ``_rules`` (one pass), ``_rules_across`` (backends compared), ``_rules_exact`` (what
a dtype-changing step lost), ``_rules_output`` (16-bit outputs, worded from what was
measured), ``_rules_facts`` and ``_rules_quant``, unit-tested with hand-built records. The
findings whose fix is a change of dtypes or of the optimizer get no fix from a rule: ``_fixes``
runs each on a copy of the model (``_fixes_layers``: the model in float64, a layer in float32,
an Input in another dtype; ``_fixes_training``: a loss scale over one training step; the
float32 set of the overflows chosen from the measured ranges by ``_fix_choice``, and one
combined set), the rules re-run on the copy, and shows it (written by ``_fix_code``) only
once it works. The other fixes are run too: ``_fixes_values`` casts the inputs of a copy of a
layer whose numbers were wrong, ``_fixes_quant`` quantizes copies again (the worst layers left
float, or under bfloat16), ``_reprobe`` re-probes a layer whose backends part with its inputs
cast, ``_fit`` runs a step that failed under XLA without it, and a round trip's fix is the
other format measured beside it (``_rules_quant``). A change no copy can run (a custom
layer's own code, a cast inside the model) shows no fix and says why (``FixProof.not_tried``).

It may import the foundation, ``records``, the engine's and the runtime's public names; the
rules import records only. Nothing else in ``analyses`` imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dtype_explorer import lazy

#: Public name -> the module that holds it, imported on first use (``dtype_explorer.lazy``).
_EXPORTS: dict[str, str] = {
    "check_model": "dtype_explorer.analyses.audit._check",
}

if TYPE_CHECKING:  # the real imports, for readers, IDEs and type checkers
    from dtype_explorer.analyses.audit._check import check_model

__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)

#: The public names: the table's.
__all__ = [name for name in _EXPORTS if not name.startswith("_")]

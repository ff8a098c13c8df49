"""``check_model(..., mode="save")``: the audited model saved and loaded back in each format
that applies (``keras_run.round_trips``: ``.keras``, ``.h5``, SavedModel through
``TFSMLayer``), every difference a finding (``_audit_rules_quant.roundtrip_findings``).

>>> import keras, dtype_explorer as dx
>>> inputs = keras.Input((3,))
>>> model = keras.Model(inputs, keras.layers.Dense(2, name="d")(inputs))
>>> report = dx.check_model(model, mode="save")
>>> [t.format for t in report.roundtrip.trips if t.outcome == "compared"][:1]
['.keras']
"""

from __future__ import annotations

import time
from typing import Any

from dtype_explorer.analyses.audit import _rules_quant as rules
from dtype_explorer.keras_run import round_trips
from dtype_explorer.records import RoundTripReport
from dtype_explorer.timing import ms


def round_trip_phase(audit: Any, name: str) -> RoundTripReport:
    """The round trips of ``audit.target`` (the model, its clone under ``policy=``, or its
    quantized copy), their findings added to ``audit.findings``."""
    started = time.perf_counter()
    arguments = dict(audit.arguments)
    report = round_trips(audit.target, audit.sample, arguments)
    audit.timings["save_ms"] = ms(started)
    audit.findings += rules.roundtrip_findings(report, name)
    return report

"""A model audit's record: what each layer was given, received, read and returned in one real
forward pass, and the findings (hazards, each with a fix) drawn from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, JsonValue

from dtype_explorer.errors import InvalidSpecError, printable
from dtype_explorer.records._as_code import AuditQuestion, CodeCopy
from dtype_explorer.records._as_code_audit import audit_code
from dtype_explorer.records._base import Record
from dtype_explorer.records._exactness import CastLoss, LayerDamage, where_precision_goes
from dtype_explorer.records._fit import FitReport
from dtype_explorer.records._fix import FixProof
from dtype_explorer.records._graph import ModelGraph
from dtype_explorer.records._probe import ErrorInfo, VariableDtypes
from dtype_explorer.records._quantize import QuantizationReport, RoundTripReport
from dtype_explorer.records._trace import TraceStep

if TYPE_CHECKING:
    import plotly.graph_objects as go

Severity = Literal["error", "warning", "info"]
FindingKind = Literal[
    "silent-downcast",
    "int-into-float-layer",
    "float16-output",
    "float32-only-layer",
    "custom-variable-dtype",
    "overflow",
    "no-loss-scaling",
    "backend-divergence",
    "call-error",
    "mode-divergence",
    "nonfinite-gradient",
    # a LossScaleOptimizer that divided gradients the train step never scaled
    "loss-not-scaled",
    # training steps that changed no value of a variable its gradients reached
    "update-lost",
    # wrong numbers in a right dtype (named at the first output element that shows them)
    "wraparound",
    "saturation",
    "truncation",
    "reference-error",
    "precision-loss",
    "value-divergence",
    # a dtype-changing step (keras.Input conversion, autocast) that lost values
    "lossy-cast",
    # the policy rule and result_type name different dtypes
    "rules-disagree",
    # quantization (check_model(quantize=)) and round trips (mode="save")
    "quantized-output-dtype",
    "not-quantized",
    "quantization-error",
    "quantize-refused",
    "quantized-container",
    "roundtrip-dtype",
    "roundtrip-values",
    "roundtrip-error",
]
#: How an audit runs the model (``check_model(..., mode=)``, ``%dtype_check --mode``): its
#: eager call (``Model.__call__``, inference), the eager call with ``training=True``, the real
#: ``model.predict`` (compiled on jax and tensorflow), one real ``model.fit`` step on a copy, a
#: save and load of a copy (``.keras``, ``.h5``, SavedModel) compared layer by layer, the real
#: ``model.predict`` on a ``tf.data.Dataset`` of the sample (``dataset``, every backend).
AuditMode = Literal["call", "training", "predict", "fit", "save", "dataset"]
AUDIT_MODES: tuple[AuditMode, ...] = ("call", "training", "predict", "fit", "save", "dataset")
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")


#: The columns of :meth:`LayerCall.row`, in the order tables show them.
ROW_COLUMNS = ("path", "layer", "policy", "given", "received", "output", "variables", "events")


class TensorInfo(Record):
    """One tensor at one point of a call: dtype, shape, and whether every value is finite."""

    dtype: str
    shape: tuple[int | None, ...] = ()
    finite: bool | None = None
    #: An integer tensor's largest magnitude (``None``: not integer, or values not read).
    max_abs: float | None = None


class LayerCall(Record):
    """One call of one layer during the audited forward pass (a row of the dtype-flow table).

    ``given``: what ``__call__`` was handed; ``received``: what ``call()`` got after Keras's
    conversion and autocast; ``entry``: the ``keras.Input`` dtypes a functional model converts
    its inputs to; ``retried``: how the audit re-ran a call that raised.
    """

    path: str
    layer_class: str
    #: How user code names the class: ``keras.layers.Dense``, ``keras_hub.layers.<Name>``
    #: where keras-hub exports it, else the bare class name (the user's own, or one its
    #: library does not export); empty: ``keras.layers.<layer_class>``.
    constructor: str = ""
    depth: int
    call_index: int = 0
    policy: str
    compute_dtype: str
    variable_dtype: str
    builtin: bool = True
    leaf: bool = True
    given: tuple[TensorInfo, ...] | None = None
    received: tuple[TensorInfo, ...] = ()
    entry: tuple[str, ...] = ()
    outputs: tuple[TensorInfo, ...] = ()
    variables: dict[str, VariableDtypes] = Field(default_factory=dict)
    autocast: tuple[str, ...] = ()
    #: What this call's own dtype-changing steps lost: its autocast, (a functional model) its
    #: inputs' conversion to their ``keras.Input`` dtypes, and its ops' reads of variables in
    #: another dtype (``variable-read``: a float32 kernel read as float16).
    losses: tuple[CastLoss, ...] = ()
    error: ErrorInfo | None = None
    retried: str | None = None
    softmax: bool = False
    final_output: bool = False
    trace: tuple[TraceStep, ...] = ()

    @property
    def spelled(self) -> str:
        """The class as a fix writes it (:attr:`constructor`, else ``keras.layers.<class>``)."""
        return self.constructor or f"keras.layers.{self.layer_class}"

    def row(self) -> dict[str, Any]:
        """The flat row shown in tables and frames (keys: :data:`ROW_COLUMNS`, then
        ``compute`` and ``variable``)."""
        return {
            "path": self.path,
            "layer": self.layer_class,
            "policy": self.policy,
            "compute": self.compute_dtype,
            "variable": self.variable_dtype,
            "given": _dtypes_text(self.given),
            "received": _dtypes_text(self.received),
            "output": _dtypes_text(self.outputs)
            if self.error is None or self.retried
            else "raised",
            "variables": ", ".join(
                f"{name}: {v.stored}" + (f"→{v.read}" if v.read and v.read != v.stored else "")
                for name, v in self.variables.items()
            ),
            "events": "; ".join(
                [*self.autocast, *(_lost_text(x) for x in self.losses), *self._failure()]
            ),
        }

    def _failure(self) -> list[str]:
        if self.error is None:
            return []
        raised = f"raised {self.error.type}"
        return [f"{raised}; {self.retried}" if self.retried else raised]


def _lost_text(loss: CastLoss) -> str:
    """``lost: ...`` (``lost reading variable kernel: ...`` for a variable read)."""
    read = f" reading {loss.where}" if loss.step == "variable-read" else ""
    return f"lost{read}: {loss.text()}"


class Finding(Record):
    """One hazard: what, how bad, where, why, and the code that fixes it: only a fix the
    audit ran on a copy and saw clear the finding (:attr:`proof`)."""

    kind: FindingKind
    severity: Severity
    path: str
    message: str
    fix: str = ""
    details: dict[str, JsonValue] = Field(default_factory=dict)
    step: TraceStep | None = None
    #: What the step named lost, in numbers (a ``lossy-cast`` finding).
    loss: CastLoss | None = None
    #: What the audit did with the fix: run on a copy and proven (then :attr:`fix` is that
    #: change), or why none is shown.
    proof: FixProof | None = None

    def heading(self) -> str:
        """The finding's kind as a summary line shows it, with the real dtype where the kind's
        name says another: ``float16-output (bfloat16)`` for a bfloat16 output (the kind,
        API, names the 16-bit floats after float16).

        >>> Finding(kind="float16-output", severity="info", path="m", message="",
        ...         details={"output": "bfloat16"}).heading()
        'float16-output (bfloat16)'
        """
        output = self.details.get("output")
        if self.kind == "float16-output" and isinstance(output, str) and output != "float16":
            return f"{self.kind} ({output})"
        return self.kind

    def where(self) -> str:
        """The op and the line where the problem first appears (``""`` when not traced):
        ``ops.exp at model.py:12: y = ops.exp(x)``."""
        if self.step is None:
            return ""
        src = self.step.source
        at = f" at {src.short}: {src.text}" if src is not None else ""
        return f"{self.step.op}{at}"


class LayerDifference(Record):
    """A layer call whose dtypes differ between the eager call and ``model.predict`` (``run``:
    ``"predict"``, or ``"dataset"`` for ``model.predict`` on a ``tf.data.Dataset``)."""

    path: str
    layer_class: str
    call_index: int = 0
    #: ``"received"`` (what ``call()`` got) or ``"output"``.
    where: str
    eager: tuple[str, ...] = ()
    predict: tuple[str, ...] = ()
    run: Literal["predict", "dataset"] = "predict"

    def text(self) -> str:
        """``discretization output: eager int64, predict float32``."""
        name = self.path.rsplit("/", 1)[-1]
        return (
            f"{name} {self.where}: eager {', '.join(self.eager) or '-'}, "
            f"{self.run} {', '.join(self.predict) or '-'}"
        )


class PredictReport(Record):
    """``model.predict`` beside the eager call (``mode="predict"``): how predict ran, its
    outputs (values read only there: inside a compiled function tensors are symbolic), the
    inf/NaN count of each output in both, and the layers whose dtypes differ."""

    compiled: bool
    execution: str
    outputs: tuple[TensorInfo, ...] = ()
    nonfinite: tuple[int, ...] = ()
    eager_outputs: tuple[TensorInfo, ...] = ()
    eager_nonfinite: tuple[int, ...] = ()
    differences: tuple[LayerDifference, ...] = ()
    #: What ``model.predict`` raised where the eager call ran, the layer it stopped in and
    #: what that layer's call raised (Keras may re-raise it as another error on jax).
    error: ErrorInfo | None = None
    failed_at: str | None = None
    cause: ErrorInfo | None = None
    #: The file of Keras's data adapters that raised ``error``: predict refused the sample
    #: before any compiled function or layer ran (``keras/src/trainers/data_adapters/...``).
    refused_by: str | None = None

    def text(self) -> str:
        """``model.predict, compiled by jax.jit: float32 (0 inf/NaN); eager call: float32 (0
        inf/NaN)``."""

        def outs(infos: tuple[TensorInfo, ...], bad: tuple[int, ...]) -> str:
            return ", ".join(f"{t.dtype} ({n} inf/NaN)" for t, n in zip(infos, bad)) or "-"

        if self.error is not None:
            at = (
                f" in {self.failed_at or self.refused_by}"
                if self.failed_at or self.refused_by
                else ""
            )
            return (
                f"{self.execution}: raised {self.error.type}{at}; eager call: "
                f"{outs(self.eager_outputs, self.eager_nonfinite)}"
            )
        return (
            f"{self.execution}: {outs(self.outputs, self.nonfinite)}; "
            f"eager call: {outs(self.eager_outputs, self.eager_nonfinite)}"
        )


class AuditReport(Record):
    """What ``check_model`` / ``%dtype_check`` found: the per-layer dtype flow and the findings."""

    #: The dtype-flow table's columns (:data:`ROW_COLUMNS`), read from the report by a view
    #: that does not import the audit's records at its own import (the text view: a cached
    #: probe's answer draws no audit).
    row_columns: ClassVar[tuple[str, ...]] = ROW_COLUMNS
    model: str
    model_class: str
    backend: str
    policy: str
    policy_override: str | None = None
    sample: tuple[TensorInfo, ...] = ()
    layers: tuple[LayerCall, ...] = ()
    findings: tuple[Finding, ...] = ()
    backends: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    timings: dict[str, float] = Field(default_factory=dict)
    #: How the model ran (:data:`AUDIT_MODES`); ``layers`` are the calls of that run (under
    #: ``"predict"`` as the compiled function saw them: dtypes, no values).
    mode: AuditMode = "call"
    execution: str = ""
    compiled: bool | None = None
    predict: PredictReport | None = None
    fit: FitReport | None = None
    #: What ``quantize=`` did to the audited copy (``layers`` are that copy's calls).
    quantization: QuantizationReport | None = None
    #: ``mode="save"``: each format's save and load, compared layer by layer.
    roundtrip: RoundTripReport | None = None
    #: Each leaf layer output against the same model in float32 (a model computing in a
    #: 16-bit float, ``mode="call"``), in forward order; :meth:`precision_goes` ranks them.
    damage: tuple[LayerDamage, ...] = ()
    #: One "keep these layers in float32" set for all the findings whose fix keeps layers in
    #: float32, chosen from the measured ranges and run at once on a copy, with what it did
    #: (``None``: fewer than two such findings were proven).
    float32_set: FixProof | None = None
    #: Which Keras ran the audit (``ProbeSpec.engine``): ``None`` is the installed Keras;
    #: an engine audits the model rebuilt from its config in that release's worker.
    engine: str | None = None
    #: The Keras that ran it (``"3.11.3"``); empty when not recorded.
    keras: str = ""
    #: The audited pass as a graph: every layer once, the tensors between calls with their
    #: dtypes (``None``: not drawn: a Keras 2 model, or the graph could not be made, said in
    #: :attr:`notes`). ``dx.DtypeExplorer(audit=report)`` lays it out.
    graph: ModelGraph | None = None

    #: What ``check_model`` was asked, as data, for "copy as code" (:meth:`as_code`): the
    #: sample, the arguments, the model's config where a script can rebuild it.
    question: AuditQuestion | None = None

    def as_code(self) -> CodeCopy:
        """This audit as code: the ``dx.check_model(model, ...)`` call that runs it again (on
        your ``model``: the one name to fill in), and a raw-Keras script of the question,
        ready for a bug report: the model made again from its recorded config (or loaded from
        a path you fill in), run in the audit's mode, every layer's dtypes printed.

        Returns:
            A ``CodeCopy`` (``.dx``, ``.script``, ``.fill_in``).

        >>> import keras, dtype_explorer as dx
        >>> inputs = keras.Input((3,), dtype="float64")
        >>> model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
        >>> code = dx.check_model(model).as_code()
        >>> code.fill_in[0], "keras.saving.deserialize_keras_object(config)" in code.script
        ('model: your model', True)
        """
        return audit_code(self)

    def precision_goes(self) -> tuple[list[LayerDamage], str]:
        """:attr:`damage` sorted by error (largest first) and the first layer whose error
        jumps (``records.where_precision_goes``)."""
        return where_precision_goes(self.damage)

    def figure(self) -> go.Figure:
        """The training run of ``mode="fit", steps=N`` over its steps (``FitReport.figure``):
        the loss and the loss scale, skipped steps marked, the first inf/NaN gradient named."""
        if self.fit is None:
            raise InvalidSpecError(
                "figure() draws the training steps of check_model(model, x, mode='fit', "
                f"steps=N); this audit ran mode={self.mode!r}"
            )
        return self.fit.figure()

    def by_kind(self, kind: str) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]

    def to_frame(self, what: Literal["layers", "findings"] = "layers"):
        """A pandas DataFrame of the dtype-flow rows (default) or of the findings."""
        import pandas as pd

        if what == "findings":
            columns = ["severity", "kind", "path", "message", "fix", "proof"]
            rows = [
                {
                    **{c: getattr(f, c) for c in columns[:-1]},
                    "proof": "" if f.proof is None else f.proof.summary(),
                }
                for f in self.findings
            ]
            return pd.DataFrame(rows, columns=columns)
        if what != "layers":
            raise InvalidSpecError(f"to_frame shows 'layers' or 'findings', not {what!r}")
        return pd.DataFrame([call.row() for call in self.layers])

    def summary(self) -> str:
        counts = {s: sum(f.severity == s for f in self.findings) for s in SEVERITIES}
        found = (
            ", ".join(f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items() if n)
            or "no findings"
        )
        under = f" under {self.policy_override}" if self.policy_override else ""
        if self.quantization is not None:
            under += f" {self.quantization.heading}"
        mode = f" ({self.execution})" if self.mode != "call" and self.execution else ""
        return printable(
            f"dtype check of {self.model_class} '{self.model}'{under} on {self.backend}{mode}: "
            f"{found}"
        )

    def __repr__(self) -> str:
        return self.__str__()


def _dtypes_text(infos: tuple[TensorInfo, ...] | None) -> str:
    return "" if infos is None else ", ".join(t.dtype for t in infos)

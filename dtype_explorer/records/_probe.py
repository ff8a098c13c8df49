"""One question and its answer: ``ProbeSpec`` in, ``ProbeResult`` out, JSON all the way.

Facts derived from an answer (its ``outcome``, the cast-path steps worth showing) are computed
here, once, on the record; every view (widget, magic, CLI, notebooks) reads them and computes
no dtype fact itself.

>>> spec = ProbeSpec(target="Dense", input_dtypes=("uint8",), kwargs={"units": 4})
>>> ProbeSpec.from_dict(spec.to_dict()) == spec
True
"""

from __future__ import annotations

import json
import re
from typing import Literal

from pydantic import Field, JsonValue, computed_field, field_validator, model_validator

from dtype_explorer.backends import LIBRARIES
from dtype_explorer.errors import own_words, printable
from dtype_explorer.records._as_code import CodeCopy, KerasCall
from dtype_explorer.records._as_code_probe import probe_code
from dtype_explorer.records._base import ComputedRecord, Record
from dtype_explorer.records._engine import answered_by, pinned_engine
from dtype_explorer.records._fit import FitReport
from dtype_explorer.records._numerics import Numerics, ValueFinding
from dtype_explorer.records._quantize_layer import LayerQuantization
from dtype_explorer.records._trace import TraceStep, call_steps
from dtype_explorer.records._values import InputValue, structure_leaves, values_digest

Status = Literal["ok", "error", "invalid", "crashed", "timeout"]
Verdict = Literal[
    "as-documented", "deviates", "declared-mismatch", "undocumented", "error", "diverges"
]
#: ``asked``: the user's value converted to the ``input_dtype`` they asked, before Keras saw it.
Stage = Literal["input", "asked", "converted", "model", "autocast", "variables", "output"]
STAGES: tuple[Stage, ...] = (
    "input",
    "asked",
    "converted",
    "model",
    "autocast",
    "variables",
    "output",
)
#: The words of each verdict (the widget's badges and the comparison say the same).
VERDICT_WORDS: dict[str, str] = {
    "as-documented": "as documented",
    "deviates": "deviates from the docs",
    "declared-mismatch": "declared dtype differs from observed",
    "undocumented": "no documented rule",
    "error": "raised",
    "diverges": "backends diverge",
}
#: The verdicts a summary gives way to ``values-wrong`` where the values were found wrong: a
#: dtype as documented, or one Keras documents no rule for (``ProbeResult.shown_verdict``).
VALUES_OUTRANK = ("as-documented", "undocumented")
#: The error ``where`` of a backend that cannot run a request the others can (fit on numpy).
UNSUPPORTED = "not supported here"
#: How a probe runs its target (``ProbeSpec.mode``): the eager call, the eager call with
#: ``training=True``, inside a functional ``keras.Model`` (``Model.__call__``), through
#: ``model.predict``, one training step (``model.fit``), or inside ``tf.data.Dataset.map``.
Mode = Literal["call", "training", "model", "predict", "fit", "dataset"]
MODES: tuple[Mode, ...] = ("call", "training", "model", "predict", "fit", "dataset")
#: The float32 matmul precision a probe asks for (``ProbeSpec.precision``): ``"highest"``
#: (full float32: TF32 off everywhere), ``"tf32"`` (TF32 allowed where the GPU has it) or
#: ``"default"`` (each backend's own default: TF32 on for jax and tensorflow on Ampere and
#: later, off for torch's matmuls).
Precision = Literal["highest", "tf32", "default"]
PRECISIONS: tuple[Precision, ...] = ("highest", "tf32", "default")


class ProbeSpec(Record):
    """One question: this target, on these input dtypes, under this policy, on this backend.

    ``target`` is a ``keras.layers`` class name (``"Dense"``), a ``keras.ops`` function
    (``"ops.add"``) or ``"custom:<QualName>"`` for a user layer shipped alongside the spec.
    ``shapes``/``values``/``kwargs`` override the catalog's defaults.
    """

    target: str
    input_dtypes: tuple[str, ...] = ("float32",)
    policy: str = "float32"
    backend: str = "numpy"
    kwargs: dict[str, JsonValue] = Field(default_factory=dict)
    shapes: tuple[tuple[int, ...], ...] | None = None
    values: str = "default"
    floatx: str | None = None
    seed: int = 0
    mode: Mode = "call"
    #: Which Keras answers (``records.engine_spec``; ``None``: the installed one); never
    #: ``"nightly"``: a spec names the build that answers, ``"keras-nightly==3.16.0.dev..."``.
    engine: str | None = None
    #: The user's own values (``values=`` given arrays, lists or Python numbers), one leaf each,
    #: in the order of ``structure``; ``input_dtypes`` and ``shapes`` are then one per leaf.
    user_values: tuple[InputValue, ...] | None = None
    #: How the leaves nest into the target's inputs: ``None`` when input ``i`` is leaf ``i``;
    #: else one node per input, a node being a leaf's number, ``{"tuple": [nodes]}``,
    #: ``{"list": [nodes]}`` or ``{"dict": [[key, node], ...]}``.
    structure: JsonValue = None
    #: Keyword arguments of the call itself (``{"training": True}``), as JSON values.
    call_kwargs: dict[str, JsonValue] = Field(default_factory=dict)
    #: The float32 matmul precision set for the probe (:data:`PRECISIONS`) and put back
    #: afterwards; ``None`` leaves the backend's settings as they are.
    precision: Precision | None = None
    #: The parts of the question that ``make_spec`` filled in because the user gave none
    #: (``"input_dtypes"``, ``"policy"``); the answer lists them in ``ProbeResult.supplied``.
    filled: tuple[Literal["input_dtypes", "policy"], ...] = ()
    #: A layer quantized as ``Model.quantize`` does it before the call (``layer.quantize``):
    #: a mode of the Keras release that answers (``"int8"``, ``"int4"``, ``"int4/<block
    #: size>"``, ``"float8"``), checked there; ``None``: not quantized (a quantized policy,
    #: ``"int8_from_float32"``, builds the layer quantized without it).
    quantize: str | None = None

    @field_validator("quantize")
    @classmethod
    def _quantize_name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[a-z][a-z0-9_]*(/[0-9]+)?", value):
            raise ValueError(
                "quantize takes a quantization mode's name (int8, int4, int4/<block size>, "
                f"float8, ...) or None. Received: quantize={value!r}"
            )
        return value

    @field_validator("engine", mode="before")
    @classmethod
    def _engine_name(cls, value: object) -> str | None:
        return pinned_engine(value)  # an answer and its cache key name the build that gave it

    @model_validator(mode="after")
    def _structure_fits_values(self) -> ProbeSpec:
        """``structure`` nests the user's values: only with them, not for an op, and using
        each leaf exactly once (``[0, 0]`` would call ``Dense(x, x)``)."""
        if self.structure is None:
            return self
        if self.user_values is None:
            raise ValueError(
                f"structure nests the values given with values=; without them it must be "
                f"None. Received: structure={str(self.structure)[:80]}"
            )
        if self.target.startswith("ops."):
            raise ValueError(
                f"structure: {self.target} takes one value per input, not a structure. "
                f"Received: structure={str(self.structure)[:80]}"
            )
        leaves = structure_leaves(self.structure)
        if sorted(leaves) != list(range(len(self.user_values))):
            raise ValueError(
                f"structure must use each of the {len(self.user_values)} values exactly once "
                f"(leaves 0 to {len(self.user_values) - 1}). Received: structure="
                f"{str(self.structure)[:80]}"
            )
        return self

    def cache_key(self) -> str:
        """A stable string naming this spec (used with the versions as the cache key). The
        defaults of what came later (mode ``"call"``, engine ``None``, no user values,
        structure or call kwargs, precision and quantize ``None``) are left out, so answers
        stored before them still answer; every other value is in the key, ``user_values`` as a
        SHA-256 of their data. ``filled`` is always in it: an answer stored before it lists
        nothing supplied."""
        data = self.model_dump(mode="json", exclude={"user_values"})
        data["user_values"] = None
        if data["mode"] == "call":
            del data["mode"]
        if data["engine"] is None:
            del data["engine"]
        for name in ("precision", "quantize"):
            if data[name] is None:
                del data[name]
        for name in ("user_values", "structure", "call_kwargs"):
            if not data[name]:
                del data[name]
        if self.user_values:
            data["user_values"] = values_digest(self.user_values)
        return json.dumps(data, sort_keys=True, separators=(",", ":"))


class CastStep(Record):
    """The dtype of one tensor at one stage of a call.

    ``index`` numbers inputs/outputs of multi-tensor calls; ``name`` names a variable.
    ``changed`` says whether this stage changed the dtype of the previous one.
    """

    stage: Stage
    dtype: str
    note: str = ""
    index: int | None = None
    name: str | None = None
    changed: bool = False


class Supplied(Record):
    """A part of the question the tool chose because the user gave none: the sample, a
    catalog default kwarg, the policy, the shape, the input dtype (or, for an instance the
    user asked under another policy, the layer rebuilt under it).

    >>> Supplied(part="shape", value="(2, 4)", why="no shape given: the catalog's").text()
    "shape: (2, 4) (no shape given: the catalog's)"
    """

    part: str
    value: str
    why: str = ""

    def text(self) -> str:
        """``part: value (why)``."""
        return f"{self.part}: {self.value}" + (f" ({self.why})" if self.why else "")


class VariableDtypes(Record):
    """A variable as stored (``stored``) and as ``call()`` read it (``read``)."""

    stored: str
    read: str | None = None
    autocast: bool = True


class ErrorInfo(Record):
    type: str
    message: str
    where: str = "call"


#: Who states an expected dtype: the policy's rule, ``keras.backend.result_type``, an array
#: library's own function (``numpy``, ``jax``, ``torch``, ``tensorflow``: its NumPy API), the
#: op of OpenVINO's op set (``openvino``), or Keras's symbolic call (``declared``).
ExpectationSource = Literal[
    "policy", "result_type", "numpy", "jax", "torch", "tensorflow", "openvino", "declared"
]

#: What a library with no call comparable with Keras's op is shown as.
NO_COUNTERPART = "no counterpart"


class Expectation(ComputedRecord):
    """One independent statement of the output dtype, and who makes it.

    >>> Expectation(source="torch", no_counterpart="takes a Python function").shown
    'no counterpart'
    >>> Expectation(source="numpy", error="TypeError: ufunc 'invert' not supported").shown
    'raises'
    """

    source: ExpectationSource
    dtype: str | None = None
    basis: str = ""
    #: The library's function raised (its error, in a line), or Keras's rule raised.
    error: str | None = None
    #: Why the library has no call comparable with Keras's op (``None``: it has one, or the
    #: source is no library).
    no_counterpart: str | None = None
    #: The tool's own process failed to make it (a killed reference process): never cached.
    tool_failed: bool = False

    @computed_field  # type: ignore[prop-decorator]
    @property
    def shown(self) -> str:
        """What every view shows for it: its dtype, ``no counterpart``, ``raises`` or ``-``
        (the reason or the error go beside it, as each medium lays it out)."""
        if self.dtype:
            return self.dtype
        if self.no_counterpart is not None:
            return NO_COUNTERPART
        return "raises" if self.error else "-"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def why(self) -> str:
        """Why it says what it says: the no-counterpart reason, the error or the basis."""
        if self.no_counterpart is not None:
            return f"{NO_COUNTERPART}: {self.no_counterpart}"
        return self.error or self.basis

    @computed_field  # type: ignore[prop-decorator]
    @property
    def name(self) -> str:
        """How tables name the source: ``policy``, ``result_type``, ``np``, ``jnp``, ..."""
        return LIBRARIES.get(self.source, self.source)


class ProbeResult(ComputedRecord):
    """What one probe found: the cast path, the documented, declared and observed dtypes, the
    verdict, numerics and versions (each field is described in docs/architecture.md)."""

    spec: ProbeSpec
    status: Status
    backend: str
    device: str = "cpu"
    output_dtype: str | None = None
    output_dtypes: tuple[str, ...] = ()
    documented_dtype: str | None = None
    declared_dtype: str | None = None
    verdict: Verdict = "error"
    basis: tuple[str, ...] = ()
    result_type_args: tuple[str, ...] = ()
    cast_path: tuple[CastStep, ...] = ()
    variables: dict[str, VariableDtypes] = Field(default_factory=dict)
    error: ErrorInfo | None = None
    numerics: Numerics | None = None
    timings: dict[str, float] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=dict)
    #: The settings that change this answer's numbers, read in the process that ran it once
    #: its backend imported, for that backend only: ``device`` (``"CPU"``, or ``"GPU <model>
    #: (compute capability X.Y)"``), the matmul precision (``jax_default_matmul_precision``,
    #: ``torch.float32_matmul_precision``, ``torch.backends.cuda.matmul.allow_tf32``,
    #: ``tf.tensor_float_32_execution``) and TensorFlow's XLA auto-jit (``tf.xla_auto_jit``,
    #: ``TF_XLA_FLAGS``); see ``keras_run._environment``. ``environment_text`` says it in a line.
    environment: dict[str, str] = Field(default_factory=dict)
    cached: bool = False
    #: Process-wide settings of Keras or its backend that this probe changed in its worker
    #: (``keras.epsilon``, ``jax.jax_enable_x64``, ...); the worker put them back. An answer
    #: with any is never cached.
    state_changed: tuple[str, ...] = ()
    #: Warnings the call of the target raised in its worker (``"UserWarning: ..."``, a Keras
    #: deprecation about the layer asked): about the question, so kept with its answer.
    #: Framework start-up noise goes to the worker's log, never here.
    warnings: tuple[str, ...] = ()
    trace: tuple[TraceStep, ...] = ()
    trace_dropped: int = 0
    #: The kernel path the probed op itself took, where the backend tells (an op probe's own
    #: op is not in its trace): torch's int8 matmul, ``"torch._int_mm"`` or a fallback.
    kernel: str | None = None
    #: How the target ran, in words (``"eager call"``, ``"model.predict under jax.jit"``).
    execution: str = ""
    #: Whether the run was a compiled function (``jax.jit``, ``tf.function``); ``None`` when
    #: the mode has no compiled form (an eager call).
    compiled: bool | None = None
    #: The training step of ``mode="fit"``.
    fit: FitReport | None = None
    #: What the op trace covers in this mode, or why there is none (``""`` for an eager call,
    #: traced in full): inside a compiled function dtypes per op, not values.
    trace_note: str = ""
    #: Every expectation side by side: the policy rule, ``result_type`` on this backend, the
    #: array libraries (ops), the declared spec. ``expected_by`` says which one the verdict used.
    expectations: tuple[Expectation, ...] = ()
    expected_by: str | None = None
    #: One verdict per output (``verdict`` is the worst of them).
    output_verdicts: tuple[Verdict, ...] = ()
    #: Every part of the question the tool supplied because the user gave none (the sample,
    #: default kwargs, the policy, the shape, the input dtype); empty when all were given.
    supplied: tuple[Supplied, ...] = ()
    #: What quantization did to the probed layer (``spec.quantize``, or a quantized policy):
    #: its stored variables and its compute path read from the trace; ``None`` otherwise.
    quantization: LayerQuantization | None = None
    #: What Keras was called with, for "copy as code" (``None``: the probe did not reach it).
    called: KerasCall | None = None

    def as_code(self) -> CodeCopy:
        """This question as code, for a notebook or a bug report.

        Returns:
            A ``CodeCopy``: ``.dx`` (the ``dx.probe`` call), ``.script`` (raw Keras), ``.fill_in``.

        >>> import dtype_explorer as dx
        >>> "keras.layers.Dense(units=2)" in dx.probe("Dense", kwargs={"units": 2}).as_code().script
        True
        """
        return probe_code([self])

    def supplied_text(self) -> str:
        """``"supplied by dtype-explorer: shape (2, 4); ..."``, or ``""`` when nothing was."""
        if not self.supplied:
            return ""
        return "supplied by dtype-explorer: " + "; ".join(s.text() for s in self.supplied)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def outcome(self) -> str:
        """What happened, in a word or two: the output dtype (``"float32"``), ``"raises
        ValueError"``, ``"timeout"`` or ``"crashed"``. Two answers agree when their outcomes do."""
        if self.ok:
            return str(self.output_dtype)
        if self.status in ("timeout", "crashed"):
            return self.status
        if self.tool_failed:
            return f"tool failure ({self.error.type})"
        return f"raises {self.error.type}" if self.error else "raises"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def headline(self) -> str:
        """What this answer came to, in a sentence, Keras's own words first: ``float32, as
        documented``; ``raises ValueError: ...`` (the last line of a ``tf.function``'s "in user
        code:" traceback, not its first); ``not supported here: ...`` (:attr:`unsupported`);
        ``dtype-explorer failed (no answer of Keras): ...`` (:attr:`tool_failed`, never "raises").

        >>> r = ProbeResult(spec=ProbeSpec(target="Dense", backend="jax", mode="dataset"),
        ...     status="error", backend="jax", error=ErrorInfo(type="NotImplementedError",
        ...     message="in user code:\\n  File x\\n  NotImplementedError: Cannot convert"))
        >>> r.headline
        'raises NotImplementedError: Cannot convert'
        """
        if self.ok:
            said = f"{self.output_dtype}, {VERDICT_WORDS.get(self.verdict, self.verdict)}"
            wrong = self.value_findings()
            return said + (f", but the values are wrong ({wrong[0].kind})" if wrong else "")
        if self.status in ("timeout", "crashed"):
            return "the probe timed out" if self.status == "timeout" else "the worker crashed"
        if self.error is None:
            return f"raises ({self.status})"
        if self.unsupported:
            return f"{UNSUPPORTED}: {self.error.message}"
        head = "dtype-explorer failed (no answer of Keras):" if self.tool_failed else "raises"
        return f"{head} {self.error.type}: {own_words(self.error.message, self.error.type)}"

    @property
    def unsupported(self) -> bool:
        """Whether this backend cannot run the question (``error.where`` is ``UNSUPPORTED``:
        ``mode="fit"`` on numpy, a layer in ``tf.data`` off tensorflow): no say in a verdict
        across backends; every view draws it as not supported (⊘), not as an error."""
        return self.error is not None and self.error.where == UNSUPPORTED

    @property
    def tool_failed(self) -> bool:
        """Whether dtype-explorer's own code failed (``error.where == "tool"``): no answer of
        Keras, never compared with one."""
        return self.error is not None and self.error.where == "tool"

    def steps(self, stage: Stage) -> list[CastStep]:
        return [step for step in self.cast_path if step.stage == stage]

    def notable_steps(self, *, variables: bool = False) -> list[CastStep]:
        """The cast path in brief: each input, every step that changed a dtype, and each
        output; variables whose read dtype differs from the stored one with ``variables``."""
        return [
            step
            for step in self.cast_path
            if (variables or step.stage != "variables")
            and (step.stage in ("input", "output") or step.changed)
        ]

    def path_text(self) -> str:
        """The cast path on one line, changed variables included:
        ``uint8 -> float16 (autocast) -> float16 (kernel) -> float16 (output)``."""
        return " -> ".join(_step_text(step) for step in self.notable_steps(variables=True))

    def call_trace(self) -> list[TraceStep]:
        """The op trace of the call itself: the steps run while building the layer left out."""
        return call_steps(self.trace)

    def first_nonfinite_step(self) -> TraceStep | None:
        """The first step of the call whose output held inf/NaN made from finite inputs."""
        return next((s for s in self.trace if s.first_nonfinite), None)

    def first_dtype_change(self) -> TraceStep | None:
        """The first step of the call that changed a dtype (a promotion, a real cast, ...)."""
        return next((s for s in self.call_trace() if s.changes_dtype), None)

    def float16_overflow_steps(self) -> list[TraceStep]:
        """Steps of the call whose float16 output (or a child's) left float16's range."""
        return [s for s in self.call_trace() if s.float16_overflow or s.hidden_overflow()]

    def expectation(self, source: str) -> Expectation | None:
        """The expectation of ``source`` (``"policy"``, ``"result_type"``, ``"numpy"``, ...)."""
        return next((e for e in self.expectations if e.source == source), None)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def environment_text(self) -> str:
        """:attr:`environment` on one line, the device first, as every view shows it:
        ``GPU NVIDIA H200 (compute capability 9.0) · torch.float32_matmul_precision highest``
        (``""`` when none was read: an old answer, a worker that could not start).

        >>> r = ProbeResult(spec=ProbeSpec(target="Dense"), status="ok", backend="jax",
        ...                 environment={"jax_default_matmul_precision": "default",
        ...                              "device": "CPU"})
        >>> r.environment_text
        'CPU · jax_default_matmul_precision default'
        """
        env = dict(self.environment)
        device = env.pop("device", None)
        said = [f"{name} {value}" for name, value in sorted(env.items())]
        return " · ".join([device, *said] if device else said)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def disagreeing(self) -> tuple[str, ...]:
        """The sources of :meth:`disagreements` (``("result_type",)``): travels in the JSON, so
        the widget's page flags them without comparing dtypes itself."""
        return tuple(e.source for e in self.disagreements())

    @computed_field  # type: ignore[prop-decorator]
    @property
    def rules_disagreement(self) -> str | None:
        """:meth:`rules_disagree`, in the JSON for the widget's page."""
        return self.rules_disagree()

    def disagreements(self) -> list[Expectation]:
        """The expectations that name a dtype other than the one the verdict used (or, with no
        winner, than the observed dtype)."""
        wanted = self.expectation(self.expected_by) if self.expected_by else None
        against = wanted.dtype if wanted is not None else self.output_dtype
        return [e for e in self.expectations if e.dtype is not None and e.dtype != against]

    def rules_disagree(self) -> str | None:
        """``"Keras's rules disagree here: ..."`` when the policy rule and ``result_type``
        name different dtypes (or, for an op, the array libraries keep a float width that
        ``result_type`` narrows); ``None`` when they agree.

        >>> import dtype_explorer as dx
        >>> r = dx.probe("Dense", "float64", policy="float64", backend="torch")   # doctest: +SKIP
        >>> r.verdict, r.expected_by, r.rules_disagree()[:34]                     # doctest: +SKIP
        ('as-documented', 'policy', "Keras's rules disagree here: policy")
        """
        rt = self.expectation("result_type")
        if rt is None or rt.dtype is None:
            return None
        other = self.expectation("policy")
        if other is None or other.dtype is None:
            libraries = [
                e for e in self.expectations if e.source in LIBRARIES and e.dtype is not None
            ]
            other = next((e for e in libraries if e.source == self.expected_by), None)
        if other is None or other.dtype == rt.dtype:
            return None
        return (
            f"Keras's rules disagree here: {other.name} says {other.dtype} ({other.basis}), "
            f"result_type says {rt.dtype} ({rt.basis})"
        )

    def value_findings(self) -> tuple[ValueFinding, ...]:
        """Wrong numbers in a right dtype (``numerics.findings``), each at its first element.

        >>> import dtype_explorer as dx
        >>> r = dx.probe("ops.add", "uint8", values="image", backend="jax")   # doctest: +SKIP
        >>> r.value_findings()[0].kind, r.value_findings()[0].element         # doctest: +SKIP
        ('wraparound', (0, 0))
        """
        return self.numerics.findings if self.numerics is not None else ()

    @computed_field  # type: ignore[prop-decorator]
    @property
    def shown_verdict(self) -> str:
        """The verdict every view shows (in the JSON for the widget): ``values-wrong`` where
        ``value_findings`` found the values wrong and the dtype is as documented, or Keras
        documents no rule for it (no ✓, and no mere "no documented rule", next to wrong
        numbers: ``ops.sum`` of float16 tens making inf); ``unsupported`` where this backend
        cannot run the question. A dtype found against the docs keeps its verdict."""
        wrong = self.ok and self.value_findings() and self.verdict in VALUES_OUTRANK
        return "unsupported" if self.unsupported else "values-wrong" if wrong else self.verdict

    def error_text(self) -> str:
        """``"ValueError: the line of the message that says it"`` (:func:`own_words`), or ``""``."""
        said = own_words(self.error.message, self.error.type) if self.error else ""
        return f"{self.error.type}: {said}" if self.error else ""

    def summary(self) -> str:
        """One line: ``jax  Dense uint8 -> float32  as-documented`` (its :attr:`shown_verdict`; an
        engine: ``[keras ..]``)."""
        inputs = ",".join(self.spec.input_dtypes)
        said = self.output_dtype if self.ok else self.error_text() or self.status
        said = self.headline if self.unsupported else said
        spec = self.spec
        mode = f" mode={spec.mode}" if spec.mode != "call" else ""
        engine = f"  [{answered_by(spec.engine, self.versions)}]" if spec.engine else ""
        return printable(
            f"{self.backend:<10} {spec.target} [{spec.policy}]{mode} {inputs} -> {said}"
            f"  ({self.shown_verdict}){engine}"
        )

    def __repr__(self) -> str:
        return f"<ProbeResult {self.summary()}>"


def _step_text(step: CastStep) -> str:
    """``float16 (autocast)``, ``float16 (kernel)``; a leaf of a structured input or output
    by its stage and name: ``int32 (input segmentation_masks)``."""
    if step.stage == "variables":
        return f"{step.dtype} ({step.name or step.stage})"
    if step.name is not None:
        return f"{step.dtype} ({step.stage} {step.name})"
    return step.dtype if step.stage == "input" else f"{step.dtype} ({step.stage})"

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
from collections.abc import Iterator
from typing import Literal

from pydantic import Field, JsonValue, computed_field

from dtype_explorer.errors import first_line
from dtype_explorer.records._base import Record
from dtype_explorer.records._trace import TraceDivergence, TraceStep, call_steps, first_divergence

Status = Literal["ok", "error", "invalid", "crashed", "timeout"]
Verdict = Literal[
    "as-documented", "deviates", "declared-mismatch", "undocumented", "error", "diverges"
]
Stage = Literal["input", "converted", "autocast", "variables", "output"]
STAGES: tuple[Stage, ...] = ("input", "converted", "autocast", "variables", "output")


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

    def cache_key(self) -> str:
        """A stable string naming this spec (used with the versions as the cache key)."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))


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


class VariableDtypes(Record):
    """A variable as stored (``stored``) and as ``call()`` read it (``read``)."""

    stored: str
    read: str | None = None
    autocast: bool = True


class ErrorInfo(Record):
    type: str
    message: str
    where: str = "call"


class Numerics(Record):
    """Numerical side effects of running in this dtype.

    ``nonfinite_from_finite`` counts inf/NaN outputs produced from finite inputs;
    ``max_rel_error`` compares with the same layer and weights run in ``reference_dtype``.
    """

    nonfinite_from_finite: int = 0
    output_count: int = 0
    max_abs_output: float | None = None
    max_rel_error: float | None = None
    reference_dtype: str | None = None
    note: str = ""


class ProbeResult(Record):
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
        return f"raises {self.error.type}" if self.error else "raises"

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
        return " -> ".join(
            step.dtype if step.stage == "input" else f"{step.dtype} ({step.name or step.stage})"
            for step in self.notable_steps(variables=True)
        )

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

    def error_text(self) -> str:
        """``"ValueError: first line of the message"``, or ``""``."""
        return f"{self.error.type}: {first_line(self.error.message)}" if self.error else ""

    def summary(self) -> str:
        """One line: ``jax  Dense uint8 -> float32  as-documented``."""
        inputs = ",".join(self.spec.input_dtypes)
        said = self.output_dtype if self.ok else self.error_text() or self.status
        spec = self.spec
        return (
            f"{self.backend:<10} {spec.target} [{spec.policy}] {inputs} -> {said}  ({self.verdict})"
        )

    def __repr__(self) -> str:
        return f"<ProbeResult {self.summary()}>"


class ProbeSet(Record):
    """One probe spec answered by several backends, with the cross-backend verdict."""

    results: tuple[ProbeResult, ...]

    @property
    def verdict(self) -> Verdict:
        """``diverges`` when backends disagree on success or output dtype, else the shared one."""
        outcomes = {(r.ok, r.output_dtype) for r in self.results}
        if len(outcomes) > 1:
            return "diverges"
        verdicts = {r.verdict for r in self.results}
        return verdicts.pop() if len(verdicts) == 1 else "deviates"

    @property
    def backends(self) -> tuple[str, ...]:
        return tuple(r.backend for r in self.results)

    def first_divergence(self) -> TraceDivergence | None:
        """The first op where the backends' traces of the call part (e.g. jax's conv promotes
        uint8 where torch's raises), or ``None`` when they agree or were not traced."""
        return first_divergence({r.backend: r.trace for r in self.results})

    def __getitem__(self, backend: str) -> ProbeResult:
        for result in self.results:
            if result.backend == backend:
                return result
        raise KeyError(f"no result for backend {backend!r}; have {list(self.backends)}")

    def __iter__(self) -> Iterator[ProbeResult]:  # type: ignore[override]
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def summary(self) -> str:
        """One line per backend, and the verdict across backends when there are several."""
        lines = [r.summary() for r in self.results]
        if len(self.results) > 1:
            lines.append(f"across backends: {self.verdict}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return f"<ProbeSet {self.results[0].spec.target if self.results else ''}: {self.verdict}>"

"""The data model: one ``ProbeSpec`` in, one ``ProbeResult`` out, JSON all the way.

Every view (widget, magic, CLI, notebooks) reads these objects; none of them computes a
dtype fact itself.

>>> spec = ProbeSpec(target="Dense", input_dtypes=("uint8",), kwargs={"units": 4})
>>> ProbeSpec.from_dict(spec.to_dict()) == spec
True
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from dtype_explorer.errors import first_line

Status = Literal["ok", "error", "invalid", "crashed", "timeout"]
Verdict = Literal[
    "as-documented", "deviates", "declared-mismatch", "undocumented", "error", "diverges"
]
Stage = Literal["input", "converted", "autocast", "variables", "output"]
STAGES: tuple[Stage, ...] = ("input", "converted", "autocast", "variables", "output")
BACKENDS: tuple[str, ...] = ("jax", "tensorflow", "torch", "numpy")


class Record(BaseModel):
    """Base of every record: immutable, strict about unknown fields, JSON round-trips."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        return cls.model_validate(data)

    def to_json(self, **kwargs: Any) -> str:
        """Compact JSON (fields at their defaults left out; ``from_json`` restores them)."""
        return self.model_dump_json(exclude_defaults=True, **kwargs)

    @classmethod
    def from_json(cls, text: str | bytes):
        return cls.model_validate_json(text)


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
    """What one probe found. See ``DESIGN.md`` for the meaning of each field."""

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

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def steps(self, stage: Stage) -> list[CastStep]:
        return [step for step in self.cast_path if step.stage == stage]

    def summary(self) -> str:
        """One line: ``jax  Dense uint8 -> float32  as-documented``."""
        inputs = ",".join(self.spec.input_dtypes)
        if self.status == "ok":
            outcome = f"{inputs} -> {self.output_dtype}"
        elif self.error is not None:
            outcome = f"{inputs} -> {self.error.type}: {first_line(self.error.message)}"
        else:
            outcome = f"{inputs} -> {self.status}"
        spec = self.spec
        return f"{self.backend:<10} {spec.target} [{spec.policy}] {outcome}  ({self.verdict})"

    def __str__(self) -> str:
        from dtype_explorer.text import format_result

        return format_result(self)

    def __repr__(self) -> str:
        return f"<ProbeResult {self.summary()}>"

    def _repr_html_(self) -> str:
        from dtype_explorer.figures import result_html

        return result_html(self)


class ProbeSet(Record):
    """One probe spec answered by several backends, with the cross-backend verdict."""

    results: tuple[ProbeResult, ...]

    @property
    def verdict(self) -> Verdict:
        """``diverges`` when backends disagree on success or output dtype, else the shared one."""
        outcomes = {(r.status == "ok", r.output_dtype) for r in self.results}
        if len(outcomes) > 1:
            return "diverges"
        verdicts = {r.verdict for r in self.results}
        return verdicts.pop() if len(verdicts) == 1 else "deviates"

    @property
    def backends(self) -> tuple[str, ...]:
        return tuple(r.backend for r in self.results)

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
        lines = [r.summary() for r in self.results]
        lines.append(f"across backends: {self.verdict}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return f"<ProbeSet {self.results[0].spec.target if self.results else ''}: {self.verdict}>"

    def _repr_html_(self) -> str:
        from dtype_explorer.figures import probe_set_html

        return probe_set_html(self)

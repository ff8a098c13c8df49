"""A bisection over Keras releases: one question, the releases it ran on, and where the
answer changed.

``dx.bisect`` asks the same question (a ``ProbeSpec`` without an engine) of a few releases
chosen by bisection and keeps each answer here. The facts a view shows (the change found, the
changes seen but not pinned down, what was not looked at) are computed on this record, once.

``changes`` lists every pair of neighbouring *probed* releases whose answers differ (``exact``
when they are neighbours in the range, so ``after_version`` is the first release with the new
answer), ``first_change`` the first exact one, and ``caveat`` says in words that between two
probed releases with the same answer the answer may have changed and changed back unseen (the
research found 17 such cells on numpy, e.g. ``Conv1D(dtype="float64")`` on float32: float32 ->
float64 at 3.7.0 -> float32 at 3.12.0, which a bisection of 3.0.0..3.15.1 reports as "no
change found"). With several changes between the ends, bisection pins one of them (not
necessarily the first); ``exhaustive`` bisections probe every release and list every change.
Only Keras's own answers are compared: a dtype, an error Keras raised, or ``invalid`` (a layer
or keyword the release does not have yet, a change worth finding); a failure of dtype-explorer's
own code (``ProbeResult.tool_failed``) is compared with nothing.

>>> from dtype_explorer.records import BisectProbe, BisectResult, ProbeResult, ProbeSpec
>>> spec = ProbeSpec(target="Discretization", kwargs={"bin_boundaries": [0.5, 1.5, 2.5]})
>>> def answer(version, dtype):
...     result = ProbeResult(spec=spec, status="ok", backend="numpy", output_dtype=dtype)
...     return BisectProbe(version=version, result=result)
>>> b = BisectResult(spec=spec, versions=("3.10.0", "3.11.3", "3.12.0", "3.13.0"),
...                  probes=(answer("3.10.0", "float32"), answer("3.13.0", "int32"),
...                          answer("3.11.3", "float32"), answer("3.12.0", "int32")))
>>> b.first_change.after_version, b.first_change.before, b.first_change.after
('3.12.0', 'float32', 'int32')
>>> b.probed_count, b.exhaustive
(4, False)
>>> b
<BisectResult Discretization on numpy: float32 -> int32 at 3.12.0 (4 of 4 releases probed)>
"""

from __future__ import annotations

import itertools

from pydantic import computed_field, model_validator

from dtype_explorer.records._base import ComputedRecord, Record
from dtype_explorer.records._probe import ProbeResult, ProbeSpec


class BisectProbe(ComputedRecord):
    """One release's answer: the release, the engine that gave it (``None``: the installed
    Keras) and the probe's result (its ``versions`` say which Keras really answered)."""

    version: str
    engine: str | None = None
    result: ProbeResult

    @computed_field  # type: ignore[prop-decorator]
    @property
    def outcome(self) -> str:
        return self.result.outcome


class AnswerChange(Record):
    """The answer differs between two probed releases. ``exact``: they are neighbours in the
    list of releases, so ``after_version`` is the first release with ``after``; otherwise
    the change happened somewhere after ``before_version`` up to ``after_version``."""

    before_version: str
    after_version: str
    before: str
    after: str
    exact: bool
    #: Releases between the two that were not probed.
    unprobed: int = 0


class BisectResult(ComputedRecord):
    """One question asked of a range of Keras releases, and where its answer changed.

    ``versions`` are the releases of the range, oldest first; ``probes`` the answers, in the
    order they ran. Bisection probes both ends and then about log2(n) releases between them,
    so it finds *a* release where the answer changed: between two probed releases with the
    same answer the answer may have changed and changed back unseen (``caveat`` says so);
    ``exhaustive`` probes every release and sees every change.
    """

    spec: ProbeSpec
    versions: tuple[str, ...]
    probes: tuple[BisectProbe, ...]
    exhaustive: bool = False
    elapsed_s: float = 0.0

    @model_validator(mode="after")
    def _probes_in_range(self) -> BisectResult:
        unknown = [p.version for p in self.probes if p.version not in self.versions]
        if unknown:
            raise ValueError(f"probed releases not in versions: {unknown}")
        return self

    def answers(self) -> dict[str, str]:
        """Probed release -> outcome, oldest release first."""
        return {p.version: p.outcome for p in self.ordered()}

    def ordered(self) -> list[BisectProbe]:
        """The probes in release order."""
        index = {v: i for i, v in enumerate(self.versions)}
        return sorted(self.probes, key=lambda p: index[p.version])

    def result(self, version: str) -> ProbeResult:
        """The answer of a probed release."""
        for p in self.probes:
            if p.version == version:
                return p.result
        raise KeyError(f"{version} was not probed; probed: {', '.join(self.answers())}")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def probed_count(self) -> int:
        return len(self.probes)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def changes(self) -> tuple[AnswerChange, ...]:
        """Every pair of neighbouring probed releases whose answers differ, oldest first."""
        index = {v: i for i, v in enumerate(self.versions)}
        # dtype-explorer's own failure is no answer of Keras: it is compared with nothing
        ordered = [p for p in self.ordered() if not p.result.tool_failed]
        found = []
        for old, new in itertools.pairwise(ordered):
            if old.outcome != new.outcome:
                gap = index[new.version] - index[old.version] - 1
                found.append(
                    AnswerChange(
                        before_version=old.version,
                        after_version=new.version,
                        before=old.outcome,
                        after=new.outcome,
                        exact=gap == 0,
                        unprobed=gap,
                    )
                )
        return tuple(found)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def first_change(self) -> AnswerChange | None:
        """The first change pinned to one release (``None``: no change found)."""
        return next((c for c in self.changes if c.exact), None)

    def __repr__(self) -> str:
        change = self.first_change
        found = (
            f"{change.before} -> {change.after} at {change.after_version}"
            if change is not None
            else "no change found"
        )
        return (
            f"<BisectResult {self.spec.target} on {self.spec.backend}: {found} "
            f"({self.probed_count} of {len(self.versions)} releases probed)>"
        )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def caveat(self) -> str:
        """What the probes cannot tell, in words."""
        n, k = len(self.versions), len(self.probes)
        if self.exhaustive or k >= n:
            return f"every release of the {n} was probed: every change is listed"
        return (
            f"bisection probed {k} of {n} releases: it finds a release where the answer "
            "changed, not every one; between two probed releases with the same answer it may "
            "have changed and changed back unseen (exhaustive=True probes every release)"
        )

"""One question answered by several backends, modes or engines: ``ProbeSet``, the verdict
across its results, and where their numbers (``value_divergence``) or op traces
(``first_divergence``) part. Across engines (``dx.probe(..., engine=["3.15.1", "nightly"])``)
it answers "is it fixed on main?": each column is named by the Keras that answered, a nightly
with its date.

>>> from dtype_explorer.records import ProbeResult, ProbeSpec
>>> spec = ProbeSpec(target="ops.add", input_dtypes=("int8", "float16"))
>>> rs = ProbeSet(results=tuple(ProbeResult(spec=spec.model_copy(update={"backend": b}),
...     status="ok", backend=b, output_dtype=d, verdict="as-documented")
...     for b, d in [("jax", "float16"), ("torch", "float32")]))
>>> rs.verdict, rs.axis, rs["torch"].output_dtype
('diverges', 'backends', 'float32')
"""

from __future__ import annotations

from collections.abc import Iterator

from dtype_explorer.dtypes import tolerance
from dtype_explorer.records._as_code import CodeCopy
from dtype_explorer.records._as_code_probe import probe_code
from dtype_explorer.records._base import Record
from dtype_explorer.records._compare import Comparison, compare
from dtype_explorer.records._engine import NIGHTLY_PACKAGE, answered_by, engine_spec
from dtype_explorer.records._numerics import HEAD, OutputValues, ValueDivergence
from dtype_explorer.records._probe import VALUES_OUTRANK, ProbeResult, Verdict
from dtype_explorer.records._trace import TraceDivergence, first_divergence


class ProbeSet(Record):
    """One question answered by several backends, in several modes (``spec.mode``) or by
    several engines (``spec.engine``), with the verdict across them: ``diverges`` when they
    disagree (eager returns int32, predict float32; Keras 3.15.1 int32, its main float32)."""

    results: tuple[ProbeResult, ...]

    @property
    def verdict(self) -> Verdict:
        """``diverges`` when backends disagree on success or output dtype, else the shared one.
        A backend that cannot run the question (``ProbeResult.unsupported``) has no say; with
        none that can, ``error``.

        >>> from dtype_explorer.records import ErrorInfo, ProbeResult, ProbeSpec
        >>> spec = ProbeSpec(target="Dense", mode="dataset")
        >>> ok = ProbeResult(spec=spec, status="ok", backend="tensorflow",
        ...     output_dtype="float32", verdict="as-documented")
        >>> limit = ErrorInfo(type="NotImplementedError", message="m", where="not supported here")
        >>> no = ProbeResult(spec=spec, status="error", backend="jax", verdict="error",
        ...     error=limit)
        >>> ProbeSet(results=(no, ok)).verdict
        'as-documented'
        """
        answered = [r for r in self.results if not r.unsupported]
        if not answered:
            return "error"
        outcomes = {(r.ok, r.output_dtype) for r in answered}
        if len(outcomes) > 1:
            return "diverges"
        verdicts = {r.verdict for r in answered}
        return verdicts.pop() if len(verdicts) == 1 else "deviates"

    @property
    def shown_verdict(self) -> str:
        """:attr:`verdict` as a summary shows it: ``values-wrong`` where the backends agree the
        dtype is as documented (or undocumented) but one found the values wrong
        (``ProbeResult.shown_verdict``): no ✓ across them next to wrong numbers.

        >>> from dtype_explorer.records import Numerics, ProbeResult, ProbeSpec, ValueFinding
        >>> spec = ProbeSpec(target="ops.power", input_dtypes=("int8", "int8"))
        >>> wrong = Numerics(findings=(ValueFinding(kind="wraparound", output=0,
        ...     element=(0,), value=64.0, expected=1e6, message="wrapped"),))
        >>> rs = ProbeSet(results=tuple(ProbeResult(spec=spec, status="ok", backend=b,
        ...     output_dtype="int8", verdict="as-documented", numerics=n)
        ...     for b, n in [("jax", wrong), ("torch", None)]))
        >>> rs.verdict, rs.shown_verdict
        ('as-documented', 'values-wrong')
        """
        verdict = self.verdict
        answered = [r for r in self.results if not r.unsupported]
        wrong = any(r.shown_verdict == "values-wrong" for r in answered)
        if verdict in VALUES_OUTRANK and wrong:
            return "values-wrong"
        return verdict

    def as_code(self) -> CodeCopy:
        """The question as code: one ``dx.probe(...)`` call asking it of every backend, mode
        and engine of the set, and a raw-Keras script of it (a set across backends: run it
        once per backend, ``python repro.py jax``). See ``ProbeResult.as_code``."""
        return probe_code(self.results)

    @property
    def backends(self) -> tuple[str, ...]:
        return tuple(r.backend for r in self.results)

    @property
    def modes(self) -> tuple[str, ...]:
        return tuple(r.spec.mode for r in self.results)

    @property
    def engines(self) -> tuple[str | None, ...]:
        """Each result's engine (``None``: the installed Keras)."""
        return tuple(r.spec.engine for r in self.results)

    @property
    def axis(self) -> str:
        """What the results differ by: ``"backends"``, ``"modes"``, ``"engines"``, or two or
        three of them joined (``"backends and modes"``, ``"backends and engines"``)."""
        differing = [
            name
            for name, values in (
                ("backends", self.backends),
                ("modes", self.modes),
                ("engines", self.engines),
            )
            if len(set(values)) > 1
        ]
        return " and ".join(differing) or "backends"

    def value_divergence(self) -> ValueDivergence | None:
        """The first output element where the backends' numbers part beyond the tolerance of
        the output dtypes (the widest tolerance among them), for the same inputs and weights;
        ``None`` when they agree, or cannot be compared (a random layer, different shapes, or
        different modes: ``training=True`` is meant to change the numbers).

        Returns:
            A ``ValueDivergence`` (``output``, ``element``, ``values`` by backend,
            ``tolerance``, ``message``), or ``None``.

        >>> import dtype_explorer as dx
        >>> rs = dx.probe("ops.power", "uint8", backend=["numpy", "jax"],
        ...               values="image")                                  # doctest: +SKIP
        >>> rs.value_divergence().values                                   # doctest: +SKIP
        {'numpy': 0.0, 'jax': 130.0}
        """
        if self.axis != "backends":
            return None
        carried = [
            (self.label(r), r.numerics)
            for r in self.results
            if r.ok and r.numerics is not None and r.numerics.outputs
        ]
        if len(carried) < 2 or not all(n.comparable for _, n in carried):
            return None
        count = min(len(n.outputs) for _, n in carried)
        for out in range(count):
            values = [(label, n.outputs[out]) for label, n in carried]
            if len({v.shape for _, v in values}) > 1:
                continue
            tol = max(tolerance(v.dtype) for _, v in values)
            heads = [v.head for _, v in values]
            finite = [abs(x) for h in heads for x in h if x is not None]
            scale = max(finite, default=0.0) or 1.0
            for k in range(min(len(h) for h in heads)):
                column = [h[k] for h in heads]
                numbers = [x for x in column if x is not None]
                apart = len(numbers) not in (0, len(column)) or (
                    numbers and max(numbers) - min(numbers) > tol * scale
                )
                if apart:
                    return _divergence(values, out, k, tol, "")
            sums = [v.abs_sum for _, v in values]
            if all(x is not None for x in sums):
                top = max(sums) or 1.0  # type: ignore[type-var]
                if max(sums) - min(sums) > tol * top * 4:  # type: ignore[type-var,operator]
                    return _divergence(values, out, None, tol, "")
        return None

    def first_divergence(self) -> TraceDivergence | None:
        """The first op where the backends' traces of the call part (e.g. jax's conv promotes
        uint8 where torch's raises), or ``None`` when they agree or were not traced."""
        return first_divergence({self.label(r): r.trace for r in self.results if not r.unsupported})

    def comparison(self, pending: tuple[str, ...] = ()) -> Comparison:
        """The results side by side, a column each (named by :meth:`label`), a row per
        cast-path stage, output and training-step fact, each marked ``same`` or not
        (:func:`~dtype_explorer.records.compare`): what the widget's compact view lays out.

        Args:
            pending: Backends still probing, drawn as pending columns.

        Returns:
            A ``Comparison``.

        >>> import dtype_explorer as dx
        >>> grid = dx.probe("Dense", backend=["jax", "torch"]).comparison()  # doctest: +SKIP
        >>> grid.summary                                                    # doctest: +SKIP
        'jax and torch agree on all 6 rows'
        """
        return compare(self.results, pending, labels=[self.label(r) for r in self.results])

    def label(self, result: ProbeResult) -> str:
        """How this set names one of its results: its backend, its mode, its engine (the Keras
        that answered: ``"keras 3.16.0.dev2026102704 (nightly 2026-10-27 04h)"``), or several
        of them (``"jax/predict"``), by what the results differ in."""
        axis = self.axis
        parts = [
            part
            for name, part in (
                ("backends", result.backend),
                ("modes", result.spec.mode),
                ("engines", keras_label(result)),
            )
            if name in axis
        ]
        return "/".join(parts)

    def __getitem__(self, key: str) -> ProbeResult:
        """The result of a backend (``"jax"``), of a mode (``"predict"``) or of an engine
        (``"keras==3.11.3"``, ``"nightly"``: the nightly build that answered)."""
        for result in self.results:
            if result.backend == key:
                return result
        for result in self.results:
            if result.spec.mode == key:
                return result
        for result in self.results:
            if _names_engine(key, result.spec.engine):
                return result
        raise KeyError(
            f"no result for backend, mode or engine {key!r}; have backends "
            f"{list(dict.fromkeys(self.backends))}, modes {list(dict.fromkeys(self.modes))}, "
            f"engines {list(dict.fromkeys(self.engines))}"
        )

    def __iter__(self) -> Iterator[ProbeResult]:  # type: ignore[override]
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def summary(self) -> str:
        """One line per backend, and the verdict across backends when there are several."""
        lines = [r.summary() for r in self.results]
        if "modes" in self.axis:  # name each mode, even "call"
            lines = [
                f"{line}  [mode {r.spec.mode}]" if r.spec.mode == "call" else line
                for line, r in zip(lines, self.results)
            ]
        if "engines" in self.axis:  # the installed Keras named too (an engine's line names it)
            lines = [
                line if r.spec.engine else f"{line}  [{keras_label(r)}]"
                for line, r in zip(lines, self.results)
            ]
        if len(self.results) > 1:
            lines.append(f"across {self.axis}: {self.shown_verdict}")
            apart = self.value_divergence()
            if apart is not None:
                lines.append(f"numbers diverge: {apart.message}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return f"<ProbeSet {self.results[0].spec.target if self.results else ''}: {self.verdict}>"


def keras_label(result: ProbeResult) -> str:
    """The Keras that answered ``result`` (:func:`answered_by` of its engine and versions).

    >>> from dtype_explorer.records import ProbeSpec
    >>> spec = ProbeSpec(target="Dense", engine="keras-nightly==3.16.0.dev2026102704")
    >>> keras_label(ProbeResult(spec=spec, status="ok", backend="numpy",
    ...                         versions={"keras": "3.16.0.dev2026102704"}))
    'keras 3.16.0.dev2026102704 (nightly 2026-10-27 04h)'
    """
    return answered_by(result.spec.engine, result.versions)


def _names_engine(key: str, engine: str | None) -> bool:
    """Whether ``key`` names the engine ``engine`` (``"nightly"``: any nightly build)."""
    if engine is None:
        return False
    try:
        named = engine_spec(key)
    except ValueError:
        return False
    return named == engine or (named == "nightly" and engine.startswith(NIGHTLY_PACKAGE))


def _divergence(
    values: list[tuple[str, OutputValues]], out: int, k: int | None, tol: float, _: str
) -> ValueDivergence:
    first = values[0][1]
    if k is None:
        shown = {label: v.abs_sum for label, v in values}
        where = f"output {out}: the sums of |values| (beyond the first {HEAD} elements)"
        element: tuple[int, ...] = ()
    else:
        shown = {label: v.head[k] for label, v in values}
        element = first.element(k)
        where = f"output {out} [{', '.join(map(str, element))}]"
    said = ", ".join(f"{label} {_number(x)}" for label, x in shown.items())
    return ValueDivergence(
        output=out,
        element=element,
        values=shown,
        tolerance=tol,
        message=(
            f"same inputs and weights, numbers apart at {where}: {said} "
            f"(tolerance {tol:.2g} of the values' scale)"
        ),
    )


def _number(x: float | None) -> str:
    return "inf/NaN" if x is None else f"{x:.6g}"

"""``bisect``: one question over a range of Keras releases, and the first release where its
answer changed.

Each release answers through its engine (``engine="keras==3.12.0"``; the installed release is
the default engine, ``None``). Bisection probes both ends, then the middle of the range whose
ends disagree, until the two disagreeing releases are neighbours: about ``2 + log2(n)``
probes for ``n`` releases. It finds *a* change point: an answer that changes and changes back
between two probed releases with the same answer is not seen (``exhaustive=True`` probes
every release). Keras's main takes part as its nightly builds (``keras-nightly``): ``bad=
"nightly"`` (or a range ending in it) bisects the builds after the last release of the range
up to the newest, each named by its version and date.

>>> import dtype_explorer as dx
>>> b = dx.bisect("Discretization", "float32", backend="numpy",
...               kwargs={"bin_boundaries": [0.5, 1.5, 2.5], "dtype": "float32"},
...               versions="3.10.0..3.13.0")                           # doctest: +SKIP
>>> b.first_change.after_version, b.first_change.before, b.first_change.after  # doctest: +SKIP
('3.12.0', 'float32', 'int32')
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypedDict

from packaging.version import InvalidVersion, Version

from dtype_explorer import backends as backend_names
from dtype_explorer import keras_release
from dtype_explorer import versions as library_versions
from dtype_explorer.analyses._probe import probe
from dtype_explorer.analyses._survey import progress_bar
from dtype_explorer.errors import InvalidSpecError, closest, received
from dtype_explorer.keras_run import ShapeArg, make_spec
from dtype_explorer.records import (
    NIGHTLY_PACKAGE,
    BisectProbe,
    BisectResult,
    ProbeResult,
    engine_spec,
)
from dtype_explorer.runtime import engines, pool
from dtype_explorer.runtime.engines import PackageIndexError, index_releases

__all__ = [
    "KERAS_MAJOR",
    "MAX_VERSIONS",
    "NOT_ASKED",
    "OLDEST",
    "NoAnswerError",
    "PackageIndexError",
    "answered",
    "bisect",
    "engine_for",
    "index_releases",
    "planned_probes",
    "resolve_versions",
    "search",
]

#: The Keras major version engines layer over the installed backends.
KERAS_MAJOR = 3
#: The oldest release an engine can probe (3.0.x lacks ``keras.tree``, which the probes use;
#: ``runtime/_site.KERAS_API``): the lowest the package runs on (``keras_release``).
OLDEST = Version(keras_release.LOWEST)
#: Where an error says the release was not asked at all (its worker could not import it, the
#: question could not be sent, dtype-explorer's own code failed on it), rather than what Keras
#: answered.
NOT_ASKED = ("worker", "transfer", "tool", "engine")  # an engine's refusal too
#: The most releases one bisection takes (Keras 3 had 40 by 3.15.1).
MAX_VERSIONS = 200
#: A final release as engines pin it: ``X.Y.Z`` (no pre-release, no leading zeros).
_FINAL_RELEASE = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)")
#: A nightly build of Keras's main (``keras-nightly``): ``X.Y.Z.devYYYYMMDDHH``.
_NIGHTLY_BUILD = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)\.dev\d{10}")
#: How a nightly is named in ``versions``, ``good`` and ``bad`` (``records.engine_spec``'s forms).
_NIGHTLY_NAMES = ("nightly", "keras-nightly", "keras_nightly")


class NoAnswerError(RuntimeError):
    """A release asked by a bisection gave no answer from Keras (its worker crashed or timed
    out, or could not import that release): comparing that with an answer would name a
    change that Keras did not make."""


def bisect(
    target: str,
    input_dtype: str | Sequence[str] = "float32",
    policy: Any = None,
    backend: str = "numpy",
    *,
    versions: str | Sequence[str] | None = None,
    good: str | None = None,
    bad: str | None = None,
    kwargs: dict[str, Any] | None = None,
    shape: ShapeArg = None,
    values: str = "default",
    floatx: str | None = None,
    seed: int = 0,
    mode: str = "call",
    quantize: str | None = None,
    exhaustive: bool = False,
    progress: bool = True,
    timeout: float | None = None,
    use_cache: bool = True,
) -> BisectResult:
    """Ask one question of a range of Keras releases and name the first release where the
    answer (the probe's ``outcome``: ``"float32"``, ``"raises ValueError"``) changed.

    Bisection probes both ends of the range and then about ``log2(n)`` releases between
    them, so it finds *a* release where the answer changed, with both answers. Between two
    probed releases with the same answer the answer may have changed and changed back: the
    result's ``caveat`` says so, and ``exhaustive=True`` probes every release instead.

    Args:
        target: a ``keras.layers`` class name (``"Discretization"``) or ``"ops.<name>"``.
        input_dtype: the input's dtype, or one per input.
        policy: a dtype policy name (``None``: the policy Keras makes from ``floatx``).
        backend: one backend name; every release answers on it (default ``"numpy"``).
        versions: the releases: a list (``["3.10.0", "3.12.0"]``) or a range
            ``"3.10.0..3.13.0"`` (both ends included; either may be left out: from 3.1.0, the
            oldest an engine probes, or to the newest) of the releases the package index lists.
            A nightly build of Keras's main may be named too (``"nightly"``: the newest;
            ``"keras-nightly==3.16.0.dev2026102704"``); a range ending in one holds the
            releases, then the nightly builds newer than its last release up to that one.
        good: with ``bad``, the range ``good..bad`` instead of ``versions``, as ``git
            bisect`` names its ends: ``good="3.15.1", bad="nightly"`` searches the nightly
            builds after 3.15.1 for the first one whose answer changed.
        bad: the newer end (``"nightly"``, a nightly build or a release).
        kwargs: the constructor's (a layer) or the call's (an op) keyword arguments.
        shape: the input shape (batch first), or one per input.
        values: the sample's value preset.
        floatx: ``keras.config.floatx()`` during each probe.
        seed: the sample's seed.
        mode: how the target runs (``"call"``, ``"training"``, ``"model"``, ...).
        quantize: the layer quantized before the call (``dx.probe``'s ``quantize``); a release
            without the mode answers with its refusal, which names the release that added it.
        exhaustive: probe every release instead of bisecting, and list every change.
        progress: show a progress bar (``tqdm``, notebook-aware).
        timeout: seconds one probe may take in its worker.
        use_cache: answer from, and store into, the result cache.

    Returns:
        A ``BisectResult``: every probed release's answer, ``first_change`` (the first release
        with the new answer, the last with the old one, and both answers; ``None`` when the
        probed answers are all the same) and ``caveat``.

    Raises:
        InvalidSpecError: the question or the versions are not valid (with what was received).
        PackageIndexError: a range was given and the package index could not list releases.
        NoAnswerError: a release asked gave no answer from Keras (crash, timeout, a worker
            that could not import it), rather than name a change Keras did not make.

    >>> import dtype_explorer as dx
    >>> b = dx.bisect("Discretization", "float32", backend="numpy",
    ...               kwargs={"bin_boundaries": [0.5, 1.5, 2.5], "dtype": "float32"},
    ...               versions=["3.10.0", "3.11.3", "3.12.0", "3.13.0"])  # doctest: +SKIP
    >>> print(b.first_change.after_version, b.answers())                 # doctest: +SKIP
    3.12.0 {'3.10.0': 'float32', '3.11.3': 'float32', '3.12.0': 'int32', '3.13.0': 'int32'}
    """
    # 1. Validate every argument before any work (no engine made, no index asked): one
    #    named target, one backend, one mode; the options; the question; the releases.
    _check_one_question(target, backend, mode)
    versions = _range_asked(versions, good, bad)
    timeout = pool.time_limit(timeout)
    _check_flags(exhaustive=exhaustive, progress=progress, use_cache=use_cache)
    question = _Question(
        input_dtype=input_dtype,
        policy=policy,
        backend=backend,
        kwargs=kwargs,
        shape=shape,
        values=values,
        floatx=floatx,
        seed=seed,
        mode=mode,
        quantize=quantize,
    )
    spec = make_spec(target, **question)  # a bad question fails before any engine is made
    releases = resolve_versions(versions)
    # 2. Search: ask the releases bisection (or exhaustive) picks, each once.
    started = time.perf_counter()
    probes: dict[int, BisectProbe] = {}
    answer = _answerer(
        target, question, releases, probes, timeout=timeout, use_cache=use_cache, progress=progress
    )
    total = len(releases) if exhaustive else planned_probes(len(releases))
    with progress_bar(total=total, desc=f"bisect {target}", enabled=progress) as bar:
        for i in search(len(releases), answer, exhaustive=exhaustive):
            bar.set_postfix_str(f"keras {releases[i]}: {probes[i].outcome}", refresh=False)
            bar.update(1)
    # 3. Collect: every probed release's answer (the result names the first change).
    return BisectResult(
        spec=spec,
        versions=releases,
        probes=tuple(probes.values()),
        exhaustive=exhaustive,
        elapsed_s=round(time.perf_counter() - started, 3),
    )


def _range_asked(
    versions: str | Sequence[str] | None, good: str | None, bad: str | None
) -> str | Sequence[str]:
    """``versions``, or the range ``good..bad``: one of the two ways, never both."""
    if good is None and bad is None:
        if versions is None:
            raise InvalidSpecError(
                "bisect needs the releases to ask: versions=['3.10.0', '3.12.0'] or "
                "'3.10.0..3.13.0', or good='3.15.1', bad='nightly'"
            )
        return versions
    if versions is not None:
        raise InvalidSpecError(
            "give versions, or good and bad, not both; received: "
            f"versions={received(versions)}, good={received(good)}, bad={received(bad)}"
        )
    if not isinstance(good, str) or not isinstance(bad, str):
        raise InvalidSpecError(
            "good and bad are both needed, each a release ('3.15.1') or a nightly ('nightly', "
            f"'keras-nightly==3.16.0.devYYYYMMDDHH'); received: good={received(good)}, "
            f"bad={received(bad)}"
        )
    return f"{good}..{bad}"


class _Question(TypedDict):
    """What every release is asked (``dx.probe``'s arguments but the target and engine)."""

    input_dtype: str | Sequence[str]
    policy: Any
    backend: str
    kwargs: dict[str, Any] | None
    shape: ShapeArg
    values: str
    floatx: str | None
    seed: int
    mode: str
    quantize: str | None


def _check_one_question(target: Any, backend: Any, mode: Any) -> None:
    """A bisection asks one named target on one backend in one mode."""
    if not isinstance(target, str):
        raise InvalidSpecError(
            "bisect asks a keras.layers class or a keras.ops function by name (a user's layer "
            f"is not rebuilt in other releases); received: {received(target)}"
        )
    if not backend_names.is_one(backend):
        raise InvalidSpecError(
            f"bisect runs on one backend: give its name; received: {received(backend)}"
        )
    if not isinstance(mode, str):
        raise InvalidSpecError(f"bisect runs in one mode; received: {received(mode)}")


def _check_flags(**flags: Any) -> None:
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise InvalidSpecError(f"{name} must be True or False; received: {received(value)}")


def _answerer(
    target: str,
    question: _Question,
    releases: tuple[str, ...],
    probes: dict[int, BisectProbe],
    *,
    timeout: float | None,
    use_cache: bool,
    progress: bool,
) -> Callable[[int], str]:
    """``answer(i)``: release ``i``'s outcome, its probe kept in ``probes``; a release that
    gives no answer from Keras raises :class:`NoAnswerError`."""

    def answer(i: int) -> str:
        engine = engine_for(releases[i])
        result = _ask(
            target, question, engine, timeout=timeout, use_cache=use_cache, progress=progress
        )
        if not answered(result):
            said = result.error_text() or result.status
            if result.tool_failed:
                said = f"dtype-explorer's own code failed, not Keras: {said}"
            elif result.error is not None and result.error.where == "engine":
                said = f"its engine refused to start, not Keras: {said}"
            raise NoAnswerError(
                f"Keras {releases[i]} gave no answer ({result.status}: {said}); a bisection "
                "compares answers of Keras itself, so it stops here. Leave this release out "
                "of versions, or raise timeout"
            )
        probes[i] = BisectProbe(version=releases[i], engine=engine, result=result)
        return result.outcome

    return answer


def _ask(
    target: str,
    question: _Question,
    engine: str | None,
    *,
    timeout: float | None,
    use_cache: bool,
    progress: bool,
) -> ProbeResult:
    """One release's answer; its engine made first when missing (with progress), and its
    workers stopped afterwards: a bisection asks each release once, and a worker per release
    kept alive would hold a Keras in memory for nothing."""
    engines.ensure(engine, progress=progress)
    try:
        return probe(target, **question, engine=engine, timeout=timeout, use_cache=use_cache)
    finally:
        if engine is not None:
            pool.stop_engine(engine)


def answered(result: ProbeResult) -> bool:
    """Whether ``result`` is Keras's answer (a dtype, an error Keras raised, a question this
    release cannot run), not a failure to ask it (a crash, a timeout, a worker that could not
    import the release).

    >>> from dtype_explorer.records import ErrorInfo, ProbeSpec
    >>> lost = ProbeResult(spec=ProbeSpec(target="Dense"), status="error", backend="numpy",
    ...     error=ErrorInfo(type="ImportError", message="no keras.tree", where="worker"))
    >>> answered(lost), answered(lost.model_copy(update={"status": "ok", "error": None}))
    (False, True)
    """
    if result.status in ("crashed", "timeout"):
        return False
    return result.error is None or result.error.where not in NOT_ASKED


def search(n: int, answer: Callable[[int], str], *, exhaustive: bool = False) -> Iterator[int]:
    """The indices of ``n`` releases (oldest first) probed, each yielded after ``answer(i)``
    ran: every one with ``exhaustive``; else both ends, then bisection between the newest
    release with the first answer and the oldest after it with another, until they are
    neighbours (each release asked at most once).

    >>> answers = ["a", "a", "a", "b", "b", "b", "b", "b"]
    >>> list(search(len(answers), answers.__getitem__))
    [0, 7, 3, 1, 2]
    >>> list(search(3, ["a", "b", "a"].__getitem__))     # changes and changes back: not seen
    [0, 2]
    """
    if exhaustive:
        for i in range(n):
            answer(i)
            yield i
        return
    if n == 0:
        return
    first = answer(0)
    yield 0
    if n == 1:
        return
    last = answer(n - 1)
    yield n - 1
    if last == first:
        return
    low, high = 0, n - 1  # answer(low) == first != answer(high)
    while high - low > 1:
        middle = (low + high) // 2
        same = answer(middle) == first
        yield middle
        low, high = (middle, high) if same else (low, middle)


def planned_probes(n: int) -> int:
    """The most probes bisection runs over ``n`` releases: both ends and ``ceil(log2(n - 1))``.

    >>> planned_probes(4), planned_probes(40)
    (4, 8)
    """
    if n <= 2:
        return n
    return 2 + (n - 2).bit_length()


def engine_for(version: str) -> str | None:
    """The engine that answers for a Keras release: ``None`` (the installed Keras) for the
    installed release, ``"keras-nightly==<version>"`` for a nightly build, else
    ``"keras==<version>"``.

    >>> engine_for("3.12.0"), engine_for("3.16.0.dev2026102704")
    ('keras==3.12.0', 'keras-nightly==3.16.0.dev2026102704')
    """
    if version == library_versions.library_version("keras"):
        return None
    if _NIGHTLY_BUILD.fullmatch(version):
        return f"{NIGHTLY_PACKAGE}=={version}"
    return f"keras=={version}"


def resolve_versions(versions: str | Sequence[str]) -> tuple[str, ...]:
    """The releases named by ``versions``, oldest first: a list of Keras 3 releases, or a
    range ``"A..B"`` (``"A.."``, ``"..B"``) resolved from the package index.

    >>> resolve_versions(["3.12.0", "3.10.0", "3.12.0"])
    ('3.10.0', '3.12.0')
    >>> resolve_versions("3.10.0")
    Traceback (most recent call last):
    ...
    dtype_explorer.errors.InvalidSpecError: versions: give at least two releases, ...
    """
    if isinstance(versions, str):
        if ".." in versions:
            return _release_range(versions)
        named = [v.strip() for v in versions.split(",") if v.strip()]
    elif isinstance(versions, list | tuple) and len(versions) <= MAX_VERSIONS:
        named = list(versions)
    else:
        raise InvalidSpecError(
            f"versions is a list of at most {MAX_VERSIONS} Keras releases or a range such as "
            f"'3.10.0..3.13.0'; received: {received(versions)}"
        )
    parsed = sorted({_release(v): None for v in named})
    if len(parsed) < 2:
        raise InvalidSpecError(
            "versions: give at least two releases, or a range such as '3.10.0..3.13.0'; "
            f"received: {received(versions)}"
        )
    return tuple(str(v) for v in parsed)


def _release(value: object) -> Version:
    if not isinstance(value, str):
        raise InvalidSpecError(
            f"a Keras release is a string such as '3.12.0'; received: {received(value)}"
        )
    if value.strip().lower().startswith(_NIGHTLY_NAMES):  # Keras's main: a nightly build
        return Version((_pinned_nightly(value) or "").partition("==")[2])
    if _NIGHTLY_BUILD.fullmatch(value.strip()):  # a keras-nightly build named by its version
        return Version(value.strip())
    text = value.strip().removeprefix("keras==")
    try:
        version = Version(text)
    except InvalidVersion:
        raise InvalidSpecError(
            f"not a Keras release: {received(value)}; give one such as '3.12.0'"
        ) from None
    if version.major != KERAS_MAJOR:
        raise InvalidSpecError(
            f"engines run Keras {KERAS_MAJOR} releases ({OLDEST} and later); received: "
            f"{received(value)}"
        )
    if not _FINAL_RELEASE.fullmatch(text) or version.is_prerelease:
        raise InvalidSpecError(
            f"a Keras release is a final release X.Y.Z such as '3.12.0' (engines pin one; "
            f"no '3.12', no pre-releases such as '3.12.0rc1') or a nightly build ('nightly', "
            f"'keras-nightly==3.16.0.devYYYYMMDDHH'); received: {received(value)}"
        )
    if version < OLDEST:
        raise InvalidSpecError(
            f"engines probe Keras {OLDEST} and later (3.0.x lacks keras.tree, which the probes "
            f"use); received: {received(value)}"
        )
    return version


def _pinned_nightly(value: str) -> str | None:
    """``"keras-nightly==<build>"`` for a nightly's name (``"nightly"``: the newest listed)."""
    try:
        return engines.pin(engine_spec(value))
    except engines.EngineError:
        raise
    except InvalidSpecError:
        name = value.strip().partition("==")[0]
        match = closest(name, ("nightly", NIGHTLY_PACKAGE)) if name.isprintable() else None
        hint = f"; did you mean {match!r}?" if match and match != name else ""
        raise InvalidSpecError(
            f"not a Keras release or nightly build: {received(value)}; a release is '3.12.0', a "
            f"nightly build 'nightly' (the newest) or 'keras-nightly==3.X.Y.devYYYYMMDDHH'{hint}"
        ) from None


def _release_range(text: str) -> tuple[str, ...]:
    """The releases of ``"A..B"`` the package index lists, oldest first; when an end is a
    nightly build, the nightly builds after the range's last release up to it follow."""
    low_text, _, high_text = text.partition("..")
    low = _release(low_text) if low_text.strip() else None
    high = _release(high_text) if high_text.strip() else None
    if low is not None and high is not None and low > high:
        raise InvalidSpecError(f"versions: the range runs backwards; received: {received(text)}")
    listed = [Version(v) for v in index_releases()]
    chosen = sorted(
        v
        for v in listed
        if v.major == KERAS_MAJOR
        and not v.is_prerelease
        and v >= (low or OLDEST)
        and (high is None or v <= high)
    )
    known = [str(v) for v in listed if v.major == KERAS_MAJOR and v >= OLDEST]
    nightly = any(end is not None and end.is_devrelease for end in (low, high))
    if nightly:
        builds = _nightly_builds()
        after = max(chosen, default=low or OLDEST)  # the builds after the range's last release
        chosen += sorted(
            b for b in builds if b >= after and (low is None or b >= low) and b <= (high or b)
        )
        chosen = sorted(set(chosen))
        known += [str(b) for b in builds]
    for end in (low, high):
        if end is not None and end not in chosen:
            match = closest(str(end), known)
            hint = f"; did you mean {match!r}?" if match else ""
            what = "release (or nightly build after the range's last release)" if nightly else ""
            raise InvalidSpecError(
                f"versions: Keras {end} is not a {what or 'release'} the package index "
                f"lists{hint} received: {received(text)}"
            )
    if len(chosen) < 2:
        raise InvalidSpecError(
            f"versions: the range holds {len(chosen)} release(s); give one with at least two; "
            f"received: {received(text)}"
        )
    return tuple(str(v) for v in chosen)


def _nightly_builds() -> list[Version]:
    """Every nightly build of Keras's main the package index lists (``keras-nightly``)."""
    found = []
    for text in index_releases(NIGHTLY_PACKAGE, pre=True):
        if _NIGHTLY_BUILD.fullmatch(text):
            found.append(Version(text))
    return found

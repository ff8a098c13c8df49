"""Time limits checked where they enter: zero, negative, NaN, infinite downwards, too large,
and things that are not numbers are refused with a clear ``InvalidSpecError`` before any work
starts (a NaN limit used to hang a probe for minutes)."""

from __future__ import annotations

import math

import keras
import pytest

import dtype_explorer as dx
from dtype_explorer import pool
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.records import ProbeSpec

BAD = [0, 0.0, -1, -5.5, -math.inf, math.nan, 1e9, True, "5", [], None.__class__, 1j]

ENTRIES = {
    "probe in a worker": lambda t: dx.probe("Dense", backend="numpy", timeout=t),
    "probe in process": lambda t: dx.probe("Dense", timeout=t),
    "survey": lambda t: dx.survey(["Dense"], ["float32"], backends="numpy", timeout=t),
    "promotion_table": lambda t: dx.promotion_table("add", backends="numpy", timeout=t),
    "check_model": lambda t: dx.check_model(keras.layers.Dense(2), timeout=t),
    "pool.submit": lambda t: pool.submit(ProbeSpec(target="Dense"), timeout=t),
    "pool.call": lambda t: pool.call("numpy", abs, 1, timeout=t),
    "pool.configure": lambda t: pool.configure(timeout=t),
}


@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize("limit", BAD, ids=repr)
def test_a_bad_time_limit_is_refused_where_it_enters(entry, limit):
    before = dict(pool._config)
    with pytest.raises(InvalidSpecError, match=r"timeout must be a number of seconds.*Received"):
        ENTRIES[entry](limit)
    assert pool._config == before


def test_good_time_limits_are_accepted():
    assert pool.time_limit(None) is None
    assert pool.time_limit(2) == 2.0
    assert pool.time_limit(math.inf) == math.inf
    assert dx.probe("Dense", backend="numpy", timeout=120, use_cache=False).ok


def test_a_huge_value_is_not_echoed_whole():
    with pytest.raises(InvalidSpecError) as raised:
        pool.time_limit("9" * 100_000)
    assert len(str(raised.value)) < 300

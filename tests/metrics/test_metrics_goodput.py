"""Goodput: vLLM's rule (a request is good when it meets every given bound), parsing of --goodput, and the
per-cell numbers."""

from __future__ import annotations

import pytest

from specbench.engine.stats import RequestStats
from specbench.errors import SpecbenchError
from specbench.metrics.goodput import Goodput, SloBounds, parse_goodput
from specbench.metrics.request_metrics import RequestMetrics


def _request(ttft_s: float, gaps_s: list[float]) -> RequestMetrics:
    times = [ttft_s]
    for gap in gaps_s:
        times.append(times[-1] + gap)
    stats = RequestStats(arrival_time=0.0, num_prompt_tokens=4, emission_times=times,
                         tokens_per_emission=[1] * len(times))
    return RequestMetrics.from_stats(stats)


def test_parse_accepts_vllm_keys_in_any_separator():
    assert parse_goodput(["ttft:200", "tpot:50"]) == SloBounds(ttft_ms=200, tpot_ms=50)
    assert parse_goodput(["ttft:200,e2el:1500"]) == parse_goodput(["ttft:200 e2el:1500"])
    assert parse_goodput(["e2el:1500", "ttft:200"]).describe() == "ttft:200,e2el:1500"
    assert not parse_goodput([]).is_set and parse_goodput([]).describe() is None


@pytest.mark.parametrize(
    ("items", "message"),
    [(["ttft"], "expected KEY:MS"), (["itl:5"], "KEY one of ttft, tpot, e2el"), (["ttft:abc"], "not a number"),
     (["ttft:0"], "> 0"), (["ttft:1", "ttft:2"], "ttft given twice"), (["tpot:inf"], "finite")],
)
def test_parse_rejects(items, message):
    with pytest.raises(SpecbenchError, match=message):
        parse_goodput(items)


def test_a_request_is_good_only_when_every_bound_holds():
    fast = _request(0.1, [0.02, 0.02])  # TTFT 100 ms, TPOT 20 ms, E2E 140 ms
    slow_tpot = _request(0.1, [0.2, 0.2])  # TPOT 200 ms
    slo = SloBounds(ttft_ms=150, tpot_ms=50)
    assert slo.is_good(fast) and not slo.is_good(slow_tpot)
    assert not SloBounds(ttft_ms=99).is_good(fast) and SloBounds(ttft_ms=100).is_good(fast)  # bound inclusive
    assert not SloBounds(e2el_ms=139).is_good(fast) and SloBounds(e2el_ms=141).is_good(fast)
    one_token = _request(0.1, [])  # TPOT undefined: counts as met, as vLLM's 0
    assert SloBounds(tpot_ms=1).is_good(one_token)
    nothing = RequestMetrics.from_stats(RequestStats(arrival_time=0.0, num_prompt_tokens=4))
    assert not SloBounds(tpot_ms=1).is_good(nothing) and not SloBounds(ttft_ms=1e9).is_good(nothing)


def test_goodput_counts_failed_requests_as_not_good():
    good = Goodput.of([3, 5], num_requests=4, duration_s=2.0)
    assert (good.num_good_requests, good.good_request_fraction, good.request_goodput, good.output_goodput) == (
        2, 0.5, 1.0, 4.0)
    empty = Goodput.of([], num_requests=0, duration_s=0.0)
    assert empty.good_request_fraction is None and empty.request_goodput is None

"""compare names a difference in --goodput bounds or load pattern between two runs (goodput deltas are only
like with like under the same bounds; a different load pattern measures something else)."""

from __future__ import annotations

from pathlib import Path

from specbench.compare.run_info import differences, run_info
from specbench.runs.sweep_config import SweepConfig


def _info(config: SweepConfig):
    return run_info(Path("r"), {"run_id": "r", "config": config.to_dict()})


def test_goodput_and_load_differences_are_listed():
    before = _info(SweepConfig(goodput=("ttft:200",)))
    after = _info(SweepConfig(goodput=("ttft:100",), duration=30.0, cache_reset=False))
    found = {d.field: d for d in differences(before, after)}
    assert found["goodput_slo"].before == "ttft:200" and found["goodput_slo"].after == "ttft:100"
    # the load pattern changes what is measured: incomparable (an error under --strict)
    assert found["duration"].after == "30.0" and found["duration"].is_critical
    assert found["cache_reset"].before == "True" and found["cache_reset"].after == "False"
    assert not found["goodput_slo"].is_critical
    assert not differences(_info(SweepConfig()), _info(SweepConfig()))

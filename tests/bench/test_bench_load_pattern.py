"""Load patterns (fixed rate, linear ramp as vLLM's --ramp-up-strategy linear, duration bounds) and warmup
prompts that never repeat a measured prompt."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specbench.bench.load_pattern import LoadPattern
from specbench.bench.validate import validate_config
from specbench.bench.warmup import WARMUP_MAX_TOKENS, warmup_turns
from specbench.errors import SpecbenchError
from specbench.runs.cell_key import CellKey
from specbench.runs.sweep_config import SweepConfig
from specbench.runs.turns import TurnPlanner, TurnSettings
from specbench.workloads.base import Sample
from specbench.workloads.mt_bench import MtBenchWorkload


def test_fixed_rate_matches_the_mean_gap_and_count():
    offsets = list(LoadPattern(10.0, 1.0, None, None, None).offsets(4000, seed=1))
    assert len(offsets) == 4000 and offsets[0] == 0.0
    assert np.mean(np.diff(offsets)) == pytest.approx(0.1, rel=0.05)
    assert list(LoadPattern(math.inf, 1.0, None, None, None).offsets(3, seed=0)) == [0.0, 0.0, 0.0]


def test_fixed_rate_gaps_are_gamma_with_burstiness_as_shape():
    """Gamma gaps of mean 1 / rate: shape 1 is a Poisson process (cv 1), shape a has cv 1 / sqrt(a); a seed
    fixes the schedule."""
    def gaps(burstiness: float) -> np.ndarray:
        offsets = list(LoadPattern(10.0, burstiness, None, None, None).offsets(4000, seed=1))
        return np.diff(offsets)
    poisson, bursty = gaps(1.0), gaps(0.25)
    assert np.all(poisson >= 0) and np.all(bursty >= 0)
    assert poisson.std() / poisson.mean() == pytest.approx(1.0, rel=0.1)
    assert bursty.mean() == pytest.approx(0.1, rel=0.15)
    assert bursty.std() / bursty.mean() == pytest.approx(2.0, rel=0.15)
    pattern = LoadPattern(10.0, 1.0, None, None, None)
    assert list(pattern.offsets(50, seed=3)) == list(pattern.offsets(50, seed=3))

def test_linear_ramp_by_request_index_goes_from_start_to_end_rate():
    pattern = LoadPattern(math.inf, 1.0, None, 2.0, 20.0)
    assert pattern.is_ramp and pattern.is_scheduled
    gaps = np.diff(list(pattern.offsets(6001, seed=3)))
    first, last = gaps[:600], gaps[-600:]  # rates 2 -> 3.8 and 18.2 -> 20 req/s
    # mean gap over a linear rate a -> b is ln(b / a) / (b - a)
    assert 1 / np.mean(first) == pytest.approx(1.8 / math.log(3.8 / 2), rel=0.1)
    assert 1 / np.mean(last) == pytest.approx(1.8 / math.log(20 / 18.2), rel=0.1)
    # burstiness > 1 makes the same ramp more regular
    regular = np.diff(list(LoadPattern(math.inf, 8.0, None, 2.0, 20.0).offsets(6001, seed=3)))
    assert np.std(regular[-600:]) < np.std(last)


def test_duration_bounds_scheduled_arrivals_and_ramps_by_time():
    offsets = list(LoadPattern(math.inf, 1.0, 30.0, 1.0, 9.0).offsets(None, seed=0))
    assert offsets[-1] < 30.0 and offsets[0] == 0.0
    # average rate over the ramp (1 -> 9 req/s) is ~5: about 150 arrivals in 30 s
    assert 110 < len(offsets) < 190
    early = sum(o < 10 for o in offsets)
    late = sum(o >= 20 for o in offsets)
    assert late > 2 * early
    fixed = list(LoadPattern(4.0, 1.0, 10.0, None, None).offsets(None, seed=0))
    assert 25 < len(fixed) < 55 and fixed[-1] < 10.0


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"duration": 0.0}, "--duration must be"),
        ({"ramp_up_strategy": "exponential", "ramp_up_start_rps": 1.0, "ramp_up_end_rps": 2.0},
         "--ramp-up-strategy must be one of linear"),
        ({"ramp_up_strategy": "linear", "ramp_up_start_rps": 1.0}, "needs --ramp-up-start-rps and"),
        ({"ramp_up_start_rps": 1.0}, "need --ramp-up-strategy linear"),
        ({"ramp_up_strategy": "linear", "ramp_up_start_rps": 0.0, "ramp_up_end_rps": 2.0}, "finite and > 0"),
        ({"ramp_up_strategy": "linear", "ramp_up_start_rps": 1.0, "ramp_up_end_rps": 2.0, "request_rate": 3.0},
         "leave --request-rate out"),
        ({"goodput": ("ttft:x",)}, "--goodput"),
        ({"optimize": "latency"}, "--optimize must be one of throughput, tpot"),
    ],
)
def test_validate_rejects_bad_load_options(changes, message):
    with pytest.raises(SpecbenchError, match=message):
        validate_config(SweepConfig.from_flat(changes))


def test_config_round_trips_the_new_fields():
    config = SweepConfig(duration=5.0, ramp_up_strategy="linear", ramp_up_start_rps=1.0, ramp_up_end_rps=4.0,
                         goodput=("ttft:100", "tpot:20"), cache_reset=False, optimize="tpot")
    assert SweepConfig.from_dict(config.to_dict()) == config
    assert "optimize" not in config.identity()  # recomputed freely on --resume


def test_warmup_prompts_are_synthetic_short_and_differ_per_cell():
    workload = MtBenchWorkload(max_tokens=64)
    sample = Sample(sample_id="81", category="writing", turns=("Write a poem", "Shorter"))
    planner = TurnPlanner(workload, None, tokenize=False)
    settings = TurnSettings(0.0, None, 1.0, -1, False, seed=0, repeat=0)
    template = planner.first_turn(sample, settings)
    cell_a, cell_b = CellKey(0, 0.0, 1, 0), CellKey(0, 0.0, 1, 2)
    warm_a = warmup_turns(planner, template, cell_a, settings, 3, seed=0)
    warm_b = warmup_turns(planner, template, cell_b, settings, 3, seed=0)
    texts_a = [t.prompt.text for t in warm_a]
    assert len(set(texts_a)) == 3 and not set(texts_a) & {t.prompt.text for t in warm_b}
    assert all("Write a poem" not in text for text in texts_a)
    assert all(t.params.max_tokens == WARMUP_MAX_TOKENS and t.sample.category == "warmup" for t in warm_a)
    assert all(t.prompt.messages for t in warm_a)  # rendered as the workload's chat prompts are
    assert [t.prompt.text for t in warmup_turns(planner, template, cell_a, settings, 3, seed=0)] == texts_a

"""The declared sampling limits (sampling_params.SAMPLING_LIMITS) are what the engine's representations hold: values
just inside work on device, values just outside are refused before they get there."""

from __future__ import annotations

import math

import pytest
import torch

from specbench.errors import SpecbenchError
from specbench.sampling_params import (
    FLOAT32_MAX,
    FLOAT32_TINY,
    MIN_SAMPLED_TEMPERATURE,
    SEED_MAX,
    SEED_MIN,
    SamplingParams,
)
from specbench.speculation.sampling import logits_to_probs, make_generator


def test_the_seed_range_is_what_torch_accepts():
    for seed in (SEED_MIN, SEED_MAX):
        assert make_generator(SamplingParams(temperature=1.0, seed=seed).seed, "cpu") is not None
    for seed in (SEED_MIN - 1, SEED_MAX + 1):
        with pytest.raises((RuntimeError, ValueError, OverflowError)):
            make_generator(seed, "cpu")
        with pytest.raises(SpecbenchError, match="seed"):
            SamplingParams(seed=seed)


def test_edge_values_give_finite_probabilities_on_device():
    logits = torch.tensor([[65504.0, -65504.0, 0.0, 1.0]])  # fp16's extremes
    for temperature, top_p in ((MIN_SAMPLED_TEMPERATURE, 1.0), (FLOAT32_MAX, FLOAT32_TINY), (1.0, FLOAT32_TINY)):
        params = SamplingParams(temperature=temperature, top_p=top_p)
        probs = logits_to_probs(logits, torch.tensor([params.temperature], dtype=torch.float32),
                                torch.tensor([4]), torch.tensor([params.top_p], dtype=torch.float32))
        assert torch.isfinite(probs).all() and probs.sum().item() == pytest.approx(1.0)
    assert torch.tensor(FLOAT32_TINY / 2**24, dtype=torch.float32).item() == 0.0  # why smaller top_p is refused


@pytest.mark.parametrize(("field", "value"), [
    ("temperature", math.nan), ("temperature", math.inf), ("temperature", -1.0), ("temperature", 1e-30),
    ("temperature", 1e39), ("top_p", 0.0), ("top_p", FLOAT32_TINY / 2), ("top_p", 1.01), ("top_p", math.nan),
    ("top_k", 0), ("top_k", -2), ("max_tokens", 0),
])
def test_values_outside_the_limits_are_refused_by_name(field, value):
    with pytest.raises(SpecbenchError, match=field):
        SamplingParams(**{field: value})

"""Sampling: exact temperature / top-k / top-p warping, seeded reproducibility, greedy rows, exponential race."""

from __future__ import annotations

import pytest
import torch

from specbench.sampling_params import SamplingParams
from specbench.speculation.sampling import (
    build_sampling_tensors,
    logits_to_probs,
    make_generator,
    sample,
    sample_from_probs,
)


def _warp(probs: list[float], temperature: float = 1.0, top_k: int | None = None, top_p: float = 1.0) -> list[float]:
    logits = torch.tensor([probs]).log()
    vocab = logits.shape[1]
    out = logits_to_probs(
        logits,
        torch.tensor([temperature]),
        torch.tensor([top_k or vocab]),
        torch.tensor([top_p]),
    )
    return out[0].tolist()


def _normalized(weights: list[float]) -> list[float]:
    total = sum(weights)
    return [w / total for w in weights]


def test_temperature_scales_log_probs():
    base = [0.5, 0.3, 0.15, 0.05]
    assert _warp(base, temperature=2.0) == pytest.approx(_normalized([p**0.5 for p in base]), abs=1e-6)
    assert _warp(base, temperature=0.5) == pytest.approx(_normalized([p**2 for p in base]), abs=1e-6)
    assert _warp(base) == pytest.approx(base, abs=1e-6)


def test_top_k_keeps_k_largest():
    assert _warp([0.1, 0.4, 0.2, 0.3], top_k=2) == pytest.approx([0, 4 / 7, 0, 3 / 7], abs=1e-6)
    assert _warp([0.1, 0.4, 0.2, 0.3], top_k=1) == pytest.approx([0, 1, 0, 0], abs=1e-6)


def test_top_k_keeps_ties_with_kth_logit():
    assert _warp([0.4, 0.2, 0.2, 0.2], top_k=2) == pytest.approx([0.4, 0.2, 0.2, 0.2], abs=1e-6)


def test_top_p_keeps_smallest_set_reaching_mass():
    base = [0.1, 0.4, 0.2, 0.3]
    assert _warp(base, top_p=0.6) == pytest.approx([0, 4 / 7, 0, 3 / 7], abs=1e-6)
    assert _warp(base, top_p=0.75) == pytest.approx([0, 4 / 9, 2 / 9, 3 / 9], abs=1e-6)
    assert _warp(base, top_p=0.35) == pytest.approx([0, 1, 0, 0], abs=1e-6)  # the top token is always kept
    assert _warp(base, top_p=1.0) == pytest.approx(base, abs=1e-6)


def test_top_p_applies_after_top_k_renormalization():
    # after top-2 the top token has mass 4/7 >= 0.5, so top-p keeps it alone; on raw probs (0.4) it would keep two
    assert _warp([0.4, 0.3, 0.2, 0.1], top_k=2, top_p=0.5) == pytest.approx([1, 0, 0, 0], abs=1e-6)


def test_top_p_applies_after_temperature():
    # at T=2 the top token has mass ~0.379 < 0.45, so two tokens stay; on raw probs (0.5) one would
    base = [0.5, 0.3, 0.15, 0.05]
    expected = _normalized([base[0] ** 0.5, base[1] ** 0.5, 0, 0])
    assert _warp(base, temperature=2.0, top_p=0.45) == pytest.approx(expected, abs=1e-6)


def test_rows_use_their_own_parameters_and_greedy_rows_are_one_hot():
    logits = torch.tensor([[0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.3, 0.2]]).log()
    probs = logits_to_probs(
        logits, torch.tensor([1.0, 0.0, 1.0]), torch.tensor([2, 4, 4]), torch.tensor([1.0, 1.0, 0.5])
    )
    expected = torch.tensor([[4 / 7, 3 / 7, 0, 0], [0, 0, 0, 1], [0.25 / 0.55, 0, 0.3 / 0.55, 0]])
    torch.testing.assert_close(probs, expected, atol=1e-6, rtol=0)
    assert probs.dtype == torch.float32


def test_build_sampling_tensors():
    params = [
        SamplingParams(),
        SamplingParams(temperature=0.7, top_k=-1, top_p=0.9),
        SamplingParams(temperature=0.7, top_k=1),  # top_k == 1 is greedy
        SamplingParams(temperature=1.0, top_k=50),
    ]
    st = build_sampling_tensors(params, [None] * 4, vocab_size=10, device="cpu")
    assert st.temperature.tolist() == pytest.approx([0.0, 0.7, 0.0, 1.0])
    assert st.top_k.tolist() == [10, 10, 1, 10]
    assert st.top_p.tolist() == pytest.approx([1.0, 0.9, 1.0, 1.0])
    assert st.is_greedy.tolist() == [True, False, True, False]
    assert st.is_greedy_cpu == (True, False, True, False)
    assert not st.all_greedy
    assert build_sampling_tensors(params[:1] * 2, [None, None], 10, "cpu").all_greedy


def test_make_generator():
    assert make_generator(None, "cpu") is None
    a, b = make_generator(7, "cpu"), make_generator(7, "cpu")
    assert torch.equal(torch.rand(5, generator=a), torch.rand(5, generator=b))


def test_sample_from_probs_follows_distribution():
    torch.manual_seed(0)
    target = torch.tensor([0.35, 0.25, 0.0, 0.2, 0.12, 0.08])
    num_rows = 30_000
    tokens = sample_from_probs((target * 3).expand(num_rows, -1), [None] * num_rows)  # unnormalized is fine
    counts = torch.bincount(tokens, minlength=6).double()
    assert counts[2] == 0
    support = target > 0
    expected = target.double() * num_rows
    stat = ((counts - expected)[support] ** 2 / expected[support]).sum()
    p_value = torch.special.gammaincc(torch.tensor((support.sum().item() - 1) / 2.0, dtype=torch.float64), stat / 2)
    assert p_value > 1e-3, p_value


def _sampled_batch(seeds: list[int | None], vocab: int = 50) -> tuple[torch.Tensor, object]:
    params = [SamplingParams(temperature=1.0, seed=s) for s in seeds]
    st = build_sampling_tensors(params, [make_generator(s, "cpu") for s in seeds], vocab, "cpu")
    logits = torch.zeros(len(seeds), vocab)  # uniform: the most varied outcome
    return logits, st


def test_seeded_sample_is_reproducible_and_seed_dependent():
    seeds = list(range(100, 116))
    logits, st = _sampled_batch(seeds)
    first = [sample(logits, st).tolist() for _ in range(3)]
    logits, st = _sampled_batch(seeds)
    again = [sample(logits, st).tolist() for _ in range(3)]
    assert first == again  # same seeds -> same token stream
    logits, st = _sampled_batch([s + 1000 for s in seeds])
    other = [sample(logits, st).tolist() for _ in range(3)]
    assert first != other


def test_seeded_row_ignores_rest_of_batch():
    logits, st = _sampled_batch([5])
    alone = sample(logits, st).item()
    torch.manual_seed(123)
    logits, st = _sampled_batch([None, 5, 9, None])
    assert sample(logits, st)[1].item() == alone


def test_greedy_rows_are_argmax_and_sampled_rows_respect_top_k():
    torch.manual_seed(0)
    logits = torch.randn(64, 20)
    params = [SamplingParams() if r % 2 else SamplingParams(temperature=1.5, top_k=3) for r in range(64)]
    st = build_sampling_tensors(params, [None] * 64, 20, "cpu")
    tokens = sample(logits, st)
    argmax = logits.argmax(-1)
    assert torch.equal(tokens[1::2], argmax[1::2])
    top3 = logits.topk(3, dim=-1).indices
    assert bool((top3[0::2] == tokens[0::2, None]).any(-1).all())
    assert not torch.equal(tokens[0::2], argmax[0::2])  # sampled rows are not silently greedy


def test_all_greedy_fast_path_draws_no_randomness():
    logits = torch.randn(8, 30)
    st = build_sampling_tensors([SamplingParams()] * 8, [make_generator(1, "cpu")] * 8, 30, "cpu")
    gen_state = st.generators[0].get_state()
    default_state = torch.get_rng_state()
    assert torch.equal(sample(logits, st), logits.argmax(-1))
    assert torch.equal(st.generators[0].get_state(), gen_state)
    assert torch.equal(torch.get_rng_state(), default_state)


def test_exponential_race_never_picks_zero_probability():
    probs = torch.tensor([[0.0, 1e-30, 0.0], [0.0, 0.0, 1.0]]).expand(2000, 2, 3).reshape(-1, 3)
    tokens = sample_from_probs(probs, [None] * probs.shape[0])
    assert torch.equal(tokens.view(2000, 2), torch.tensor([1, 2]).expand(2000, 2))


def test_top_k_rows_match_the_definition_with_ties_and_per_row_k():
    """Each row keeps the tokens at or above its k-th largest logit (every token tied with it too) and renormalises;
    recomputed here row by row from a full sort, against the batched warp (which sorts only the top k it keeps on
    CPU, falling back to the full sort on a tie at the k-th value)."""
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(12, 50, generator=gen)
    logits[3, 7] = logits[3, 11] = logits[3].max() + 1  # a tie at the top
    logits[5, :6] = 2.5  # six tied, k = 3 cuts through them
    top_k = torch.tensor([1, 2, 3, 4, 5, 3, 30, 29, 7, 1, 10, 25])  # all below the vocab: the top-k sort's rows
    ranked = logits[6].sort(descending=True).values
    logits[6][logits[6] == ranked[30]] = ranked[29]  # a tie at the largest k-th value: the full sort's rows
    for top_p in (1.0, 0.8):
        if top_p < 1.0:
            logits[3, 11] -= 0.5  # no tie across the top-p cut: its order would be the sort's choice
            logits[5, :6] = torch.linspace(2.0, 2.5, 6)
        got = logits_to_probs(logits, torch.ones(12), top_k, torch.full((12,), top_p))
        for r in range(12):
            kth = logits[r].sort(descending=True).values[top_k[r] - 1]
            kept = torch.where(logits[r] >= kth, logits[r], float("-inf")).softmax(-1)
            order = kept.argsort(descending=True, stable=True)
            mass_before = kept[order].cumsum(0) - kept[order]
            expected = torch.zeros_like(kept)
            expected[order] = torch.where(mass_before < top_p, kept[order], 0.0)
            torch.testing.assert_close(got[r], expected / expected.sum(), atol=1e-6, rtol=1e-5)

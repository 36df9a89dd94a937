"""Verifier: greedy tables, row bookkeeping, seeding, and chi-square losslessness (INV-DIST) with mutants."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
import torch

import specbench.speculation.verify.chain as verifier_module
from specbench.sampling_params import SamplingParams
from specbench.speculation.sampling import SamplingTensors, build_sampling_tensors, logits_to_probs, make_generator
from specbench.speculation.verify.chain import verify

P_VALUE = 1e-3


def _st(params: list[SamplingParams], vocab: int, seeded: bool = False) -> SamplingTensors:
    gens = [make_generator(p.seed, "cpu") if seeded else None for p in params]
    return build_sampling_tensors(params, gens, vocab, "cpu")


def _peaked(argmax_rows: list[int], vocab: int, gap: float = 5.0) -> torch.Tensor:  # [len, vocab]
    return torch.nn.functional.one_hot(torch.tensor(argmax_rows), vocab).float() * gap


def _drafts(rows: list[list[int]], width: int) -> torch.Tensor:  # padded with -1
    return torch.tensor([r + [-1] * (width - len(r)) for r in rows], dtype=torch.int64).view(len(rows), width)


def _greedy_reference(target_logits, drafts: list[list[int]]) -> tuple[list[list[int]], list[int]]:
    outputs, accepted, row = [], [], 0
    for req_drafts in drafts:
        argmax = target_logits[row : row + len(req_drafts) + 1].argmax(-1).tolist()
        n = 0
        while n < len(req_drafts) and req_drafts[n] == argmax[n]:
            n += 1
        outputs.append(req_drafts[:n] + [argmax[n]])
        accepted.append(n)
        row += len(req_drafts) + 1
    return outputs, accepted


# ---------------------------------------------------------------- greedy tables


@pytest.mark.parametrize(
    "drafts,target_argmax,expected,num_accepted",
    [
        ([1, 2, 3], [1, 5, 3, 4], [1, 5, -1, -1], 1),  # early mismatch: emit the target's token
        ([1, 2, 3], [0, 2, 3, 4], [0, -1, -1, -1], 0),  # first draft rejected
        ([1, 2, 3], [1, 2, 3, 4], [1, 2, 3, 4], 3),  # full acceptance plus bonus
    ],
)
def test_greedy_single_request(drafts, target_argmax, expected, num_accepted):
    st = _st([SamplingParams()], vocab=6)
    res = verify(_peaked(target_argmax, 6), _drafts([drafts], 3), torch.tensor([3]), None, st)
    assert res.output_token_ids.tolist() == [expected]
    assert res.num_accepted.tolist() == [num_accepted]


def test_zero_draft_batch_is_plain_decode():
    st = _st([SamplingParams()] * 2, vocab=6)
    res = verify(_peaked([4, 2], 6), torch.empty(2, 0, dtype=torch.int64), torch.tensor([0, 0]), None, st)
    assert res.output_token_ids.tolist() == [[4], [2]]
    assert res.num_accepted.tolist() == [0, 0]


def test_greedy_mixed_batch_keeps_rows_and_padding():
    drafts = [[1, 2, 3], [], [5], [2, 2]]
    target_argmax = [1, 2, 0, 9] + [7] + [5, 8] + [2, 3, 6]  # rows per request: 4, 1, 2, 3
    st = _st([SamplingParams()] * 4, vocab=10)
    res = verify(_peaked(target_argmax, 10), _drafts(drafts, 3), torch.tensor([3, 0, 1, 2]), None, st)
    assert res.output_token_ids.tolist() == [[1, 2, 0, -1], [7, -1, -1, -1], [5, 8, -1, -1], [2, 3, -1, -1]]
    assert res.num_accepted.tolist() == [2, 0, 1, 1]


def test_greedy_matches_loop_reference_on_random_batches():
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        num_reqs, vocab, width = 16, 3, 4
        counts = torch.randint(0, width + 1, (num_reqs,), generator=gen).tolist()
        drafts = [torch.randint(0, vocab, (c,), generator=gen).tolist() for c in counts]
        logits = torch.randn(sum(counts) + num_reqs, vocab, generator=gen)
        st = _st([SamplingParams()] * num_reqs, vocab)
        res = verify(logits, _drafts(drafts, width), torch.tensor(counts), None, st)
        outputs, accepted = _greedy_reference(logits, drafts)
        assert res.num_accepted.tolist() == accepted
        assert res.output_token_ids.tolist() == [o + [-1] * (width + 1 - len(o)) for o in outputs]


def test_sampled_path_on_point_mass_targets_equals_greedy():
    """Exercises the sampled path's row bookkeeping: a near point-mass target accepts exactly its argmax."""
    gen = torch.Generator().manual_seed(1)
    num_reqs, vocab, width = 32, 3, 3
    counts = torch.randint(0, width + 1, (num_reqs,), generator=gen).tolist()
    drafts = [torch.randint(0, vocab, (c,), generator=gen).tolist() for c in counts]
    argmax_rows = torch.randint(0, vocab, (sum(counts) + num_reqs,), generator=gen).tolist()
    logits = _peaked(argmax_rows, vocab, gap=60.0)
    sampled_st = _st([SamplingParams(temperature=1.0)] * num_reqs, vocab)
    greedy_st = _st([SamplingParams()] * num_reqs, vocab)
    draft_probs = torch.full((num_reqs, width, vocab), 1.0 / vocab)
    for probs in (None, draft_probs):
        sampled = verify(logits, _drafts(drafts, width), torch.tensor(counts), probs, sampled_st)
        greedy = verify(logits, _drafts(drafts, width), torch.tensor(counts), probs, greedy_st)
        assert torch.equal(sampled.output_token_ids, greedy.output_token_ids)
        assert torch.equal(sampled.num_accepted, greedy.num_accepted)


def test_greedy_requests_in_a_sampled_batch_ignore_draft_probs():
    params = [SamplingParams(), SamplingParams(temperature=1.0)]
    logits = _peaked([3, 1, 0, 2], vocab=4)
    draft_probs = torch.zeros(2, 1, 4)  # draft_prob 0 would reject any sampled draft
    res = verify(logits, _drafts([[3], [0]], 1), torch.tensor([1, 1]), draft_probs, _st(params, 4))
    assert res.output_token_ids[0].tolist() == [3, 1]
    assert res.num_accepted[0].item() == 1


def test_acceptance_boundaries():
    num_reqs, vocab = 2000, 5
    logits = torch.tensor([0.1, 0.3, 0.2, 0.25, 0.15]).log().expand(num_reqs * 3, vocab)
    st = _st([SamplingParams(temperature=1.0)] * num_reqs, vocab)
    target_probs = logits_to_probs(logits[:1], st.temperature[:1], st.top_k[:1], st.top_p[:1])[0]
    drafts = torch.full((num_reqs, 2), 3)
    # draft == target: the ratio is exactly 1 and u <= 1 always accepts
    same = verify(logits, drafts, torch.full((num_reqs,), 2), target_probs.expand(num_reqs, 2, vocab), st)
    assert (same.num_accepted == 2).all()
    # draft_prob 0 for the proposed token: always rejected; the residual max(p - q, 0) is a point mass on 3
    zeroed = target_probs.clone()
    zeroed[3] = 0.0
    rejected = verify(logits, drafts, torch.full((num_reqs,), 2), zeroed.expand(num_reqs, 2, vocab), st)
    assert (rejected.num_accepted == 0).all()
    assert set(rejected.output_token_ids[:, 0].tolist()) == {3}


# ---------------------------------------------------------------- seeding


def _seeded_case(seeds: list[int], counts: list[int], width: int = 3, vocab: int = 12, case_seed: int = 0):
    gen = torch.Generator().manual_seed(case_seed)
    logits = torch.randn(sum(counts) + len(counts), vocab, generator=gen)
    draft_probs = torch.randn(len(counts), width, vocab, generator=gen).softmax(-1)
    drafts = torch.multinomial(draft_probs.view(-1, vocab), 1, generator=gen).view(len(counts), width)
    drafts = torch.where(torch.arange(width)[None] < torch.tensor(counts)[:, None], drafts, -1)
    st = _st([SamplingParams(temperature=1.0, seed=s) for s in seeds], vocab, seeded=True)
    return logits, drafts, torch.tensor(counts), draft_probs, st


def test_seeded_verify_is_reproducible_and_seed_dependent():
    counts = [3] * 24
    runs = [verify(*_seeded_case(list(range(24)), counts)).output_token_ids for _ in range(2)]
    assert torch.equal(runs[0], runs[1])
    other = verify(*_seeded_case(list(range(100, 124)), counts)).output_token_ids
    assert not torch.equal(runs[0], other)


def test_seeded_request_ignores_rest_of_batch():
    logits, drafts, counts, draft_probs, st = _seeded_case([7, 8, 9], [3, 1, 0], case_seed=3)
    batch = verify(logits, drafts, counts, draft_probs, st)
    # the first request alone: its 4 rows, its drafts and a fresh generator with the same seed
    alone_st = _st([SamplingParams(temperature=1.0, seed=7)], 12, seeded=True)
    alone = verify(logits[:4], drafts[:1], counts[:1], draft_probs[:1], alone_st)
    assert torch.equal(alone.output_token_ids, batch.output_token_ids[:1])
    # the last request alone (zero drafts: a plain seeded decode)
    alone_st = _st([SamplingParams(temperature=1.0, seed=9)], 12, seeded=True)
    alone = verify(logits[6:7], drafts[2:, :0], counts[2:], draft_probs[2:, :0], alone_st)
    assert alone.output_token_ids[0, 0] == batch.output_token_ids[2, 0]


def test_sampling_tensors_without_host_greedy_flags_give_same_tokens():
    """SamplingTensors built by hand (is_greedy_cpu=None) may advance greedy rows' generators, never change tokens."""
    logits, drafts, counts, draft_probs, _ = _seeded_case([1, 2, 3, 4], [3, 2, 0, 3], case_seed=5)
    params = [SamplingParams(seed=1), SamplingParams(temperature=1.0, seed=2), SamplingParams(seed=3),
              SamplingParams(temperature=0.9, top_p=0.8, seed=4)]
    with_flags = verify(logits, drafts, counts, draft_probs, _st(params, 12, seeded=True))
    st = replace(_st(params, 12, seeded=True), is_greedy_cpu=None)
    without_flags = verify(logits, drafts, counts, draft_probs, st)
    assert torch.equal(with_flags.output_token_ids, without_flags.output_token_ids)


# ---------------------------------------------------------------- distribution (INV-DIST)


def _chi2_p_value(counts: torch.Tensor, expected_probs: torch.Tensor) -> float:
    """Pearson chi-square p-value; 0.0 when a zero-probability cell was observed."""
    counts, probs = counts.double().flatten(), expected_probs.double().flatten()
    support = probs > 1e-9
    if counts[~support].sum() > 0:
        return 0.0
    expected = probs[support] / probs[support].sum() * counts.sum()
    assert expected.min() >= 5, "test design: too few expected samples per cell"
    stat = ((counts[support] - expected) ** 2 / expected).sum()
    dof = torch.tensor((support.sum().item() - 1) / 2.0, dtype=torch.float64)
    return torch.special.gammaincc(dof, stat / 2).item()


@dataclass(frozen=True)
class Chain:
    """Synthetic conditional tables; every target row is conditioned on the drafted prefix."""

    target0: torch.Tensor  # [V] logits of the token after the committed context
    target1: torch.Tensor  # [V, V] logits of the next token given token 0
    target2: torch.Tensor  # [V, V] logits of the next token given token 1 (bonus row for k = 2)
    draft0: torch.Tensor  # [V]
    draft1: torch.Tensor  # [V, V]
    params: SamplingParams

    @staticmethod
    def make(vocab: int, seed: int, params: SamplingParams) -> Chain:
        gen = torch.Generator().manual_seed(seed)
        t = lambda *shape: torch.randn(*shape, generator=gen) * 0.7  # noqa: E731
        return Chain(t(vocab), t(vocab, vocab), t(vocab, vocab), t(vocab), t(vocab, vocab), params)

    def warp(self, logits: torch.Tensor) -> torch.Tensor:  # [n, V] -> [n, V]
        n = logits.shape[0]
        st = build_sampling_tensors([self.params] * n, [None] * n, logits.shape[1], "cpu")
        return logits_to_probs(logits, st.temperature, st.top_k, st.top_p)


def _run_chain(chain: Chain, num_trials: int, k: int, deterministic: bool, seed: int):
    """One verify round per trial (k drafts sampled from the draft tables), then, where draft 0 was rejected,
    a zero-draft round for the second token. Returns (first, second, num_accepted), each [num_trials]."""
    torch.manual_seed(seed)
    vocab = chain.target0.shape[0]
    st = build_sampling_tensors([chain.params] * num_trials, [None] * num_trials, vocab, "cpu")
    q0 = chain.warp(chain.draft0[None]).expand(num_trials, vocab)
    d0 = torch.multinomial(q0, 1)[:, 0]
    q1 = chain.warp(chain.draft1)[d0]  # [N, V]
    d1 = torch.multinomial(q1, 1)[:, 0]
    rows = [chain.target0.expand(num_trials, vocab), chain.target1[d0], chain.target2[d1]][: k + 1]
    target_logits = torch.stack(rows, dim=1).flatten(0, 1)  # [N * (k + 1), V]
    drafts = torch.stack([d0, d1], dim=1)[:, :k]
    draft_probs = None if deterministic else torch.stack([q0, q1], dim=1)[:, :k]
    res = verify(target_logits, drafts, torch.full((num_trials,), k), draft_probs, st)
    first = res.output_token_ids[:, 0]
    rejected = res.num_accepted == 0
    num_rejected = int(rejected.sum())
    follow_up_st = build_sampling_tensors([chain.params] * num_rejected, [None] * num_rejected, vocab, "cpu")
    no_drafts = torch.empty(num_rejected, 0, dtype=torch.int64)
    no_counts = torch.zeros(num_rejected, dtype=torch.int64)
    follow_up = verify(chain.target1[first[rejected]], no_drafts, no_counts, None, follow_up_st)
    second = res.output_token_ids[:, 1].clone()
    second[rejected] = follow_up.output_token_ids[:, 0]
    return first, second, res.num_accepted


def _check_chain(chain: Chain, k: int, deterministic: bool, num_trials: int = 40_000, seed: int = 0):
    """p-values of the first token against target row 0 and of the first two tokens against
    target0(x) * target1(y | x), plus the observed and theoretical position-0 acceptance rates."""
    vocab = chain.target0.shape[0]
    first, second, num_accepted = _run_chain(chain, num_trials, k, deterministic, seed)
    p0 = chain.warp(chain.target0[None])[0]  # [V]
    p1 = chain.warp(chain.target1)  # [V, V], row x = distribution of y given x
    first_p = _chi2_p_value(torch.bincount(first, minlength=vocab), p0)
    joint_p = _chi2_p_value(torch.bincount(first * vocab + second, minlength=vocab * vocab), p0[:, None] * p1)
    q0 = chain.warp(chain.draft0[None])[0]
    # sampled drafts accept with sum min(p, q); a deterministic draft d accepts with p(d), here averaged over d ~ q
    expected_rate = float((p0 * q0).sum() if deterministic else torch.minimum(p0, q0).sum())
    observed_rate = float((num_accepted >= 1).double().mean())
    return first_p, joint_p, observed_rate, expected_rate, num_trials


WARPS = {
    "plain": SamplingParams(temperature=1.0),
    "warped": SamplingParams(temperature=0.8, top_k=5, top_p=0.9),
    "hot": SamplingParams(temperature=1.7, top_p=0.95),
}


@pytest.mark.parametrize("deterministic", [False, True], ids=["sampled_drafts", "deterministic_drafts"])
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("warp", list(WARPS))
def test_emitted_tokens_follow_target(warp, k, deterministic):
    vocab = 6 if warp != "warped" else 8
    chain = Chain.make(vocab, seed=11, params=WARPS[warp])
    first_p, joint_p, observed, expected, n = _check_chain(chain, k, deterministic)
    assert first_p > P_VALUE, f"first token deviates from target row 0 (p={first_p:.2e})"
    assert joint_p > P_VALUE, f"first two tokens deviate from target0 x target1 (p={joint_p:.2e})"
    tolerance = 5 * (expected * (1 - expected) / n) ** 0.5
    assert abs(observed - expected) < tolerance, (observed, expected)


def _mutant_no_subtraction(target_probs, draft_probs):
    return target_probs  # forgets to remove the draft's mass (or to zero a deterministic draft)


def _mutant_swapped(target_probs, draft_probs):
    residual = (draft_probs - target_probs).clamp_min(0.0)
    return torch.where(residual.sum(-1, keepdim=True) > 0, residual, target_probs)


@pytest.mark.parametrize("mutant", [_mutant_no_subtraction, _mutant_swapped], ids=["no_subtraction", "swapped"])
@pytest.mark.parametrize("deterministic", [False, True], ids=["sampled_drafts", "deterministic_drafts"])
def test_wrong_residual_fails_the_same_chi_square(monkeypatch, mutant, deterministic):
    """Power check: the harness above rejects a verifier whose recovery distribution is wrong."""
    chain = Chain.make(6, seed=11, params=WARPS["plain"])
    monkeypatch.setattr(verifier_module, "_recovery_probs", mutant)
    first_p, joint_p, *_ = _check_chain(chain, k=2, deterministic=deterministic)
    assert first_p < P_VALUE and joint_p < P_VALUE, (first_p, joint_p)

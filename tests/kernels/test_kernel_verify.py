"""verify_triton == the reference verifier: token for token under greedy, and under sampling given equal RNG state."""

from __future__ import annotations


import pytest
import torch

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here, poisoned_allocations  # noqa: E402

pytestmark = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)

from specbench.sampling_params import SamplingParams  # noqa: E402
from specbench.speculation.sampling import build_sampling_tensors, make_generator  # noqa: E402
from specbench.speculation.verify.chain import verify  # noqa: E402
from specbench.speculation.verify.chain_triton import verify_triton  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def make_case(seed, *, num_reqs, max_num_draft, vocab_size, device, logits_dtype=torch.float32, tie_heavy=False):
    """Ragged drafts (some all-zero), each draft the target argmax with probability 0.6."""
    gen = torch.Generator().manual_seed(seed)
    num_draft = torch.randint(0, max_num_draft + 1, (num_reqs,), generator=gen)
    num_tokens = int((num_draft + 1).sum())
    if tie_heavy:  # few distinct values: many exact ties, across chunk boundaries too
        logits = torch.randint(0, 3, (num_tokens, vocab_size), generator=gen).float()
    else:
        logits = torch.randn(num_tokens, vocab_size, generator=gen) * 3
    logits = logits.to(logits_dtype)
    drafts = torch.full((num_reqs, max_num_draft), -1, dtype=torch.int64)
    row = 0
    for r in range(num_reqs):
        for j in range(int(num_draft[r])):
            is_match = torch.rand(1, generator=gen).item() < 0.6
            drafts[r, j] = logits[row + j].argmax() if is_match else torch.randint(0, vocab_size, (1,), generator=gen)
        row += int(num_draft[r]) + 1
    draft_probs = torch.softmax(torch.randn(num_reqs, max_num_draft, vocab_size, generator=gen) * 2, dim=-1)
    return logits.to(device), drafts.to(device), num_draft, draft_probs.to(device)


def sampling_tensors(params, vocab_size, seeds, device):
    """Fresh generators per call, so the reference and the kernel start from the same states."""
    generators = [make_generator(s, device) for s in seeds]
    return build_sampling_tensors(params, generators, vocab_size, device)


def check_same(seed, logits, drafts, num_draft, draft_probs, params, seeds, **kwargs):
    vocab_size = logits.shape[1]
    torch.manual_seed(seed)
    expected = verify(logits, drafts, num_draft, draft_probs, sampling_tensors(params, vocab_size, seeds, DEVICE))
    torch.manual_seed(seed)
    with poisoned_allocations():
        got = verify_triton(logits, drafts, num_draft, draft_probs,
                            sampling_tensors(params, vocab_size, seeds, DEVICE), **kwargs)
    assert torch.equal(got.output_token_ids, expected.output_token_ids)
    assert torch.equal(got.num_accepted, expected.num_accepted)
    return expected


@pytest.mark.parametrize("tie_heavy", [False, True])
@pytest.mark.parametrize("logits_dtype", [torch.float32, torch.bfloat16])
def test_greedy_matches_reference(logits_dtype, tie_heavy):
    logits, drafts, num_draft, _ = make_case(3, num_reqs=6, max_num_draft=4, vocab_size=300, device=DEVICE,
                                             logits_dtype=logits_dtype, tie_heavy=tie_heavy)
    params = [SamplingParams(temperature=0.0)] * 6
    expected = check_same(0, logits, drafts, num_draft, None, params, [None] * 6, block_v=64)
    assert 0 < expected.num_accepted.sum() < num_draft.sum()  # both acceptance and rejection exercised


@pytest.mark.parametrize("with_draft_probs", [True, False])
@pytest.mark.parametrize("seed", [0, 1])
def test_sampling_matches_reference_with_equal_rng(seed, with_draft_probs):
    params = [
        SamplingParams(temperature=0.0),
        SamplingParams(temperature=0.8, top_k=20),
        SamplingParams(temperature=1.0),
        SamplingParams(temperature=0.7, top_p=0.9),
        SamplingParams(temperature=1.3, top_k=50, top_p=0.8),
        SamplingParams(temperature=0.0),
    ] * 2
    seeds = [None, 11, None, 13, None, 17, 19, None, None, 23, None, None]  # seeded and default-RNG rows mixed
    logits, drafts, num_draft, draft_probs = make_case(seed, num_reqs=len(params), max_num_draft=3, vocab_size=200,
                                                       device=DEVICE)
    expected = check_same(seed, logits, drafts, num_draft, draft_probs if with_draft_probs else None, params, seeds,
                          block_v=64)
    assert (expected.num_accepted < num_draft.to(expected.num_accepted.device)).sum() >= 3  # recoveries sampled


def test_no_drafts_emits_only_the_bonus_token():
    logits, _, _, _ = make_case(5, num_reqs=3, max_num_draft=0, vocab_size=100, device=DEVICE)
    drafts = torch.empty(3, 0, dtype=torch.int64, device=DEVICE)
    num_draft = torch.zeros(3, dtype=torch.int64)
    params = [SamplingParams(temperature=0.0), SamplingParams(temperature=1.0), SamplingParams(temperature=0.5)]
    expected = check_same(2, logits, drafts, num_draft, None, params, [None, 5, None], block_v=32)
    assert expected.output_token_ids.shape == (3, 1)


@pytest.mark.parametrize("num_draft_tokens", [0, 2])
def test_a_bonus_row_of_deterministic_drafts_keeps_token_0(num_draft_tokens):
    """A bonus row (no drafts, or every draft accepted) of a deterministic drafter (n-gram: no draft probs) has no
    draft mass to remove. The kernel once removed a point mass at token 0 there (the masked draft load's fill),
    so token 0 was never a bonus token: found by the CUDA selftest over 30 seeds (n-gram, seed 3, sampled check)."""
    num_reqs, vocab_size = 64, 50
    logits = torch.full((num_reqs * (num_draft_tokens + 1), vocab_size), -4.0)
    logits[:, 0] = 1.0  # token 0 is the likeliest token of every row
    logits[:, 1] = 0.5
    drafts = torch.zeros(num_reqs, num_draft_tokens, dtype=torch.int64)  # drafts of token 0: accepted w.p. p(0)
    num_draft = torch.full((num_reqs,), num_draft_tokens, dtype=torch.int64)
    params = [SamplingParams(temperature=1.0)] * num_reqs
    seeds = list(range(100, 100 + num_reqs))
    expected = check_same(4, logits.to(DEVICE), drafts.to(DEVICE), num_draft, None, params, seeds, block_v=16)
    bonus = expected.output_token_ids[expected.num_accepted == num_draft_tokens, num_draft_tokens]
    assert len(bonus) and (bonus == 0).any()  # the reference samples token 0 as a bonus token


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("vocab_size", [32000, 128256])
@pytest.mark.parametrize("mode", ["greedy", "sampled", "sampled_no_draft_probs"])
def test_gpu_real_vocab_matches_reference(mode, vocab_size):
    num_reqs = 64
    logits, drafts, num_draft, draft_probs = make_case(7, num_reqs=num_reqs, max_num_draft=4,
                                                       vocab_size=vocab_size, device="cuda")
    temperature = 0.0 if mode == "greedy" else 0.9
    params = [SamplingParams(temperature=temperature, top_p=0.95 if r % 2 else 1.0) for r in range(num_reqs)]
    seeds = [r if r % 3 == 0 and mode != "greedy" else None for r in range(num_reqs)]
    check_same(1, logits, drafts, num_draft, draft_probs if mode == "sampled" else None, params, seeds)

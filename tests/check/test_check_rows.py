"""Issue 15 item 3, verifier side: each row type (accepted, recovered, bonus) tested on its own against its known
law at T < 1 with top-k and top-p, with the power vs a 0.02 total-variation shift stated and >= ROWS_POWER."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specbench.check.row_batches import Warping
from specbench.check.rows import ROWS_ALPHA, ROWS_POWER, TV_SHIFT, WARPING, row_type_tests
from specbench.check.warp_reference import warp
from specbench.faults import wrap_verifier
from specbench.speculation.sampling import logits_to_probs
from specbench.speculation.verify.chain import VerifyResult, verify

CPU = torch.device("cpu")
OLD_SETTING = Warping(temperature=1.0, top_k=-1, top_p=1.0)  # the only setting the sampled check used to cover


def _failed(tests) -> set[str]:
    return {t.row_type for t in tests if t.p_value < ROWS_ALPHA}


def test_reference_warp_matches_sampling():
    logits = torch.randn(64, 16, generator=torch.Generator().manual_seed(0)) * 2
    for t, k, p in ((0.7, 10, 0.9), (1.0, -1, 1.0), (0.5, 3, 1.0), (1.3, -1, 0.5)):
        n = logits.shape[0]
        ours = logits_to_probs(logits, torch.full((n,), t), torch.full((n,), k if k > 0 else 16), torch.full((n,), p))
        np.testing.assert_allclose(warp(logits.double().numpy(), t, k, p), ours.double().numpy(), atol=1e-6)


def test_clean_verifier_passes_every_row_type_with_the_stated_power():
    tests = row_type_tests(verify, CPU, seed=0)
    assert [t.row_type for t in tests] == ["accepted", "recovered", "bonus", "bonus (no draft probs)"]
    assert not _failed(tests), tests
    assert all(t.power >= ROWS_POWER and t.num_impossible == 0 for t in tests), tests


BONUS = {"bonus", "bonus (no draft probs)"}  # one bonus row law, reached with and without draft probs


@pytest.mark.parametrize("fault, row_types", [("bonus-row-unwarped", BONUS), ("bonus-from-wrong-row", None)])
def test_verifier_mutants_caught_on_their_row_type(fault, row_types):
    mutant = wrap_verifier(fault, verify)
    failed = _failed(row_type_tests(mutant, CPU, seed=0))
    assert failed == row_types if row_types else failed == {"recovered"} | BONUS, failed


@pytest.mark.slow  # ~5 s: the not-slow loop stays under 5 min
def test_bonus_row_unwarped_is_invisible_at_the_old_setting():
    """At T = 1 without truncation the unwarped law is the right one: no test at that setting can see the bug."""
    mutant = wrap_verifier("bonus-row-unwarped", verify)
    assert not _failed(row_type_tests(mutant, CPU, seed=0, w=OLD_SETTING))
    assert _failed(row_type_tests(mutant, CPU, seed=0, w=WARPING)) == BONUS


def _tv_shifted_recovery(verify_fn, shift: float):
    """Moves `shift` of every recovered row's mass onto that row's likeliest target token: a TV shift <= shift."""
    def shifted(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st):
        result = verify_fn(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st)
        out = result.output_token_ids.clone()
        num_draft = num_draft_tokens.tolist()
        rows = torch.cumsum(torch.tensor([0] + [n + 1 for n in num_draft[:-1]]), 0)
        rejected = (result.num_accepted < num_draft_tokens.to(result.num_accepted.device))
        coin = torch.rand(len(num_draft)) < shift
        for r in torch.nonzero(rejected & coin).flatten().tolist():
            out[r, result.num_accepted[r]] = target_logits[rows[r]].argmax()
        return VerifyResult(output_token_ids=out, num_accepted=result.num_accepted)

    return shifted


def test_a_two_percent_shift_on_recovered_rows_is_caught():
    torch.manual_seed(1)
    tests = row_type_tests(_tv_shifted_recovery(verify, 2 * TV_SHIFT), CPU, seed=3)
    assert _failed(tests) == {"recovered"}, tests


@pytest.mark.slow
def test_no_false_alarm_over_30_seeds():
    failures = [seed for seed in range(30) if _failed(row_type_tests(verify, CPU, seed=100 + seed))]
    assert not failures, failures


def test_the_no_draft_probs_bonus_rows_catch_a_verifier_that_never_emits_token_0():
    """The Triton verifier once built a point mass at token 0 on every bonus row of a deterministic drafter (the
    masked draft load's fill), so token 0 never came out as a bonus token. The rows check's bonus batch without draft
    probs runs that path; its fit test rejects that law on every seed (the bonus laws give token 0 1-19% mass)."""
    import math

    import numpy as np

    from specbench.check.row_batches import NUM_GROUPS, VOCAB, accept_batch, bonus_batch
    from specbench.check.rows import BONUS_NUM_DRAFT, ROWS_ALPHA, WARPING, fit_test, rows_needed

    for seed in range(3):
        rng = np.random.default_rng(seed)
        rate = float(accept_batch(NUM_GROUPS, WARPING, rng).accept_mass.mean())
        rng = np.random.default_rng(seed)  # as row_type_tests: the accept batch, then the bonus batch
        accept_batch(math.ceil(1.15 * rows_needed() / min(rate, 1 - rate)), WARPING, rng)
        law = bonus_batch(math.ceil(1.05 * rows_needed()), BONUS_NUM_DRAFT, WARPING, rng).bonus_dist
        bent = law.copy()
        bent[:, 0] = 0.0
        bent /= bent.sum(1, keepdims=True)
        draws = np.random.default_rng(100 + seed)
        tokens = np.array([draws.choice(VOCAB, p=p) for p in bent])
        assert fit_test("bonus (no draft probs)", law, tokens).p_value < ROWS_ALPHA
        assert fit_test("bonus (no draft probs)", law, np.array([draws.choice(VOCAB, p=p) for p in law])
                        ).p_value > ROWS_ALPHA  # the right law passes (at this seed)

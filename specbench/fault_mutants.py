"""Mutants added for issue 15, one self-contained class each (test-only; the registry is specbench.faults).

Verifier mutants wrap the verify function; proposer mutants expose one hook the draft LM proposer calls when that
fault is active. None of them runs unless injected.
"""

from __future__ import annotations

import torch

from specbench.spec.verifier import VerifyResult


class BonusRowUnwarped:
    """After full acceptance the bonus token is drawn from the raw target row (temperature 1, no top-k / top-p):
    identical to the correct law at T = 1 without truncation, so a check at that setting cannot see it."""

    name = "bonus-row-unwarped"

    @staticmethod
    def wrap(verify_fn):
        def verify(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st) -> VerifyResult:
            result = verify_fn(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st)
            num_draft = num_draft_tokens.tolist()
            accepted = result.num_accepted.tolist()
            greedy = st.is_greedy.tolist()
            out = result.output_token_ids.clone()
            row = 0
            for r, (n, a) in enumerate(zip(num_draft, accepted)):
                if n > 0 and a == n and not greedy[r]:
                    probs = target_logits[row + n].float().softmax(-1)
                    out[r, a] = torch.multinomial(probs, 1, generator=st.generators[r])[0]
                row += 1 + n
            return VerifyResult(output_token_ids=out, num_accepted=result.num_accepted)

        return verify


class BonusRowPastEnd:
    """The bonus token after full acceptance is read from row num_draft + 1 (the next request's first row); for the
    batch's last request that row does not exist and the verifier raises: a crash inside the engine."""

    name = "bonus-row-past-end"

    @staticmethod
    def wrap(verify_fn):
        def verify(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st) -> VerifyResult:
            result = verify_fn(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st)
            num_draft = num_draft_tokens.tolist()
            accepted = result.num_accepted.tolist()
            out = result.output_token_ids.clone()
            row = 0
            for r, (n, a) in enumerate(zip(num_draft, accepted)):
                if n > 0 and a == n:
                    past = row + n + 1
                    if past >= target_logits.shape[0]:
                        raise IndexError(f"verify row {past} out of range for {target_logits.shape[0]} target rows")
                    out[r, a] = target_logits[past].argmax()
                row += 1 + n
            return VerifyResult(output_token_ids=out, num_accepted=result.num_accepted)

        return verify


class DraftProbsUnwarped:
    """The draft LM samples its token from the warped draft law q but hands the verifier the raw softmax (T = 1, no
    top-k / top-p) as q: the acceptance ratio uses the wrong q, so sampled output is no longer the target's law
    whenever T != 1 or truncation is on; greedy output is untouched."""

    name = "draft-probs-unwarped"

    @staticmethod
    def draft_probs(logits: torch.Tensor, warped: torch.Tensor) -> torch.Tensor:  # [n, V] each
        return logits.float().softmax(-1)


class DraftStateKeptOnPreemption:
    """The draft LM proposer keeps a preempted request's draft-KV bookkeeping: after the restart its catch-up skips
    positions whose draft KV lived in blocks the preemption freed. Only a run that preempts can see it."""

    name = "draft-state-kept-on-preemption"  # hook: DraftModelProposer.free keeps the state


VERIFIER_MUTANTS = {m.name: m for m in (BonusRowUnwarped, BonusRowPastEnd)}


class DraftStepShifted:
    """Draft step j's whole plan one position late: query at position + 1, one more visible key, the slot of that
    position. Self-consistent (INV-0 and INV-SLOT hold), but not what the request's committed length says."""

    name = "draft-step-shifted"

    @staticmethod
    def mutate(step: int, md, rebuild):
        positions = [p + 1 for p in md.positions_cpu]
        return rebuild(positions=positions, seq_lens=[p + 1 for p in positions])


class DraftMaxSeqLenStale:
    """Draft step j > 1 keeps step 1's max_seq_len: the kernel's key loop stops j - 1 keys short of the longest
    request. Positions, lengths and slots are right; only a field the old invariants never read is wrong."""

    name = "draft-max-seq-len-stale"

    @staticmethod
    def mutate(step: int, md, rebuild):
        import dataclasses

        return dataclasses.replace(md, max_seq_len=md.max_seq_len - (step - 1)) if step > 1 else md


STEP_MUTANTS = {m.name: m for m in (DraftStepShifted, DraftMaxSeqLenStale)}

"""Fault injection: named mutants of the engine, each reproducing one seed bug (off by default).

The active fault is resolved once when the engine is built and handed to the components that host
a hook (draft proposers, the verify-input builder, the verifier wrapper). With no fault active a
hook costs one attribute check where metadata is built on the host, never inside a kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.errors import SpecbenchError


@dataclass(frozen=True)
class Fault:
    name: str
    description: str
    seed: str  # the seed PR it reproduces (/work/shared/seeds), or "" for target-side classics
    layer: str  # "draft" (lowers acceptance only), "target" (corrupts output), "sampling" (corrupts sampled output only)
    methods: tuple[str, ...]  # proposers hosting the hook (target-side faults: every speculative method)


_ALL = ("draft", "eagle", "eagle3", "ngram")
_DRAFT_SIDE = ("draft", "eagle", "eagle3")  # proposers with a draft KV cache and draft-decode steps

FAULTS: dict[str, Fault] = {
    f.name: f
    for f in (
        Fault("draft-positions-off-by-one", "draft-decode step positions +1 while the visible keys are unchanged",
              "003 (sglang#25015)", "draft", _DRAFT_SIDE),
        Fault("stale-draft-metadata", "draft step j > 1 reuses step 1's attention metadata",
              "004", "draft", _DRAFT_SIDE),
        Fault("draft-kv-slice", "draft step j > 1 writes step 1's slot and its visible length is not advanced by j",
              "000 (sglang#24750)", "draft", _DRAFT_SIDE),
        Fault("catchup-sees-rejected", "catch-up visible length not trimmed after a partial acceptance",
              "001 (tokenspeed#318)", "draft", _DRAFT_SIDE),
        Fault("phase-state-leak", "draft-extend reuses the previous draft-decode step's input (metadata / hidden)",
              "002 (sglang#24859)", "draft", _DRAFT_SIDE),
        Fault("verify-kv-off-by-one", "verify writes each token's KV to the slot of the next position",
              "", "target", _ALL),
        Fault("bonus-from-wrong-row", "the recovered/bonus token is taken from the next (or previous) logits row",
              "", "target", _ALL),
        Fault("bonus-row-unwarped", "after full acceptance the bonus token is sampled at T=1 without top-k/top-p",
              "", "sampling", _ALL),
        Fault("draft-probs-unwarped", "the draft LM hands the verifier unwarped draft probs (tokens drawn warped)",
              "", "sampling", ("draft",)),
        Fault("bonus-row-past-end", "the bonus token is read one row past the request's rows (raises for the last)",
              "", "target", _ALL),
        Fault("draft-step-shifted", "draft step j's query, visible length and slot all one position late "
              "(self-consistent)", "", "draft", _DRAFT_SIDE),
        Fault("draft-max-seq-len-stale", "draft step j > 1 keeps step 1's max_seq_len (the kernel drops keys)",
              "", "draft", _DRAFT_SIDE),
        Fault("draft-state-kept-on-preemption", "the draft LM keeps a preempted request's draft-KV bookkeeping",
              "", "draft", ("draft",)),
    )
}


def resolve_fault(name: str | None) -> Fault | None:
    if name is None or name in ("", "none"):
        return None
    try:
        return FAULTS[name]
    except KeyError:
        raise SpecbenchError(f"unknown fault {name!r}; supported: {', '.join(sorted(FAULTS))}") from None


def fault_names() -> list[str]:
    return list(FAULTS)


def is_active(fault: Fault | None, name: str) -> bool:
    return fault is not None and fault.name == name


def mutant_label(inject: str | None) -> str:
    """Marker every table of a mutant run carries."""
    return f"MUTANT[{inject}]" if inject else ""


def wrap_verifier(verify_fn, fault: Fault | None):
    """The verifier, or (bonus-from-wrong-row) one whose recovered/bonus token comes from a neighbouring row."""
    from specbench.fault_mutants import VERIFIER_MUTANTS

    if fault is not None and fault.name in VERIFIER_MUTANTS:
        return VERIFIER_MUTANTS[fault.name].wrap(verify_fn)
    if not is_active(fault, "bonus-from-wrong-row"):
        return verify_fn
    def wrong_row_verify(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st):
        result = verify_fn(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st)
        num_draft = num_draft_tokens.tolist()
        accepted = result.num_accepted.tolist()
        out = result.output_token_ids.clone()
        row = 0
        for r, (n, a) in enumerate(zip(num_draft, accepted)):
            if n > 0:  # plain decoding rounds stay correct: only speculation is mutated
                wrong = a + 1 if a < n else a - 1
                out[r, a] = target_logits[row + wrong].argmax()
            row += 1 + n
        return type(result)(output_token_ids=out, num_accepted=result.num_accepted)

    return wrong_row_verify

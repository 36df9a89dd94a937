"""INV-DRAFT-ORACLE: every draft the engine proposes equals a no-cache recomputation of the head.

The oracle runs the same head with dense causal attention over the committed pairs
[(token p+1, target feature p) for p < newest] followed by its own chained steps, at positions 0, 1, ...
A shifted position, a stale or rejected KV entry, a missed catch-up row or a wrong hidden fed to a step
changes the recomputed logits, across rounds with full, partial and zero acceptance and across preemption.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from tests.support.eagle_heads import MAX_TOKENS, PREEMPTING_KV_BLOCKS, VARIANTS

from specbench import LLM, SamplingParams
from specbench.attention import create_backend
from specbench.attention.metadata import build_metadata
from specbench.execution_paths import PathRecorder
from specbench.kv.kv_cache import KVCache
from specbench.models.loader import load_model
from specbench.speculation.drafters.eagle.loader import load_eagle_head
from specbench.speculation.drafters.eagle.proposer import EagleProposer
from specbench.speculation.proposer import ProposeInput
from specbench.speculation.registry import path_names
from specbench.speculation.sampling import build_sampling_tensors

TIE_TOLERANCE = 1e-4  # logit gap under which two fp32 computations may legitimately pick different argmaxes


@dataclass(frozen=True)
class _Positions:
    positions: torch.Tensor  # [n]
    max_seq_len: int


class DenseCausal:
    """One sequence, no cache: query i sees keys 0..i."""

    name = "dense-causal"
    check_invariants = False  # the backend protocol's: this reference has no metadata to check

    def __init__(self) -> None:
        self.paths = PathRecorder(path_names())  # the backend protocol's: layers record their execution paths here

    def begin_forward(self, md, where: str) -> None:
        pass

    def forward(self, layer, q, k, v, kv_cache, md, score=None):  # [n, heads, hd] -> [n, heads, hd]; plain score
        group = q.shape[1] // k.shape[1]
        k, v = (x.repeat_interleave(group, dim=1).transpose(0, 1) for x in (k, v))
        return F.scaled_dot_product_attention(q.transpose(0, 1), k, v, is_causal=True).transpose(0, 1)


def oracle_logits(head, tokens: list[int], features: torch.Tensor, num_drafts: int) -> list[torch.Tensor]:
    """Draft-vocab logits of each chained draft step, recomputed from scratch. features: [newest, F]."""
    newest = len(tokens) - 1
    ids = torch.tensor(tokens[1 : newest + 1])
    hidden = head.project_target_features(features)
    backend, head.attn_backend = head.attn_backend, DenseCausal()
    logits = []
    try:
        for _ in range(num_drafts):
            out = head(ids, hidden, _Positions(torch.arange(len(ids)), len(ids)), None, phase="oracle")
            logits.append(head.compute_logits(out.logits_input[-1]))
            draft = head.to_target_ids(logits[-1].argmax())
            ids = torch.cat([ids, draft[None]])
            hidden = torch.cat([hidden, out.hidden[-1:]])  # the head's own feature, no fc
    finally:
        head.attn_backend = backend
    return logits


@pytest.mark.parametrize("variant", ["eagle1-bias-bin", "eagle3-native-nested"])
def test_every_draft_matches_the_no_cache_oracle(variant, head_dir, target_dir, prompt_ids):
    v = VARIANTS[variant]
    checked: list[int] = []  # accepted drafts of each checked round, filled after verification
    mismatches: list[str] = []

    def wrap(proposer):
        features: dict[str, dict[int, torch.Tensor]] = {}
        propose, add_features = proposer.propose, proposer.add_target_features

        def recording_add(request_id, start, rows):  # the features the engine hands over, by position
            for i, row in enumerate(rows):
                features.setdefault(request_id, {})[start + i] = row.clone()
            add_features(request_id, start, rows)

        proposer.add_target_features = recording_add

        @torch.inference_mode()
        def checked_propose(inp):
            proposal = propose(inp)
            for r, request_id in enumerate(inp.request_ids):
                k = inp.num_draft_tokens[r]
                if k == 0:
                    continue
                tokens = list(inp.token_ids[r])
                feats = torch.stack([features[request_id][p] for p in range(len(tokens) - 1)])
                for j, logits in enumerate(oracle_logits(proposer.head, tokens, feats, k)):
                    draft = int(proposal.draft_token_ids[r, j])
                    draft_logit = logits[_draft_index(proposer.head, draft)]
                    if draft_logit < logits.max() - TIE_TOLERANCE:
                        mismatches.append(f"{request_id} newest={len(tokens) - 1} step {j}: engine {draft}")
                checked.append(k)
            return proposal

        proposer.propose = checked_propose

    llm = LLM(str(target_dir(v.target)), method=v.method, draft=str(head_dir(variant)), max_num_steps=3, dtype="fp32",
              device="cpu", block_size=4, max_concurrency=4, allow_pickle=True, num_kv_blocks=PREEMPTING_KV_BLOCKS)
    wrap(llm.engine.proposer)
    outs = llm.generate(prompt_ids, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    assert not mismatches, mismatches[:5]
    rounds = [a for o in outs for a in o.stats.accepted_per_round]
    assert len(checked) == len(rounds) > 40
    assert {0, 3} <= set(rounds) and {1, 2} & set(rounds), "need zero, partial and full acceptance rounds"
    assert sum(o.stats.num_preemptions for o in outs) > 0


def _draft_index(head, target_id: int) -> int:
    if head.draft_to_target is None:
        return target_id
    return int((head.draft_to_target == target_id).nonzero()[0])


# Rounds of (request, committed tokens, first new feature position, drafts). "b" catches up without drafting,
# then brings features of several verify rounds at once (rounds in which nobody drafted); "a" had one of
# three drafts accepted, so its catch-up rewrites positions its draft steps used as scratch; then "b" is absent.
ROUNDS = [
    [("a", 10, 0, 3), ("b", 7, 0, 0)],
    [("a", 12, 9, 2), ("b", 13, 6, 3)],
    [("a", 15, 11, 5)],
]


def test_proposer_phases_against_the_oracle(head_dir, target_dir, prompt_ids):
    cpu = torch.device("cpu")
    target = load_model(str(target_dir("t4")), dtype=torch.float32, device=cpu, attn_backend="torch")
    loaded = load_eagle_head(str(head_dir("eagle3-native-nested")), method="eagle3", target=target, aux_override=None,
                             aux_convention="auto", attn_backend=create_backend("torch", PathRecorder(path_names())),
                             dtype=torch.float32,
                             device=cpu, allow_pickle=False)
    proposer = EagleProposer(loaded, block_size=4, device=cpu)
    proposer.bind_kv_cache(KVCache(proposer.kv_cache_spec(), 32, 4, cpu))
    sequences = {"a": prompt_ids[1][:20], "b": prompt_ids[5][:20]}
    tables = {"a": list(range(16)), "b": list(range(16, 32))}
    features = {}
    for rid, seq in sequences.items():  # causal: prefix features of one teacher-forced pass are the engine's
        n = len(seq)
        md = build_metadata(positions=list(range(n)), num_query=[n], seq_lens=[n], block_tables=[list(range(5))],
                            block_size=4, device=cpu)
        kv = KVCache(target.model.kv_cache_spec(), 5, 4, cpu)
        with torch.inference_mode():
            out = target.model(torch.tensor(seq), md, kv, aux_layer_ids=loaded.feature_layers)
        features[rid] = out.aux_hidden_states  # [n, 3H]

    def propose(batch):
        for rid, count, start, _ in batch:  # the engine hands features over as the target produces them
            proposer.add_target_features(rid, start, features[rid][start : count - 1])
        return proposer.propose(ProposeInput(
            request_ids=tuple(b[0] for b in batch), token_ids=tuple(tuple(sequences[b[0]][: b[1]]) for b in batch),
            num_draft_tokens=tuple(b[3] for b in batch), block_tables=tuple(tuple(tables[b[0]]) for b in batch),
            sampling=build_sampling_tensors([SamplingParams()] * len(batch), [None] * len(batch), 1024, cpu),
        ))

    seen: list[torch.Tensor] = []  # draft-vocab logits of every argmax_target_ids call: draft 0, then step 1, 2, ...
    argmax = proposer.argmax_target_ids

    def recording_argmax(logits_input):
        seen.append(proposer.head.compute_logits(logits_input))
        return argmax(logits_input)

    proposer.argmax_target_ids = recording_argmax
    for batch in ROUNDS:
        seen.clear()
        proposal = propose(batch)
        for r, (rid, count, _, k) in enumerate(batch):
            assert proposal.num_draft_tokens[r] == k
            with torch.inference_mode():
                expected = oracle_logits(proposer.head, sequences[rid][:count], features[rid][: count - 1], k)
            for j, logits in enumerate(expected):
                row = sum(1 for b in batch[:r] if b[3] > j)  # rows of step j: the requests still drafting
                assert torch.allclose(seen[j][row], logits, atol=1e-4, rtol=1e-4), (rid, count, j)
                assert int(proposal.draft_token_ids[r, j]) == int(proposer.head.to_target_ids(seen[j][row].argmax()))
    with pytest.raises(RuntimeError, match="committed up to 14"):  # a gap in the features is refused
        propose([("a", 17, 15, 1)])

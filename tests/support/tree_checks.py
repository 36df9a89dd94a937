"""EAGLE/MTP tree drafting checked against the same proposer's chain drafting from the same state (tests/eagle,
tests/mtp): at every tree node on the chain's branch, the tree step's draft log-probs equal the chain step's."""

from __future__ import annotations

import pytest
import torch

from specbench import SamplingParams
from specbench.speculation.draft_records import DraftRecorder
from specbench.speculation.eagle import proposer as eagle_proposer
from specbench.speculation.proposer import ProposeInput
from specbench.speculation.sampling import build_sampling_tensors
from specbench.speculation.tree_propose import TreePlan


def _first_round_input(llm, prompt, num_draft: int) -> ProposeInput:
    """Prefill `prompt` on a fresh engine and return its first decode round's propose input (KV grown for a tree)."""
    engine = llm.engine
    engine.add_request(prompt, SamplingParams(max_tokens=8, ignore_eos=True), request_id="r")
    engine.step()
    request = engine.committer.requests["r"]
    engine.scheduler.block_manager.grow(request.block_table, request.num_tokens + 32)
    st = build_sampling_tensors([request.sampling_params], [None], engine.vocab_size, engine.device)
    return ProposeInput(("r",), (tuple(request.token_ids),), (num_draft,), (tuple(request.block_table),), st)


def tree_matches_chain(make_llm, prompt, topk: int, depth: int) -> int:
    """Number of chain steps whose branch the tree drafted; asserts each one's log-probs equal the chain step's."""
    chain_llm, tree_llm = make_llm(), make_llm()
    recorder = DraftRecorder()
    chain_llm.engine.proposer.attach_recorder(recorder)
    chain_inp = _first_round_input(chain_llm, prompt, depth)
    chain_llm.engine.proposer.propose(chain_inp)
    proposer = tree_llm.engine.proposer
    seen: dict[tuple[int, ...], torch.Tensor] = {}  # branch (target ids) -> the tree's draft log-probs after it

    def spy_grow_tree(plan, root_log_probs, run_step, trace=None):
        seen[()] = root_log_probs[0]

        def spy_step(s, frontier, steps, parent_rows):
            out = run_step(s, frontier, steps, parent_rows)
            branch_of_row = {row: branch for branch, row in steps.row_of_branch[0].items()}
            first = steps.num_rows - frontier.token_ids.shape[1]
            for f in range(frontier.token_ids.shape[1]):
                branch = proposer.head.to_target_ids(torch.tensor(branch_of_row[first + f])).tolist()
                seen[tuple(branch)] = out[0, f]
            return out

        return real_grow_tree(plan, root_log_probs, spy_step, trace)

    real_grow_tree = eagle_proposer.grow_tree
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(eagle_proposer, "grow_tree", spy_grow_tree)
        proposer.propose_tree(_first_round_input(tree_llm, prompt, 1), TreePlan(topk, depth, 4 * topk * depth))
    num_prompt = len(chain_inp.token_ids[0])
    num_matched = 0
    for record in recorder.steps:
        branch = record.token_ids[num_prompt:]
        if branch not in seen:
            continue
        want = torch.log_softmax(record.logits.float(), dim=-1)
        assert torch.allclose(seen[branch].cpu(), want, atol=1e-4), (branch, (seen[branch].cpu() - want).abs().max())
        num_matched += 1
    return num_matched

"""EAGLE/MTP tree drafting checked against the same proposer's chain drafting from the same state (tests/eagle,
tests/mtp): at every tree node on the chain's branch, the tree step's draft log-probs equal the chain step's."""

from __future__ import annotations

import pytest
import torch

from specbench import SamplingParams
from specbench.speculation.draft_records import DraftRecorder
from specbench.speculation.drafters.eagle import proposer as eagle_proposer
from specbench.speculation.proposer import ProposeInput
from specbench.speculation.sampling import build_sampling_tensors
from specbench.speculation.tree.plan import TreePlan


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

    def spy_grow_tree(plan, root_log_probs, layout, run_step, trace=None):
        seen[()] = root_log_probs[0]
        branch_of_node: dict[int, tuple[int, ...]] = {-1: ()}  # request 0's candidates (builder index) -> branch

        def spy_step(step):
            out = run_step(step)
            frontier = step.frontier
            nodes, parents = frontier.node_index[0].tolist(), frontier.parent[0].tolist()
            tokens = proposer.head.to_target_ids(frontier.token_ids[0]).tolist()
            for f, (node, parent, token) in enumerate(zip(nodes, parents, tokens)):
                branch_of_node[node] = branch_of_node[parent] + (token,)
                seen[branch_of_node[node]] = out[0, f]
            return out

        return real_grow_tree(plan, root_log_probs, layout, spy_step, trace)

    real_grow_tree = eagle_proposer.grow_tree_on_device
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(eagle_proposer, "grow_tree_on_device", spy_grow_tree)
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


def propose_first_tree(llm, prompts, plan: TreePlan):
    """(proposal, the drafter's KV tensors) of one tree round proposed right after prefilling `prompts` on a fresh
    engine (every request's first decode round, KV grown for the tree)."""
    engine = llm.engine
    for i, prompt in enumerate(prompts):
        engine.add_request(prompt, SamplingParams(max_tokens=8, ignore_eos=True), request_id=f"r{i}")
    while any(engine.committer.requests[f"r{i}"].num_tokens == len(p) for i, p in enumerate(prompts)):
        engine.step()  # prefill (chunked or not) until every request holds its first token
    requests = [engine.committer.requests[f"r{i}"] for i in range(len(prompts))]
    for request in requests:
        engine.scheduler.block_manager.grow(request.block_table, request.num_tokens + 32)
    st = build_sampling_tensors([r.sampling_params for r in requests], [None] * len(requests), engine.vocab_size,
                                engine.device)
    inp = ProposeInput(tuple(r.request_id for r in requests), tuple(tuple(r.token_ids) for r in requests),
                       (1,) * len(requests), tuple(tuple(r.block_table) for r in requests), st)
    proposal = engine.proposer.propose_tree(inp, plan)
    kv = engine.proposer.kv_cache
    return proposal, [t.clone() for t in (*kv.k, *kv.v)]


def assert_same_tree_round(got, expected) -> None:
    """Two propose_first_tree results: identical trees (tokens, parents, counts) and identical draft KV."""
    (proposal, kv), (want, want_kv) = got, expected
    assert proposal.num_draft_tokens == want.num_draft_tokens
    assert torch.equal(proposal.draft_token_ids.cpu(), want.draft_token_ids.cpu())
    assert torch.equal(proposal.parents.cpu(), want.parents.cpu())
    assert len(kv) == len(want_kv) and all(torch.equal(a, b) for a, b in zip(kv, want_kv))

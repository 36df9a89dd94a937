"""Tree drafts in the engine (draft LM; EAGLE and MTP in tests/eagle, tests/mtp): greedy output == the plain engine
with and without preemption, the drafter's children are its own top-k along each branch, the accepted path's KV
equals a fresh prefill's (and does not without the compaction), tree counts add up, sampled output follows the
target's law, and methods without trees are refused in one line."""

from __future__ import annotations

import dataclasses
from itertools import zip_longest

import pytest
import torch

from specbench import LLM, SamplingParams
from specbench.attention.invariant_violation import InvariantViolation
from specbench.engine import tree_round
from specbench.errors import SpecbenchError
from specbench.speculation.draft_shape import DraftShape
from specbench.speculation.proposer import ProposeInput
from specbench.speculation.sampling import build_sampling_tensors
from specbench.speculation.tree.plan import TreePlan

MAX_TOKENS = 24
PREEMPTING_KV_BLOCKS = 30  # 4 concurrent requests of up to 40 + 24 + tree rows do not fit blocks of 4


def _llm(target: str, draft: str | None, *, num_steps: int = 3, num_kv_blocks: int | None = None,
         device: str = "cpu", debug_invariants: bool = True, **kw) -> LLM:
    pool = {"num_kv_blocks": num_kv_blocks} if num_kv_blocks else {"kv_cache_gb": 0.02}
    spec = {} if draft is None else {"method": "draft", "draft": draft, "max_num_steps": num_steps}
    return LLM(target, dtype="fp32", device=device, block_size=4, max_concurrency=4,
               debug_invariants=debug_invariants, **pool, **spec, **kw)


@pytest.fixture(scope="module")
def plain(tiny_pair, prompt_ids):
    outs = _llm(tiny_pair[0], None).generate(prompt_ids[:4], SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    return [list(o.output_token_ids) for o in outs]


# Without the debug invariants the verify input's host copies are not read back (engine/tree_inputs.py): the
# production path, the one the GPU benchmarks time.
@pytest.mark.parametrize(("topk", "budget", "is_preempting", "is_debug"),
                         [(2, 4, False, True), (2, 8, True, False), (4, 8, False, False), (4, 4, True, True)])
def test_greedy_tree_is_token_identical(tiny_pair, prompt_ids, plain, topk, budget, is_preempting, is_debug):
    llm = _llm(*tiny_pair, num_kv_blocks=PREEMPTING_KV_BLOCKS if is_preempting else None, debug_invariants=is_debug)
    llm.engine.set_draft_shape(DraftShape(topk, budget))
    outs = llm.generate(prompt_ids[:4], SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    assert [list(o.output_token_ids) for o in outs] == plain
    assert (sum(o.stats.num_preemptions for o in outs) > 0) == is_preempting
    assert {"spec.tree_round", "verify.tree", "attention.tree_torch", "tree.device_layout"} <= \
        llm.engine.paths_taken()
    for o in outs:
        s, tree = o.stats, o.stats.tree_counts
        assert tree is not None and tree.num_rounds == s.num_draft_rounds > 0
        assert sum(tree.acceptance_lengths) == tree.num_accepted == s.num_accepted_tokens
        assert sum(tree.tree_sizes) == tree.num_nodes == s.num_draft_tokens
        assert all(size == budget for size in tree.tree_sizes)  # 3 steps give more candidates than either budget
        assert sum(tree.accepted_per_depth) == tree.num_accepted == sum(tree.accepted_per_rank)
        assert sum(s.num_accepted_per_pos) == s.num_accepted_tokens
        assert sum(s.tokens_per_emission) == len(o.output_token_ids)
    # the tiny draft is close to the target: trees are accepted beyond their first child
    total = [sum(x) for x in zip_longest(*(o.stats.tree_counts.accepted_per_rank for o in outs), fillvalue=0)]
    assert total[0] > 0 and sum(total[1:]) > 0, total


def _positions_off_by_one(build):
    """The device layout with every node one position early (start + depth: its parent's position), the seed's
    draft-positions-off-by-one in the tree verify input; the host copies (debug) say the same."""
    def bent(*args, **kwargs):
        layout = build(*args, **kwargs)
        md = layout.inp.md
        is_node = torch.ones_like(md.positions, dtype=torch.bool)
        is_node[md.query_start_loc[:-1].long()] = False  # each request's root keeps its position
        positions = md.positions - is_node.long()
        cpu = tuple(positions.tolist()) if md.positions_cpu else ()
        inp = dataclasses.replace(layout.inp, md=dataclasses.replace(md, positions=positions, positions_cpu=cpu))
        return dataclasses.replace(layout, inp=inp)
    return bent


def test_positions_bent_in_the_device_layout_are_caught(tmp_path, monkeypatch):
    """A bug inside the device-built verify layout (tree.device_layout) is caught by checks that share no code with
    it, on the selftest's tiny pair: the greedy output departs from the plain engine's, and INV-TREE (positions
    recomputed from the mask on the debug read-back) stops the round. (This file's 2-layer pair is too insensitive
    to a one-position RoPE shift: its greedy output does not change.)"""
    from specbench.selftest.tiny import build_tiny_pair, random_prompts

    target, draft = build_tiny_pair(tmp_path, seed=0)
    prompts = random_prompts(4)
    params = SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True)
    plain = [list(o.output_token_ids) for o in _llm(target, None).generate(prompts, params)]
    monkeypatch.setattr(tree_round, "build_uniform_tree_verify_input",
                        _positions_off_by_one(tree_round.build_uniform_tree_verify_input))
    quiet = _llm(target, draft, debug_invariants=False)
    quiet.engine.set_draft_shape(DraftShape(4, 8))
    assert [list(o.output_token_ids) for o in quiet.generate(prompts, params)] != plain
    loud = _llm(target, draft)
    loud.engine.set_draft_shape(DraftShape(4, 8))
    with pytest.raises(InvariantViolation, match="INV-TREE violated"):
        loud.generate(prompts[:1], params)


def test_chain_shape_after_a_tree_run_is_the_chain_engine(tiny_pair, prompt_ids, plain):
    llm = _llm(*tiny_pair)
    llm.engine.set_draft_shape(DraftShape(2, 4))
    llm.generate(prompt_ids[:2], SamplingParams(max_tokens=8, ignore_eos=True))
    llm.engine.set_draft_shape(DraftShape())
    llm.engine.reset_paths()
    outs = llm.generate(prompt_ids[:4], SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    assert [list(o.output_token_ids) for o in outs] == plain
    assert all(o.stats.tree_counts is None for o in outs)
    assert "spec.tree_round" not in llm.engine.paths_taken()


def test_ngram_refuses_trees_naming_the_methods_that_draft_them(tiny_pair):
    llm = LLM(tiny_pair[0], dtype="fp32", device="cpu", block_size=4, kv_cache_gb=0.01, method="ngram",
              max_num_steps=3)
    with pytest.raises(SpecbenchError, match="not supported by method 'ngram'; methods that draft trees: draft, eagle"):
        llm.engine.set_draft_shape(DraftShape(2, 4))
    llm.engine.set_draft_shape(DraftShape(1, None))  # a chain is fine


def test_draft_children_are_the_drafts_own_topk_along_each_branch(tiny_pair, prompt_ids):
    """Each expanded node's children are the draft LM's top-k after prompt + that node's branch, recomputed
    cache-free by HF transformers: a tree draft step that saw a sibling (or the wrong position) gives other tokens."""
    from transformers import AutoModelForCausalLM

    topk, depth = 3, 3
    llm = _llm(*tiny_pair, num_steps=depth)
    engine = llm.engine
    prompts = [prompt_ids[0], prompt_ids[2]]
    for p in prompts:
        engine.add_request(p, SamplingParams(max_tokens=4, ignore_eos=True))
    engine.step()  # prefill: each request's newest token is its first output
    requests = list(engine.scheduler.running)
    for r in requests:
        engine.scheduler.block_manager.grow(r.block_table, r.num_tokens + 16)
    inp = ProposeInput(tuple(r.request_id for r in requests), tuple(tuple(r.token_ids) for r in requests),
                       (1,) * len(requests), tuple(tuple(r.block_table) for r in requests),
                       build_sampling_tensors([r.sampling_params for r in requests], [None] * len(requests),
                                              engine.vocab_size, engine.device))
    proposal = engine.proposer.propose_tree(inp, TreePlan(topk, depth, 12))
    hf = AutoModelForCausalLM.from_pretrained(tiny_pair[1], dtype=torch.float32).eval()
    num_checked = 0
    for r, request in enumerate(requests):
        tokens = proposal.draft_token_ids[r].tolist()
        parents = proposal.parents[r].tolist()
        for node in [-1, *range(len(tokens))]:
            children = [tokens[i] for i, p in enumerate(parents) if p == node]
            if not children:
                continue
            branch, n = [], node
            while n != -1:
                branch.insert(0, tokens[n])
                n = parents[n]
            with torch.no_grad():
                logits = hf(torch.tensor([list(request.token_ids) + branch])).logits[0, -1, : engine.vocab_size]
            top = logits.topk(topk).indices.tolist()
            kept = [t for t in top if t in children]  # kept children: a subset of the top-k, in rank order
            assert children == kept and len(kept) == len(children), (node, children, top)
            num_checked += 1
    assert num_checked >= 2 * depth


def _kv_rows(engine, request, num_positions: int, kv=None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    kv, size = kv or engine.runner.kv_cache, engine.block_size
    slots = torch.tensor([request.block_table[p // size] * size + p % size for p in range(num_positions)])
    return [(kv.flat(layer)[0][slots], kv.flat(layer)[1][slots]) for layer in range(len(kv.k))]


def _kv_after_tree_rounds_matches_prefill(tiny_pair, prompt) -> tuple[int, int, int]:
    """(tree rounds, those after which the cached KV equals a fresh prefill of the committed tokens, those that
    accepted a node out of place)."""
    llm = _llm(*tiny_pair)
    engine = llm.engine
    engine.set_draft_shape(DraftShape(4, 8))
    fresh = _llm(tiny_pair[0], None).engine
    engine.add_request(prompt, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True), request_id="r")
    engine.step()
    num_rounds = num_equal = num_moved = 0
    while engine.has_unfinished():
        request = engine.committer.requests["r"]
        rounds_before = request.stats.tree_counts.num_rounds if request.stats.tree_counts else 0
        ranks_before = list(request.stats.tree_counts.accepted_per_rank) if request.stats.tree_counts else []
        if engine.step():
            break
        counts = request.stats.tree_counts
        assert counts.num_rounds == rounds_before + 1
        num_rounds += 1
        num_moved += sum(counts.accepted_per_rank[1:]) > sum(ranks_before[1:])
        cached = request.num_cached_tokens
        rid = fresh.add_request(request.token_ids[:cached], SamplingParams(max_tokens=2, ignore_eos=True))
        fresh.step()  # the prefill: the fresh engine caches exactly these tokens' KV
        want = _kv_rows(fresh, fresh.committer.requests[rid], cached)
        got = _kv_rows(engine, request, cached)
        num_equal += all(torch.allclose(g, w, atol=1e-5) for gw, ww in zip(got, want) for g, w in zip(gw, ww))
        fresh.abort_request(rid)
    return num_rounds, num_equal, num_moved


def test_accepted_path_kv_equals_a_fresh_prefill(tiny_pair, prompt_ids):
    num_rounds, num_equal, num_moved = _kv_after_tree_rounds_matches_prefill(tiny_pair, prompt_ids[1])
    assert num_moved > 0, "no round accepted a node out of place: the test would not see a missing move"
    assert num_equal == num_rounds > 0


def test_without_compaction_the_kv_is_a_rejected_branchs(tiny_pair, prompt_ids, monkeypatch):
    monkeypatch.setattr(tree_round, "_compact_target_kv", lambda kv, block_tables, result, num_cached, block_size: None)
    num_rounds, num_equal, num_moved = _kv_after_tree_rounds_matches_prefill(tiny_pair, prompt_ids[1])
    assert num_moved > 0 and num_equal < num_rounds


def test_triton_backend_tree_verify_is_token_identical(tiny_pair, prompt_ids, plain):
    """The tree verify and the tree draft steps (queries the last of more tree rows) through the Triton bitmask
    kernel, the reference never: same greedy output."""
    from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here

    if not kernels_runnable_here():
        pytest.skip(RERUN_REASON)
    # the kernel where it runs: CUDA when there is one (fp32, eager tree rounds), else the interpreter on CPU
    device = "cuda" if torch.cuda.is_available() else "cpu"
    llm = _llm(*tiny_pair, attention_backend="triton", device=device)
    llm.engine.set_draft_shape(DraftShape(2, 4))
    outs = llm.generate(prompt_ids[:2], SamplingParams(max_tokens=8, ignore_eos=True))
    assert [list(o.output_token_ids) for o in outs] == [p[:8] for p in plain[:2]]
    assert {"attention.tree_triton", "spec.tree_round"} <= llm.engine.paths_taken()
    assert "attention.tree_torch" not in llm.engine.paths_taken()


def test_tree_round_logprobs_are_the_plain_engines(tiny_pair, prompt_ids):
    """Each emitted token's logprob comes from the row that predicted it (the root's, then each accepted node's)."""
    params = SamplingParams(max_tokens=12, ignore_eos=True, logprobs=2)
    want = _llm(tiny_pair[0], None).generate(prompt_ids[:3], params)
    llm = _llm(*tiny_pair)
    llm.engine.set_draft_shape(DraftShape(2, 6))
    got = llm.generate(prompt_ids[:3], params)
    for g, w in zip(got, want):
        assert g.output_token_ids == w.output_token_ids
        assert [x.token_id for x in g.logprobs] == list(g.output_token_ids)
        assert [x.rank for x in g.logprobs] == [x.rank for x in w.logprobs]
        assert [[t for t, _ in x.top] for x in g.logprobs] == [[t for t, _ in x.top] for x in w.logprobs]
        assert max(abs(a.logprob - b.logprob) for a, b in zip(g.logprobs, w.logprobs)) < 1e-4


def test_trees_near_the_context_limit_are_cut_and_stay_exact(tiny_pair, prompt_ids):
    """Rounds whose full-depth tree would pass max_model_len draft shallower trees (or none): same output as plain."""
    params = SamplingParams(max_tokens=40, ignore_eos=True)
    prompts = [prompt_ids[0], prompt_ids[2]]  # 6 and 13 tokens
    want = _llm(tiny_pair[0], None, max_model_len=24).generate(prompts, params)
    llm = _llm(*tiny_pair, max_model_len=24)
    llm.engine.set_draft_shape(DraftShape(3, 6))
    got = llm.generate(prompts, params)
    assert [o.output_token_ids for o in got] == [o.output_token_ids for o in want]
    assert all(o.finish_reason == "length" and len(o.prompt_token_ids) + len(o.output_token_ids) == 24 for o in got)


def test_draft_lm_keeps_the_accepted_paths_own_kv(tiny_pair, prompt_ids):
    """After each tree round the draft LM's committed KV (moved from its tree rows) equals a fresh draft prefill's."""
    llm = _llm(*tiny_pair)
    engine = llm.engine
    engine.set_draft_shape(DraftShape(3, 8))
    fresh = _llm(tiny_pair[1], None).engine  # the draft model as a plain engine
    engine.add_request(prompt_ids[3], SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True), request_id="r")
    engine.step()
    num_rounds = num_kept = 0
    while engine.has_unfinished():
        request = engine.committer.requests["r"]
        if engine.step():
            break
        state = engine.proposer._state["r"]
        num_rounds += 1
        num_kept += state.num_cached > state.newest + 1
        cached = state.num_cached
        rid = fresh.add_request(request.token_ids[:cached], SamplingParams(max_tokens=2, ignore_eos=True))
        fresh.step()
        want = _kv_rows(fresh, fresh.committer.requests[rid], cached)
        got = _kv_rows(engine, request, cached, engine.proposer.kv_cache)
        assert all(torch.allclose(g, w, atol=1e-5) for gw, ww in zip(got, want) for g, w in zip(gw, ww)), num_rounds
        fresh.abort_request(rid)
    assert num_rounds > 0 and num_kept > 0


def test_targets_with_sliding_window_layers_refuse_trees(tmp_path):
    from tests.support.tiny_models import build_tiny_model

    build_tiny_model(tmp_path / "t", "mistral", num_layers=2, seed=0, sliding_window=8)
    build_tiny_model(tmp_path / "d", "mistral", num_layers=1, seed=1, sliding_window=8)
    llm = LLM(str(tmp_path / "t"), dtype="fp32", device="cpu", block_size=4, kv_cache_gb=0.01, method="draft",
              draft=str(tmp_path / "d"), max_num_steps=2)
    with pytest.raises(SpecbenchError, match="tree drafts need layers that verify trees .*a window of 8 keys"):
        llm.engine.set_draft_shape(DraftShape(2, 4))

"""--synthetic-acceptance on tree rounds: the engine verifies with synthetic_tree_verify (path verify.synthetic,
never verify.tree) against the (depth, rank) table of its rates, and the realised acceptance matches that law: exactly
when every rate is 0 or 1, within a binomial band otherwise, with nodes past rank 0 accepted."""

from __future__ import annotations

import math

import pytest

from specbench import LLM, SamplingParams
from specbench.engine import tree_round
from specbench.errors import SpecbenchError
from specbench.speculation.draft_shape import DraftShape
from specbench.speculation.synthetic.tree import engine_table, expected_acceptance_length

NUM_STEPS = 3


def _tree_llm(tiny_pair, rates: tuple[float, ...], shape: DraftShape) -> LLM:
    llm = LLM(tiny_pair[0], method="draft", draft=tiny_pair[1], max_num_steps=NUM_STEPS, dtype="fp32",
              device="cpu", block_size=4, max_concurrency=8, kv_cache_gb=0.05, debug_invariants=True,
              synthetic_acceptance=rates)
    llm.engine.set_draft_shape(shape)
    return llm


def _run_recording_trees(monkeypatch, llm: LLM, prompts, max_tokens: int):
    """(outputs, [(parents of one request's tree, its table)] per verified request-round)."""
    seen = []
    verify = tree_round.synthetic_tree_verify

    def recording(logits, tree, table, generator, padded):
        seen.extend((tree.parents_of(r), table.cpu()) for r in range(tree.num_reqs))
        return verify(logits, tree, table, generator, padded)

    monkeypatch.setattr(tree_round, "synthetic_tree_verify", recording)
    outs = llm.generate(prompts, SamplingParams(max_tokens=max_tokens, ignore_eos=True))
    return outs, seen


def test_certain_rates_accept_the_rank0_chain_exactly(tiny_pair, prompt_ids, monkeypatch):
    """Rates of 1: every round accepts its tree's rank-0 chain, whatever the tree's shape (the law is then
    deterministic, so the expected length is the realised one)."""
    llm = _tree_llm(tiny_pair, (1.0,) * NUM_STEPS, DraftShape(2, 5))
    outs, seen = _run_recording_trees(monkeypatch, llm, prompt_ids[:4], 24)
    taken = llm.engine.paths_taken()
    assert {"spec.tree_round", "verify.synthetic"} <= taken and "verify.tree" not in taken
    num_rounds = sum(o.stats.num_draft_rounds for o in outs)
    assert num_rounds == len(seen) > 0
    expected = sum(expected_acceptance_length(parents, table) - 1 for parents, table in seen)
    assert sum(o.stats.num_accepted_tokens for o in outs) == round(expected)
    assert all(sum(o.stats.tree_counts.accepted_per_rank[1:]) == 0 for o in outs)  # rank 0 always hits first
@pytest.mark.parametrize("shape", [DraftShape(2, 6), DraftShape(4, 8)])
def test_acceptance_follows_the_tree_table(tiny_pair, prompt_ids, monkeypatch, shape):
    """Realised accepted nodes over all rounds == the sum of each drafted tree's exact expectation under the table
    of the run's rates, within 4 sigma (a round's length lies in [0, depth]: variance <= depth^2 / 4); siblings past
    rank 0 are accepted (the rank decay, not a chain)."""
    rates = (0.8, 0.64, 0.512)
    llm = _tree_llm(tiny_pair, rates, shape)
    outs, seen = _run_recording_trees(monkeypatch, llm, prompt_ids * 2, 40)
    assert len(seen) > 150
    want_table = engine_table(rates, NUM_STEPS, shape.eagle_topk)
    assert all(table.shape == want_table.shape and bool((table == want_table).all()) for _, table in seen[:1])
    expected = sum(expected_acceptance_length(parents, table) - 1 for parents, table in seen)
    got = sum(o.stats.num_accepted_tokens for o in outs)
    band = 4 * math.sqrt(len(seen) * NUM_STEPS**2 / 4)
    assert abs(got - expected) < band, (got, expected, band)
    per_rank = [sum(o.stats.tree_counts.accepted_per_rank[i] for o in outs
                    if len(o.stats.tree_counts.accepted_per_rank) > i) for i in range(2)]
    assert per_rank[0] > 0 and per_rank[1] > 0, per_rank


def test_lossless_engine_refuses_synthetic_acceptance(tiny_pair):
    llm = LLM(tiny_pair[0], method="draft", draft=tiny_pair[1], max_num_steps=2, dtype="fp32", device="cpu",
              block_size=4, kv_cache_gb=0.01)
    with pytest.raises(SpecbenchError, match="built with --synthetic-acceptance"):
        llm.engine.set_synthetic_acceptance((0.5, 0.4))

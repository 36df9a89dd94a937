"""The fused qkv + RoPE + K/V store projection (proj.rope_store) in the selftest: the no-bias tied variant's heads are
32 wide (tiny.py), so every forward of its target up to the gemv's token limit (prefills, verify and decode batches)
takes the epilogue, not only one-token steps, and the path's mutant rope-store-slot-shift is caught there. On CPU the
production-like options (Triton attention and verifier, fused kernels on) run under the Triton interpreter."""

from __future__ import annotations

import pytest

from specbench.selftest.tiny import variant_for_seed, variant_shape

ROPE_STORE_SEED = 1  # the first seed of the no-bias tied variant: the one whose target takes the fused projections
# The CUDA production paths as far as CPU runs them (the engine under test; the reference stays torch throughout).
PRODUCTION_LIKE = {"attention_backend": "triton", "verifier": "triton", "fused_kernels": "on"}


def test_the_tied_variant_takes_the_rope_store_at_every_batch_the_gemv_takes():
    pytest.importorskip("triton")
    from specbench.models import fused_kernels

    assert variant_for_seed(ROPE_STORE_SEED) == "llama"
    head_dim = variant_shape("llama").head_dim
    assert all(fused_kernels.rope_store_fits(n, head_dim) for n in range(1, fused_kernels.gemv_max_tokens() + 1))
    # The other variants keep their 16-wide heads (seed 0's pair, results and baselines stay put): their batches
    # take proj.fused, the qkv projection without the epilogue.
    assert not fused_kernels.rope_store_fits(2, variant_shape("biased").head_dim)
    assert variant_shape("qwen3").head_dim == variant_shape("biased").head_dim


@pytest.mark.slow  # Triton interpreter: ~40 s on 2 busy cores
def test_selftest_catches_rope_store_slot_shift_on_multi_token_batches():
    """Plain and draft-LM rows of the seed: clean rows pass and take proj.rope_store (and never proj.fused: every
    batch fits the epilogue); the mutant is detected on both. With 16-wide heads the prefills and batches took
    proj.fused, the epilogue only one-token tails: the plain row did not host the mutant and the draft row missed it."""
    from specbench.check.budget import Budget
    from specbench.selftest.runner import PLAIN, format_mutation_table, run_selftest
    from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here

    if not kernels_runnable_here():
        pytest.skip(RERUN_REASON)
    budget = Budget("rope-store", 2, 6, False, False, False, "")
    # trees=False: no path mutant runs on the draft LM's tree row, and an interpreted tree row costs ~5 s
    rows = run_selftest(seeds=(ROPE_STORE_SEED,), methods=("draft",), faults=("rope-store-slot-shift",),
                        checks=("greedy",), budget=budget, engine_options=PRODUCTION_LIKE, trees=False, chunked=False,
                        constrained=False)
    table = format_mutation_table(rows, ("greedy",))
    assert [(r.method, r.inject) for r in rows] == [(PLAIN, None), (PLAIN, "rope-store-slot-shift"),
                                                     ("draft", None), ("draft", "rope-store-slot-shift")], table
    for row in rows:
        greedy = row.results[0]
        assert "proj.rope_store" in greedy.paths and "proj.fused" not in greedy.paths, (row.inject, greedy.paths)
        assert row.detected == (row.inject is not None), table
    draft_rounds = next(r for r in rows if r.method == "draft" and r.inject is None).results[0]
    assert "spec.sync_round" in draft_rounds.paths and "verify.triton" in draft_rounds.paths

"""Issue 15 item 2: the EAGLE oracle recomputes the target features from the committed tokens.

`feature-rows-off-by-one` hands the catch-up the verify rows one position late. Replaying the features the
proposer was handed (the old oracle) reproduces every draft exactly, and the greedy, sampled and invariant checks
see exact output and consistent metadata; the oracle that recomputes the features with a cache-free target
forward flags it.
"""

from __future__ import annotations

import pytest
import torch

from specbench.check.battery import run_checks
from specbench.check.eagle_oracle import compare_eagle_records, recompute_eagle_logits
from specbench.check.greedy import greedy_params
from specbench.check.oracle import FP32_RTOL
from specbench.check.setup import build_llm, prompt_list
from specbench.selftest.runner import selftest_setups
from specbench.speculation.draft_records import DraftRecorder, group_rounds

FAULT = "feature-rows-off-by-one"


def _trusting_mismatches(proposer, handed: dict[str, torch.Tensor], steps) -> list[str]:
    """The old oracle: the head recomputed on the features the engine handed the proposer, taken on trust."""
    bad = []
    for recs in group_rounds(steps):
        longest = max(recs, key=lambda r: r.step)
        ref = recompute_eagle_logits(proposer, longest.token_ids, longest.step + 1, handed[longest.request_id])
        bad += [r for r in recs if not torch.allclose(r.logits, ref[r.step], rtol=0, atol=FP32_RTOL * 10)]
    return bad


def _run(setup, monkeypatch):
    llm = build_llm(setup)
    proposer = llm.engine.proposer
    handed: dict[str, torch.Tensor] = {}  # request -> features by position, as handed over (a restart truncates)
    add = proposer.add_target_features

    def recording_add(request_id, start, features):
        kept = handed.get(request_id, features[:0].float().cpu())[:start]
        handed[request_id] = torch.cat([kept, features.float().cpu()])
        add(request_id, start, features)

    monkeypatch.setattr(proposer, "add_target_features", recording_add)
    recorder = DraftRecorder()
    proposer.attach_recorder(recorder)
    llm.generate(prompt_list(setup), greedy_params(setup))
    return llm, handed, recorder.steps


def test_wrong_feature_rows_pass_the_trusting_oracle_and_fail_the_recomputing_one(tmp_path, monkeypatch):
    setup = selftest_setups(str(tmp_path), 0, ("eagle3",), 3)["eagle3"]
    for inject in (None, FAULT):
        llm, handed, steps = _run(setup.with_inject(inject), monkeypatch)
        assert len(steps) > 50
        assert _trusting_mismatches(llm.engine.proposer, handed, steps) == [], inject
        num, bad = compare_eagle_records(llm.engine.proposer, llm.engine.runner.model, steps, FP32_RTOL)
        assert num == len(steps)
        if inject is None:
            assert bad == []
        else:
            assert len(bad) > num // 2, bad[:3]


@pytest.mark.slow
def test_wrong_feature_rows_only_the_oracle_sees(tmp_path):
    setup = selftest_setups(str(tmp_path), 0, ("eagle3",), 3)["eagle3"].with_inject(FAULT)
    results = {r.name: r for r in run_checks(setup, ("greedy", "invariants", "oracle"))}
    assert results["greedy"].passed and results["invariants"].passed, results
    assert not results["oracle"].passed, results["oracle"].detail

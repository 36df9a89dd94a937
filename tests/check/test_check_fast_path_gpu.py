"""Issue 25 items 1 and 4 on CUDA, where whole-round graphs and rounds drafted ahead run in production: the oracle
records those rounds (it no longer forces eager drafting), and the invariant sweep's engines compare every round
drafted ahead with the host's reference build (debug invariants as an engine value, not an environment variable).
The CPU counterparts (interpreted round graphs) are in tests/eagle/test_eagle_cuda_graphs.py."""

from __future__ import annotations

import pytest
import torch

from specbench.check.greedy import greedy_params
from specbench.check.invariant_sweep import check_invariants
from specbench.check.oracle import FP32_RTOL, record_and_compare
from specbench.check.reference import build_reference_drafting_llm
from specbench.check.setup import build_llm, prompt_list
from specbench.selftest.runner import selftest_setups

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.fixture(scope="module")
def eagle3_cuda_setup(tmp_path_factory):
    return selftest_setups(str(tmp_path_factory.mktemp("fast_path")), 0, ("eagle3",), 3, device="cuda")["eagle3"]


def test_gpu_oracle_checks_graphed_and_drafted_ahead_rounds(eagle3_cuda_setup):
    llm = build_llm(eagle3_cuda_setup)
    reference = build_reference_drafting_llm(eagle3_cuda_setup.engine)
    num, bad = record_and_compare(llm, reference, prompt_list(eagle3_cuda_setup), greedy_params(eagle3_cuda_setup),
                                  FP32_RTOL)
    graphs = llm.engine.proposer.round_graphs[3]
    assert graphs.num_replays > 0 and graphs.num_ahead > 0  # the recorder left the fast path on
    assert num > 0 and not bad, bad[:3]


def test_gpu_invariant_sweep_compares_rounds_drafted_ahead(eagle3_cuda_setup, monkeypatch):
    from specbench.speculation.drafters.eagle import ahead

    monkeypatch.delenv("SPECBENCH_DEBUG_INVARIANTS", raising=False)
    compared = []
    check_round = ahead.check_ahead_round
    monkeypatch.setattr(ahead, "check_ahead_round", lambda *a: compared.append(1) or check_round(*a))
    result = check_invariants(eagle3_cuda_setup, full_sweep=False)
    assert result.passed, result.detail
    assert compared  # the device-vs-host comparison of rounds drafted ahead ran under the sweep

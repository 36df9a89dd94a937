"""specbench/perf/moe_set_timing.py on the tiny Qwen3-MoE model under the interpreter, graph timing stubbed (each
timed function runs once per layer): both sets and every down + combine candidate run, and the row adds up."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

import torch  # noqa: E402

from specbench import LLM  # noqa: E402
from specbench.perf import graph_timing  # noqa: E402
from specbench.perf.moe_set_timing import GROUPED_DOWN_CANDIDATES, time_expert_sets  # noqa: E402


DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.slow
@pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)
def test_expert_rows_run_every_candidate(monkeypatch):
    calls = []

    def fake_graphed_ms(fn, num_calls):
        for i in range(num_calls):
            fn(i)
        calls.append(num_calls)
        return 0.001 * len(calls)  # later calls "slower": the first candidate wins

    monkeypatch.setattr(graph_timing, "graphed_ms", fake_graphed_ms)
    llm = LLM("tiny-qwen3-moe", load_format="dummy", dtype="fp32", device=DEVICE, num_kv_blocks=16)
    model = llm.engine.runner.model
    row = time_expert_sets(model, 4)
    assert len(calls) == len(GROUPED_DOWN_CANDIDATES) + 1 and set(calls) == {1}  # one MoE layer
    k, num_experts = model.config.moe.num_experts_per_tok, model.config.moe.num_experts
    assert k <= row.mean_active_experts <= min(num_experts, 4 * k) and row.gb_per_layer > 0
    assert row.best_down == "2x1" and row.grouped_us == row.best_grouped_us == 1.0
    assert row.gemv_us == 1e3 * 0.001 * len(calls)

"""Check: the metrics a sweep reports for the engine's run equal a second, independent computation from the raw
records. The engine runs the setup's prompts greedily; the production metric code (metrics/request_metrics.py,
cell_metrics.py) turns its RequestStats into a cell row; metrics/recompute.py, written from the definitions alone,
recomputes acceptance length, acceptance rate, per-position acceptance, TTFT, TPOT and ITL from the raw per-request
records (emission times and sizes, the engine's output tokens, the acceptance counters) and cross-checks the counters
against the per-step records and the tokens each emission carried. Any disagreement or broken invariant fails."""

from __future__ import annotations

import time
from typing import Any

from specbench.check.greedy import greedy_params
from specbench.check.result import CheckResult
from specbench.check.setup import CheckSetup, build_llm, prompt_list
from specbench.check.tree_counts import tree_count_violations
from specbench.engine.outputs import RequestOutput
from specbench.engine.stats import StepStats
from specbench.metrics.cell_metrics import CellMetrics
from specbench.metrics.recompute import consistency_columns, step_total_violations
from specbench.metrics.request_metrics import RequestMetrics


def raw_request_row(index: int, out: RequestOutput) -> dict[str, Any]:
    """The raw fields recompute.py reads; the output token count is the engine's output, not its statistics."""
    s = out.stats
    return {"request_index": index, "error": None, "arrival_time": s.arrival_time,
            "emission_times": list(s.emission_times), "tokens_per_emission": list(s.tokens_per_emission),
            "num_output_tokens": len(out.output_token_ids), "num_draft_rounds": s.num_draft_rounds,
            "num_draft_tokens": s.num_draft_tokens, "num_accepted_tokens": s.num_accepted_tokens,
            "num_accepted_per_pos": list(s.num_accepted_per_pos)}


def raw_step_row(step: StepStats) -> dict[str, Any]:
    return {"step": step.step, "num_draft_tokens": step.num_draft_tokens,
            "num_accepted_tokens": step.num_accepted_tokens}


def metrics_problems(outs: list[RequestOutput], steps: list[StepStats], num_steps: int) -> tuple[str, ...]:
    """What disagrees between the production cell row of `outs` and the recomputation ((): nothing)."""
    cell = {**CellMetrics.of([RequestMetrics.from_stats(o.stats) for o in outs]).to_row(num_steps),
            "acceptance_source": "engine"}
    requests = [raw_request_row(i, o) for i, o in enumerate(outs)]
    step_rows = [raw_step_row(s) for s in steps]
    columns = consistency_columns(cell, requests, num_steps, step_rows)
    problems = [columns["metrics_mismatch"]] if columns["is_metrics_consistent"] is False else []
    return tuple(problems) + step_total_violations(requests, step_rows) + tree_count_violations(outs)


def check_metrics(setup: CheckSetup) -> CheckResult:
    start = time.perf_counter()
    llm = build_llm(setup)
    outs = llm.generate(prompt_list(setup), greedy_params(setup))
    k = setup.engine.max_num_steps
    problems = metrics_problems(outs, llm.engine.step_stats, k)
    num_rounds = sum(o.stats.num_draft_rounds for o in outs)
    detail = (f"{len(outs)} requests, {num_rounds} draft rounds, {len(llm.engine.step_stats)} steps: acceptance "
              f"length, rate, per position, TTFT, TPOT, ITL recomputed from the raw records (metrics/recompute.py) "
              f"and the acceptance counters cross-checked with the step totals and the emission sizes"
              + ("; tree counts (lengths, sizes, per depth / rank) against the raw records (check/tree_counts.py)"
                 if setup.draft_shape.is_tree else ""))
    if problems:
        detail += "; MISMATCH: " + "; ".join(problems)
    return CheckResult("metrics", not problems, detail, time.perf_counter() - start)

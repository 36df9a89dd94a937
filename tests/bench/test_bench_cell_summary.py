"""Cell rows on hand-built request rows: speedup, accuracy, answer agreement, categories, the summary table."""

from __future__ import annotations

import pytest

from specbench.bench.cell_summary import category_rows, cell_row
from specbench.bench.summary_table import format_categories, format_summary
from specbench.runs.records import cell_metrics_from_rows
from specbench.runs.schema import columns

KEYS = {"run_id": "r", "cell_id": "x", "repeat": 0, "concurrency": 1, "temperature": 0.0, "num_steps": 2,
        "eagle_topk": 1, "draft_token_budget": None,
        "method": "ngram", "workload": "gsm8k", "workload_version": "1", "label": None}


def _request(sample_id: str, arrival: float, emissions: list[float], tokens: list[int], text: str,
             answer: str | None, gold: str = "18", category: str = "gsm8k", accepted: list[int] = ()) -> dict:
    rounds = len(accepted)
    return {
        "sample_id": sample_id, "turn": 0, "category": category, "output_text": text,
        "arrival_time": arrival, "first_scheduled_time": arrival, "num_prompt_tokens": 10,
        "emission_times": emissions, "tokens_per_emission": tokens, "num_preemptions": 0,
        "num_draft_rounds": rounds, "num_draft_tokens": 2 * rounds, "num_accepted_tokens": sum(accepted),
        "num_drafted_per_pos": [rounds, rounds], "num_accepted_per_pos": [sum(a >= 1 for a in accepted),
                                                                          sum(a >= 2 for a in accepted)],
        "accepted_per_round": list(accepted),
        "gold_answer": None if answer is None else gold, "strict_answer": answer, "flexible_answer": answer,
        "strict_normalized": answer, "flexible_normalized": answer,
        "is_strict_match": None if answer is None else answer == gold,
        "is_flexible_match": None if answer is None else answer == gold,
    }


def test_cell_row_compares_with_the_baseline():
    # Baseline: 2 requests, 6 tokens over [0, 2] s -> 3 tok/s. Speculative: the same 6 tokens over [0, 1] s.
    baseline = [_request("0", 0.0, [0.5, 1.0, 1.5], [1, 1, 1], "a #### 18", "18"),
                _request("1", 0.0, [1.0, 1.5, 2.0], [1, 1, 1], "b #### 7", "7")]
    spec = [_request("0", 0.0, [0.5, 1.0], [1, 2], "a #### 18", "18", accepted=[1]),
            _request("1", 0.0, [0.5, 1.0], [1, 2], "c #### 8", "8", accepted=[1]),
            _request("2", 0.0, [0.25], [1], "unpaired", "5", gold="5")]
    metrics = cell_metrics_from_rows(spec)
    row = cell_row(KEYS, {}, metrics, spec, "base", baseline, num_positions=2)
    assert row["speedup"] == pytest.approx((7 / 1.0) / (6 / 2.0))
    assert row["baseline_cell_id"] == "base"
    assert row["accuracy_n"] == 3
    assert row["accuracy_strict"] == pytest.approx(2 / 3)  # "18" and "5" match their golds, "8" does not
    assert row["agreement_num_pairs"] == 2  # sample 2 has no baseline request
    assert row["agreement_strict"] == pytest.approx(0.5) and row["agreement_text"] == pytest.approx(0.5)
    assert row["acceptance_length"] == pytest.approx(2.0) and row["accept_rate_pos_1"] == pytest.approx(1.0)
    no_baseline = cell_row(KEYS, {}, metrics, spec, "base", None, num_positions=2)
    assert no_baseline["speedup"] is None and no_baseline["baseline_cell_id"] is None
    assert no_baseline["agreement_num_pairs"] == 0 and no_baseline["agreement_text"] is None


def test_category_rows_follow_the_schema():
    rows = [_request("0", 0.0, [0.5, 1.0], [1, 3], "x", None, category="writing", accepted=[2]),
            _request("1", 0.0, [0.5, 1.0], [1, 1], "y", None, category="math", accepted=[0]),
            _request("2", 0.0, [0.5, 0.7], [1, 2], "z", None, category="writing", accepted=[1])]
    out = category_rows(KEYS, rows, num_positions=2)
    assert [r["category"] for r in out] == ["writing", "math"]
    assert list(out[0]) == [name for name, _, _ in columns("categories", 2)]
    assert out[0]["acceptance_length"] == pytest.approx(1 + 3 / 2) and out[1]["acceptance_rate"] == 0.0
    table = format_categories([{**r, "num_steps": 2} for r in out], width=200)
    assert "writing" in table and "2.50 / 75%" in table


def test_summary_table_has_a_column_per_grid_point_and_wraps():
    def cell(concurrency, k, throughput):
        return {**KEYS, "concurrency": concurrency, "num_steps": k, "output_throughput": throughput,
                "accuracy_n": 4, "accuracy_strict": 0.5, "accuracy_strict_stderr": 0.25,
                "accept_rate_pos_1": 0.5 if k else None, "accept_rate_pos_2": 0.25 if k else None}

    cells = [cell(1, 0, 10.0), cell(1, 2, 15.0), cell(4, 0, 30.0), cell(4, 2, 40.0), cell(4, 2, 50.0)]
    text = format_summary(cells, width=200)
    assert "temperature 0" in text and "c=4 k=2" in text
    assert "45.00" in text  # mean of the two repeats of c=4 k=2
    assert "50 25" in text  # per-position acceptance in percent
    assert "0.500 [0.150, 0.850]" in text  # the 95% Wilson interval over one repeat's 4 prompts, not ± stderr
    narrow = format_summary(cells, width=60)
    assert narrow.count("Output throughput") >= 2  # columns that do not fit continue below

"""At the workload's default temperatures (mt_bench) a cell mixes greedy and sampled requests: the report splits
acceptance and agreement with k = 0 by sampling mode and by category, with request counts and intervals, and says
that the summary's agreement rows pool both."""

from __future__ import annotations

import math

from specbench.bench.sampling_split import (GREEDY, SAMPLED, format_group_summaries, group_summaries,
                                            mixed_sampling_note)

CATEGORIES = {"math": 0.0, "writing": 0.7}


def _requests() -> list[dict]:
    rows = []
    for k in (0, 2):
        for category, t in CATEGORIES.items():
            for i in range(4):
                # greedy: the same text at k = 2 as at k = 0; sampled: every other request differs
                text = f"{category}-{i}" + ("-other" if k and t > 0 and i % 2 else "")
                rows.append({"repeat": 0, "temperature": math.nan, "concurrency": 1, "num_steps": k,
                             "eagle_topk": 1, "draft_token_budget": None, "sample_id": f"{category}{i}", "turn": 0,
                             "category": category, "request_temperature": t, "output_text": text, "error": None,
                             "num_draft_rounds": 10 if k else 0, "num_accepted_tokens": (8 + i) if k else 0})
    return rows


def test_greedy_and_sampled_requests_are_split_with_counts_and_intervals():
    groups = {g.group: g for g in group_summaries(_requests())}
    assert list(groups) == [GREEDY, SAMPLED, "math", "writing"]
    greedy, sampled = groups[GREEDY], groups[SAMPLED]
    assert (greedy.num_requests, greedy.num_pairs, greedy.same_text, greedy.temperatures) == (4, 4, 1.0, "0")
    assert (sampled.num_requests, sampled.same_text, sampled.temperatures) == (4, 0.5, "0.7")
    low, high = sampled.same_text_interval
    assert 0 < low < 0.5 < high < 1  # Wilson: inside [0, 1]
    assert math.isclose(greedy.acceptance_length, 1 + (8 + 9 + 10 + 11) / 40)
    assert greedy.acceptance_interval[0] >= 1 and greedy.acceptance_interval[1] > greedy.acceptance_length
    assert groups["math"].same_text == 1.0 and groups["writing"].num_requests == 4
    table = format_group_summaries(list(groups.values()))
    assert all(len(line) <= 120 for line in table.splitlines()), table
    assert "greedy (t=0)" in table and "1.00 [0.51, 1.00] (4 pairs)" in table, table
    note = mixed_sampling_note(list(groups.values()))
    assert "4 greedy, 4 sampled at t=0.7" in note and "pool both" in note


def test_a_greedy_only_single_category_grid_adds_nothing():
    rows = [r for r in _requests() if r["category"] == "math"]
    assert group_summaries(rows) == [] and format_group_summaries([]) == "" and mixed_sampling_note([]) == ""

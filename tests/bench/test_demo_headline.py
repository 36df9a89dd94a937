"""The demo leads with agreement with k = 0 and, where the model scores ~0 on GSM8K (the 135M default does), says
why its accuracy tells nothing about speculation."""

from __future__ import annotations

import pandas as pd

from specbench.bench.demo import demo_headline
from tests.support.compare_fixtures import RunSpec, write_run


def _cells(tmp_path, name: str, is_correct) -> list[dict]:
    run_dir = write_run(tmp_path, name, RunSpec(name, num_requests=6, concurrencies=(1, 4), num_steps=(0, 3),
                                                is_correct=is_correct))
    return pd.read_parquet(run_dir / "cells.parquet").to_dict("records")


def test_a_model_scoring_zero_leads_with_agreement_and_says_why(tmp_path):
    lines = demo_headline(_cells(tmp_path, "zero", lambda i: False))
    assert lines[0].startswith("same text as k=0 (greedy"), lines
    assert "c=1 k=3 " in lines[0] and "c=4 k=3 " in lines[0] and "/6" in lines[0], lines
    assert lines[1].startswith("GSM8K accuracy at k=0: 0% of 6 questions: this model cannot solve GSM8K"), lines


def test_a_model_that_scores_keeps_its_accuracy_line_plain(tmp_path):
    lines = demo_headline(_cells(tmp_path, "some", lambda i: i % 2 == 0))
    assert lines[0].startswith("same text as k=0") and lines[1].startswith("GSM8K accuracy at k=0: 50% of 6")
    assert "cannot solve" not in lines[1]

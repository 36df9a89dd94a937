"""A cell is a baseline only if it did not draft; a drafting server's k=0 cell is labelled from what it reports,
or says it cannot tell; cell-level acceptance (per-cell /metrics deltas) gives an interval only across repeats."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specbench.backends.server_info import ServerSpeculation, speculation_of
from specbench.bench.server_acceptance import drafting_label
from specbench.compare.cell_level import cell_level_estimate
from specbench.runs.cell_acceptance import cell_value
from specbench.runs.drafting import did_draft, is_baseline_cell


@pytest.mark.parametrize(("cell", "drafted"), [
    ({"num_steps": 0, "num_draft_rounds": 0, "num_draft_tokens": 0}, False),
    ({"num_steps": 0, "num_draft_rounds": None, "num_draft_tokens": None}, False),  # no acceptance source
    ({"num_steps": 0, "num_draft_rounds": math.nan, "num_draft_tokens": math.nan}, False),
    ({"num_steps": 0, "num_draft_rounds": 7, "num_draft_tokens": 21}, True),
    ({"num_steps": 0, "num_draft_rounds": None, "num_draft_tokens": 4}, True),  # llama.cpp: tokens, no rounds
    ({"num_steps": 0, "num_draft_rounds": 9, "num_draft_tokens": None}, True),  # SGLang: verify rounds only
    ({"num_steps": 0, "num_draft_rounds": 9, "num_draft_tokens": 0}, False),  # rounds of nothing drafted
])
def test_a_k0_cell_is_a_baseline_only_if_it_did_not_draft(cell, drafted):
    assert did_draft(cell) is drafted
    assert is_baseline_cell(cell) is not drafted
    assert not is_baseline_cell({**cell, "num_steps": 3})


def test_a_drafting_server_is_labelled_from_what_it_reports_else_unknown():
    told = drafting_label("none", ServerSpeculation("ngram", 3, "/version"), None)
    assert (told.method, told.num_steps) == ("ngram", 3) and "from /version" in told.note
    from_labels = drafting_label("none", None, [5.0, 2.0, 1.0, 0.0])  # vLLM: positions 0..k-1 exported
    assert (from_labels.method, from_labels.num_steps) == ("unknown", 4)
    assert "method: unknown (server drafts)" in from_labels.note and "position labels" in from_labels.note
    blind = drafting_label("none", None, None)  # SGLang: verify rounds only, no config endpoint
    assert (blind.method, blind.num_steps) == ("unknown", 0)
    assert "method: unknown (server drafts), k: unknown" in blind.note and "no baseline" in blind.note
    configured = drafting_label("eagle", ServerSpeculation("ngram", None, "/props"), None)
    assert configured.method == "eagle"  # what the user said wins over the server's word


def test_server_speculation_from_version_and_llamacpp_props():
    assert speculation_of({"server": "specbench", "speculative": {"method": "draft", "num_steps": 2}}, None) == \
        ServerSpeculation("draft", 2, "/version")
    props = {"default_generation_settings": {"params": {"speculative.n_max": 16, "speculative.types": "none"}}}
    assert speculation_of({"version": "0.1"}, props) == ServerSpeculation(None, 16, "/props")
    assert speculation_of({"version": "0.1"}, {"build_info": "b1"}) is None
    assert speculation_of({"speculative": {"method": 3, "num_steps": True}}, None) == \
        ServerSpeculation(None, None, "/version")  # malformed fields read as "does not say"


def test_cell_level_acceptance_has_an_interval_only_across_repeats():
    rng = np.random.default_rng(0)
    one = cell_level_estimate([1.9], num_requests=40, num_resamples=200, rng=rng)
    assert one.point == pytest.approx(1.9) and one.replicates is None and one.num_repeats == 1
    none = cell_level_estimate([math.nan, math.nan], num_requests=10, num_resamples=200, rng=rng)
    assert none.point is None and none.replicates is None
    three = cell_level_estimate([1.8, 2.0, 2.2], num_requests=30, num_resamples=200, rng=rng)
    assert three.point == pytest.approx(2.0) and three.replicates.shape == (200,)
    assert three.replicates.min() >= 1.8 and three.replicates.max() <= 2.2 and three.replicates.std() > 0


def test_cell_value_reads_positions_past_the_columns_from_the_server_counters():
    cell = {"acceptance_length": 1.5, "accept_rate_pos_1": None, "num_draft_rounds": 10,
            "server_accepted_per_pos": np.array([6.0, 3.0])}
    assert cell_value(cell, "acceptance_length") == 1.5
    assert cell_value(cell, "accept_rate_pos_1") == pytest.approx(0.6)
    assert cell_value(cell, "accept_rate_pos_2") == pytest.approx(0.3)
    assert math.isnan(cell_value(cell, "accept_rate_pos_3"))
    assert math.isnan(cell_value({**cell, "num_draft_rounds": 0}, "accept_rate_pos_2"))


def _requests(**draft_columns):
    import pandas as pd

    base = {"num_steps": [3, 3, 3], "temperature": [0.0, 0.0, 0.0], "category": ["math", "math", "code"],
            "num_accepted_per_pos": [None, None, None]}
    return pd.DataFrame({**base, **draft_columns})


def test_acceptance_by_category_reads_per_request_counts_from_response_bodies():
    """HTTP rows with per-request counts (vLLM's metrics.speculative_decoding: rounds too) give AL and rate per
    category; llama.cpp's timings (no rounds) the rate only; /metrics-only rows (no counts) NaN, not zero."""
    from types import SimpleNamespace

    from specbench.compare.drilldown import acceptance_by_category

    vllm = _requests(num_draft_rounds=[4, 6, 5], num_draft_tokens=[12, 18, 15], num_accepted_tokens=[4, 8, 10])
    table = acceptance_by_category(SimpleNamespace(requests=vllm)).set_index("category")
    assert table.loc["math", "acceptance_length"] == pytest.approx(1 + 12 / 10)
    assert table.loc["code", "acceptance_rate"] == pytest.approx(10 / 15)
    llamacpp = _requests(num_draft_rounds=[None] * 3, num_draft_tokens=[12, 18, 15], num_accepted_tokens=[4, 8, 10])
    table = acceptance_by_category(SimpleNamespace(requests=llamacpp)).set_index("category")
    assert table.loc["math", "acceptance_rate"] == pytest.approx(12 / 30)
    assert math.isnan(table.loc["math", "acceptance_length"]) and math.isnan(table.loc["math", "p_1"])
    metrics_only = _requests(num_draft_rounds=[None] * 3, num_draft_tokens=[None] * 3, num_accepted_tokens=[None] * 3)
    table = acceptance_by_category(SimpleNamespace(requests=metrics_only))
    assert table["acceptance_length"].isna().all() and table["acceptance_rate"].isna().all()

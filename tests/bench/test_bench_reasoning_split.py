"""--reasoning-parser think: inline reasoning is split from the answer; GSM8K scores the answer, later turns send
the answer back, and reasoning a server already streamed apart is left alone."""

from __future__ import annotations

import dataclasses

import pytest

from specbench.backends.reasoning import split_think
from specbench.bench.reasoning_split import answer_text, split_reasoning
from specbench.bench.validate import validate_config
from specbench.engine.outputs import RequestOutput
from specbench.engine.stats import RequestStats
from specbench.errors import SpecbenchError
from specbench.runs.finished_turn import FinishedTurn
from specbench.runs.records import request_row
from specbench.runs.sweep_config import SweepConfig
from specbench.runs.turns import Turn
from specbench.sampling_params import SamplingParams
from specbench.workloads.base import Prompt, Sample
from specbench.workloads.gsm8k import Gsm8kWorkload

TEXT = "<think>Maybe #### 5? No, 18.</think>\n\nSo #### 18"


def _item(text: str, reasoning: str | None = None) -> FinishedTurn:
    sample = Sample(sample_id="0", category="gsm8k", turns=("q",), reference_answer="16 - 7 = 9\n#### 18")
    turn = Turn(sample, 0, Prompt(text="q"), (1, 2), SamplingParams(max_tokens=32), None)
    stats = RequestStats(arrival_time=0.0, num_prompt_tokens=2, emission_times=[0.1, 0.2], tokens_per_emission=[1, 9])
    return FinishedTurn(turn, RequestOutput("r", "q", (1, 2), (), text, "stop", stats), 0, reasoning_text=reasoning)


def test_split_think_forms():
    assert split_think(TEXT) == ("Maybe #### 5? No, 18.", "So #### 18")
    assert split_think("thinking without an opening tag</think>answer") == ("thinking without an opening tag", "answer")
    assert split_think("  <think>cut at max_tokens") == ("cut at max_tokens", "")
    assert split_think("plain answer #### 3") == (None, "plain answer #### 3")
    assert answer_text(TEXT, "think") == "So #### 18" and answer_text(TEXT, None) == TEXT


def test_the_answer_is_scored_and_the_reasoning_stored_apart():
    workload = Gsm8kWorkload(num_shots=0)
    whole = request_row({}, _item(TEXT), workload)
    assert whole["strict_answer"] == "5" and not whole["is_strict_match"]  # without a parser the reasoning misleads
    split = request_row({}, split_reasoning(_item(TEXT), "think"), workload)
    assert split["strict_answer"] == "18" and split["is_strict_match"]
    assert split["output_text"] == "So #### 18" and split["reasoning_text"] == "Maybe #### 5? No, 18."
    assert split["ttft_s"] == whole["ttft_s"] and split["num_output_tokens"] == 10  # reasoning tokens are output


def test_streamed_reasoning_is_left_alone_and_the_parser_is_validated():
    item = _item("#### 18", reasoning="streamed")
    assert split_reasoning(item, "think") is item and split_reasoning(_item(TEXT), None).output.text == TEXT
    no_tags = split_reasoning(_item("#### 18"), "think")
    assert no_tags.reasoning_text is None and no_tags.output.text == "#### 18"
    validate_config(SweepConfig(reasoning_parser="think"))
    with pytest.raises(SpecbenchError, match="--reasoning-parser must be one of think"):
        validate_config(SweepConfig(reasoning_parser="deepseek"))
    assert dataclasses.replace(SweepConfig(), reasoning_parser="think").to_dict()["reasoning_parser"] == "think"

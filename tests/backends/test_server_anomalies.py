"""A server's reports are sanity-checked, never believed blindly: against a fake server that lies in every way
known, each lie is a counted, summarised anomaly, the impossible ones a request error left out of the metrics;
the honest responses of the same server have none, and read one token per emission up to their last token."""

from __future__ import annotations

import asyncio
import itertools
import json

import pandas as pd
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.routing import Route
from typer.testing import CliRunner

from specbench.runs.anomalies import AnomalyKind
from tests.support.asgi_thread import serve_in_thread
from tests.support.tiny_models import data_dir, tiny_tokenizer_dir

MAX_TOKENS = 64
CLEAN = ("clean_eos_exact", "clean_eos_plain", "clean_length")
LIES = {  # behaviour: the anomaly kind it must raise
    "huge": AnomalyKind.ABSURD_COUNT,
    "negative": AnomalyKind.NEGATIVE_COUNT,
    "wordy": AnomalyKind.ABSURD_COUNT,
    "huge_prompt": AnomalyKind.ABSURD_COUNT,
    "over_max": AnomalyKind.OVER_MAX_TOKENS,
    "fewer": AnomalyKind.USAGE_MISMATCH,
    "down": AnomalyKind.USAGE_MISMATCH,
    "other_model": AnomalyKind.MODEL_MISMATCH,
    "draft_negative": AnomalyKind.NEGATIVE_COUNT,
    "draft_overaccepts": AnomalyKind.DRAFT_MISMATCH,
}
BEHAVIOURS = CLEAN + tuple(LIES)


def _event(body: dict, model: str = "fake") -> str:
    return f"data: {json.dumps({'id': 'x', 'object': 'text_completion', 'model': model, **body})}\n\n"


def _chunk(text: str, finish: str | None = None, cumulative: int | None = None, model: str = "fake") -> str:
    body: dict = {"choices": [{"index": 0, "text": text, "finish_reason": finish}]}
    if cumulative is not None:
        body["usage"] = {"prompt_tokens": 5, "completion_tokens": cumulative}
    return _event(body, model)


def _usage(completion_tokens: int, prompt_tokens: int = 5) -> str:
    return _event({"choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}})


def _events(behaviour: str) -> list[str]:
    """Each response's events; the clean ones end on a text-less finish event (the EOS token's step), or at length."""
    words = [" a", " b", " c"]
    if behaviour == "clean_eos_exact":  # vLLM / specbench serve: cumulative usage in every chunk
        return [_chunk(w, cumulative=i + 1) for i, w in enumerate(words)] + [_chunk("", "stop", 4), _usage(4)]
    if behaviour == "clean_eos_plain":  # llama.cpp: usage at the end only
        return [_chunk(w) for w in words] + [_chunk("", "stop"), _usage(4)]
    if behaviour == "clean_length":
        return [_chunk(w, cumulative=i + 1) for i, w in enumerate([*words, " d"])] + [_chunk("", "length", 4),
                                                                                       _usage(4)]
    if behaviour == "over_max":
        return [_chunk(" w") for _ in range(MAX_TOKENS + 2)] + [_chunk("", "length"), _usage(MAX_TOKENS + 2)]
    if behaviour == "wordy":
        return [_chunk(" a", "stop"), _usage(60)]  # 60 tokens (<= max_tokens) for 2 bytes of text
    if behaviour == "down":
        return [_chunk(w, cumulative=n) for w, n in zip(words, (1, 3, 2))] + [_chunk("", "stop"), _usage(3)]
    if behaviour == "huge_prompt":
        return [_chunk(w) for w in words] + [_chunk("", "stop"), _usage(4, prompt_tokens=10**9)]
    if behaviour in ("draft_negative", "draft_overaccepts"):  # vLLM's per-request counts, on the usage event
        drafted, accepted = (-3, 0) if behaviour == "draft_negative" else (2, 3)
        spec = {"num_spec_steps": 1, "num_draft_tokens": drafted, "num_accepted_draft_tokens": accepted}
        return [_chunk(w) for w in words] + [_chunk("", "stop"), _event({
            "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 4},
            "metrics": {"speculative_decoding": spec}})]
    if behaviour == "other_model":
        return [_chunk(w, model="impostor") for w in words] + [_chunk("", "stop", model="impostor"), _usage(4)]
    total = {"huge": 10**12, "negative": -5, "fewer": 2}[behaviour]
    return [_chunk(w) for w in words] + [_chunk("", "stop"), _usage(total)]


def fake_app(behaviours: tuple[str, ...], num_per_cell: int) -> Starlette:
    """Request i behaves as behaviours[i % len]. /metrics (vLLM names): during the first cell's requests the
    accepted-token counter goes down; afterwards the generated-token counter grows by one per request, less than
    the responses report."""
    counter = itertools.count()
    served = [0]

    async def completions(request: Request):
        behaviour = behaviours[next(counter) % len(behaviours)]
        served[0] += 1

        async def events():
            for event in _events(behaviour):
                yield event
                await asyncio.sleep(0)
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def models(request: Request):
        return JSONResponse({"data": [{"id": "fake"}]})

    async def metrics(request: Request):
        n = served[0]
        return PlainTextResponse(
            f"vllm:spec_decode_num_drafts_total {n}\nvllm:spec_decode_num_draft_tokens_total {2 * n}\n"
            f"vllm:spec_decode_num_accepted_tokens_total {50 - min(n, num_per_cell)}\n"
            f"vllm:generation_tokens_total {n}\n")

    return Starlette(routes=[Route("/v1/completions", completions, methods=["POST"]), Route("/v1/models", models),
                             Route("/metrics", metrics)])


def _sweep(url: str, results, run_id: str, *extra: str) -> str:
    from specbench.cli.app import app

    args = ["sweep", "--backend", "openai", "--base-url", url, "--workload", "gsm8k", "--shots", "0", "--data-dir",
            str(data_dir()), "--max-tokens", str(MAX_TOKENS), "--warmup", "0", "--results-dir", str(results),
            "--run-id", run_id, "--quiet", *extra]
    result = CliRunner().invoke(app, args, env={"HF_HUB_OFFLINE": "1"}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def lying_run(tmp_path_factory):
    results = tmp_path_factory.mktemp("anomalies")
    n = len(BEHAVIOURS)
    with serve_in_thread(fake_app(BEHAVIOURS, n)) as url:
        output = _sweep(url, results, "lies", "--limit", str(n), "--concurrency", "1,2")
    requests = pd.read_parquet(results / "lies" / "requests.parquet")
    cells = pd.read_parquet(results / "lies" / "cells.parquet").sort_values("concurrency")
    return requests, cells, output


def test_each_lie_is_a_counted_anomaly_and_the_impossible_ones_are_errors(lying_run):
    requests, cells, output = lying_run
    first = requests[requests["concurrency"] == 1].sort_values("request_index")
    rows = dict(zip(BEHAVIOURS, first.to_dict("records")))
    for behaviour, kind in LIES.items():
        row = rows[behaviour]
        assert [a.split(":")[0] for a in row["anomalies"]] == [kind.label], behaviour
        assert row["num_anomalies"] == 1
        if kind.is_fatal:
            assert row["error"] == row["anomalies"][0], behaviour
            assert row["num_output_tokens"] == len(row["output_text"].split())  # counted from the text alone
        else:
            assert pd.isna(row["error"]), behaviour
    assert rows["huge"]["error"] == f"absurd_count: {10**12} completion tokens for max_tokens {MAX_TOKENS} (+16)"
    assert rows["negative"]["error"] == "negative_count: usage.completion_tokens = -5"
    assert rows["wordy"]["error"] == "absurd_count: 60 completion tokens for 2 bytes of text"
    assert rows["other_model"]["anomalies"][0] == "model_mismatch: asked 'fake', the response names 'impostor'"
    assert rows["huge_prompt"]["error"].startswith(f"absurd_count: {10**9} prompt tokens for a prompt of at most ")
    assert rows["huge_prompt"]["num_prompt_tokens"] < 10**4  # the local estimate, not the report
    assert rows["draft_negative"]["error"] == "negative_count: vllm:metrics.speculative_decoding draft tokens = -3"
    assert pd.isna(rows["draft_negative"]["num_draft_tokens"])  # a false report is not stored as a count
    assert rows["draft_overaccepts"]["anomalies"][0] == (
        "draft_mismatch: vllm:metrics.speculative_decoding: 3 accepted of 2 drafted")
    for cell in cells.to_dict("records"):
        assert cell["num_errors"] == 5 and set(cell["error_summary"].split("; ")) == {"3 x absurd_count",
                                                                                     "2 x negative_count"}
        assert cell["num_requests"] == len(BEHAVIOURS) - 5  # the errors are left out of the metrics
        assert cell["total_throughput"] < 1e6
        assert cell["output_throughput"] < 1e6
    c1, c2 = cells.to_dict("records")
    backwards = f"counter_backwards: vllm num_accepted_tokens 50 -> {50 - len(BEHAVIOURS)}"
    assert list(c1["window_anomalies"]) == [backwards]
    generated, accepted = c2["window_anomalies"]  # the accepted-token counter stood still in the second cell
    assert generated.startswith(f"counter_mismatch: vllm counted {len(BEHAVIOURS)} generated tokens in the window, "
                                "the responses report ")
    assert accepted == "counter_mismatch: vllm counted 0 accepted tokens in the window, the responses report 3"
    for cell, num_window in ((c1, 1), (c2, 2)):
        assert cell["num_anomalies"] == len(LIES) + num_window
        summary = dict(reversed(part.split(" x ")) for part in cell["anomaly_summary"].split("; "))
        assert summary["absurd_count"] == "3" and summary["usage_mismatch"] == "2" and summary["model_mismatch"] == "1"
    assert f"cell {c1['cell_id']}: {len(LIES) + 1} anomalies in the server's reports" in output
    assert f"cell {c2['cell_id']}: {accepted}" in output
    assert backwards in output
    assert "Server anomalies" in output


def test_honest_responses_have_no_anomaly_and_end_at_their_last_token(lying_run):
    requests, cells, _ = lying_run
    clean = requests[requests["output_text"].isin([" a b c", " a b c d"]) & requests["anomalies"].map(len).eq(0)]
    assert len(clean) == 2 * len(CLEAN)  # every clean response in both cells, and no other
    for row in clean.to_dict("records"):
        assert list(row["tokens_per_emission"]) == [1, 1, 1, 1] and row["num_output_tokens"] == 4
        assert row["finish_time"] == row["emission_times"][-1]
        assert row["e2e_s"] == pytest.approx(row["finish_time"] - row["arrival_time"])
        assert row["tpot_s"] == pytest.approx((row["e2e_s"] - row["ttft_s"]) / 3)


def test_usage_that_the_local_tokenizer_contradicts_is_an_anomaly(tmp_path):
    behaviours = ("clean_eos_plain", "fewer", "huge")
    with serve_in_thread(fake_app(behaviours, 3)) as url:
        _sweep(url, tmp_path, "tok", "--limit", "3", "--concurrency", "1", "--tokenizer", str(tiny_tokenizer_dir()))
    rows = pd.read_parquet(tmp_path / "tok" / "requests.parquet").sort_values("request_index").to_dict("records")
    clean, fewer, huge = rows
    assert clean["num_anomalies"] == 0 and clean["token_count_source"] == "retokenized"
    assert list(clean["tokens_per_emission"])[-1] == 1  # the EOS token, on the finish event
    assert fewer["anomalies"][0] == "usage_mismatch: usage says 2 completion tokens for 3 chunks with text"
    assert huge["error"].startswith("absurd_count:") and sum(huge["tokens_per_emission"]) < 10


def test_checks_without_usage_and_under_ignore_eos():
    """No usage block: more text chunks than max_tokens is still seen. ignore_eos: text-less tokens are no lie."""
    from specbench.backends.anomalies import Asked, response_anomalies
    from specbench.backends.stream_state import StreamState

    def state(events: list[str]) -> StreamState:
        out = StreamState()
        for n, event in enumerate(events):
            out.add_event(event.removeprefix("data: ").strip(), float(n))
        return out

    chatty = state([_chunk(" w") for _ in range(5)] + [_chunk("", "length")])
    assert [str(a) for a in response_anomalies(chatty, Asked("fake", 4, 10, False))] == [
        "over_max_tokens: 5 chunks with text for max_tokens 4"]
    silent = state([_chunk(" a"), _chunk("", "length"), _usage(60)])  # 60 tokens for 2 bytes, ignore_eos asked
    assert response_anomalies(silent, Asked("fake", 64, 10, True)) == ()
    assert [a.kind for a in response_anomalies(silent, Asked("fake", 64, 10, False))] == [AnomalyKind.ABSURD_COUNT]
    assert response_anomalies(state(_events("clean_eos_exact")), Asked("fake", 64, 10, False)) == ()

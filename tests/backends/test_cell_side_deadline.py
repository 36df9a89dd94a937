"""A cell's side calls share one deadline: each honours its own, and together they stop at the cell's total; a call
that let its deadline pass is not made again in that cell. A /metrics that drips one byte at a time once held a
2-request sweep for 120 s (four scrapes a cell, each waiting out its whole deadline). Checked by counting calls, not
by timing them."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from starlette.applications import Starlette
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route
from typer.testing import CliRunner

from specbench.backends.deadline import CellBudget, DeadlineClient, DeadlinePassed, SideDeadlines
from tests.support.asgi_thread import serve_in_thread
from tests.support.ports import closed_port_url
from tests.support.tiny_models import data_dir


def _dripping_app(hits: list[str]) -> Starlette:
    async def completions(request):
        async def events():
            for text, finish in ((" a", None), ("", "stop")):
                body = {"id": "x", "object": "text_completion", "model": "fake",
                        "choices": [{"index": 0, "text": text, "finish_reason": finish}]}
                yield f"data: {json.dumps(body)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def models(request):
        return JSONResponse({"data": [{"id": "fake"}]})

    async def metrics(request):
        hits.append("/metrics")

        async def drip():  # one byte, then nothing more for longer than any deadline here
            yield b"#"
            await asyncio.sleep(60)

        return StreamingResponse(drip(), media_type="text/plain")

    return Starlette(routes=[Route("/v1/completions", completions, methods=["POST"]), Route("/v1/models", models),
                             Route("/metrics", metrics)])


def test_a_dripping_metrics_endpoint_is_scraped_once_a_cell(tmp_path):
    from specbench.cli.app import app

    hits: list[str] = []
    with serve_in_thread(_dripping_app(hits)) as url:
        args = ["sweep", "--backend", "openai", "--base-url", url, "--workload", "gsm8k", "--shots", "0",
                "--data-dir", str(data_dir()), "--max-tokens", "8", "--warmup", "0", "--results-dir", str(tmp_path),
                "--run-id", "drip", "--limit", "2", "--concurrency", "1,2", "--metrics-timeout", "0.3"]
        result = CliRunner().invoke(app, args, env={"HF_HUB_OFFLINE": "1"})
    assert result.exit_code == 0, result.output
    # one scrape reading the server's info, then one a cell (2 cells): not four a cell (two at each window end)
    assert len(hits) == 1 + 2, hits
    assert "could not scrape /metrics" in result.output


def test_a_cell_budget_stops_calls_once_spent():
    client = DeadlineClient(closed_port_url(), deadlines=SideDeadlines(1.0, 1.0, 1.0, cell_s=5.0))
    client.start_cell()
    client.budget.spent_s = 5.0  # as if the cell's earlier calls took it all
    with pytest.raises(DeadlinePassed, match=r"^GET /metrics: not asked: this cell's side calls used their 5 s$"):
        client.get("/metrics", 1.0)  # refused before any connection (a connection would fail otherwise)
    client.start_cell()
    client.budget.timed_out.add("GET /metrics")
    with pytest.raises(DeadlinePassed, match=r"^GET /metrics: not asked again in this cell"):
        client.get("/metrics", 1.0)
    client.start_cell()  # a new cell: asked again (and here refused by the closed port, not the budget)
    with pytest.raises(Exception, match="ConnectError"):
        client.get("/metrics", 1.0)
    assert client.budget.spent_s > 0 and CellBudget(1.0).refusal("GET /x") is None

"""What a server says about itself (/v1/models, /version) and its speculative counters (/metrics)."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from specbench.backends.credentials import redact
from specbench.backends.prometheus import parse_metrics
from specbench.backends.spec_counters import SpecCounters, read_spec_counters

INFO_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ServerInfo:
    models: tuple[str, ...]  # ids listed by /v1/models
    models_error: str | None  # why /v1/models could not be read
    version: dict | None  # /version's JSON (vLLM, specbench serve); None where absent


def read_server_info(client: httpx.Client, secret: str | None) -> ServerInfo:
    models: tuple[str, ...] = ()
    models_error = None
    try:
        response = client.get("/v1/models")
        response.raise_for_status()
        models = tuple(str(m["id"]) for m in response.json().get("data", []) if isinstance(m, dict) and "id" in m)
    except (httpx.HTTPError, ValueError, AttributeError) as err:
        models_error = redact(f"{type(err).__name__}: {err}", secret)
    version = None
    try:
        response = client.get("/version")
        if response.status_code == 200:
            data = response.json()
            version = data if isinstance(data, dict) else {"version": str(data)}
    except (httpx.HTTPError, ValueError):
        pass
    return ServerInfo(models, models_error, version)


def scrape_spec_counters(client: httpx.Client) -> tuple[SpecCounters | None, str | None]:
    """(counters, None), or (None, why not): no /metrics, or no speculative counters on it."""
    try:
        response = client.get("/metrics")
    except httpx.HTTPError as err:
        return None, f"could not scrape /metrics ({type(err).__name__})"
    if response.status_code != 200:
        return None, f"the server has no /metrics (http {response.status_code})"
    counters = read_spec_counters(parse_metrics(response.text))
    if counters is None:
        return None, "the server's /metrics exports no speculative-decoding counters"
    return counters, None

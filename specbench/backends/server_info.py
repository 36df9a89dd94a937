"""What a server says about itself (/v1/models, /version) and its speculative counters (/metrics)."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from specbench.backends.credentials import redact
from specbench.backends.prometheus import parse_metrics
from specbench.backends.server_adapters import ServerAdapter, ServerProbe
from specbench.backends.spec_counters import SpecCounters

INFO_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ServerInfo:
    models: tuple[str, ...]  # ids listed by /v1/models
    models_error: str | None  # why /v1/models could not be read
    version: dict | None  # /version's JSON (vLLM, specbench serve); None where absent
    probe: ServerProbe  # for choosing the server adapter


def read_server_info(client: httpx.Client, secret: str | None) -> ServerInfo:
    models: tuple[str, ...] = ()
    models_error = None
    try:
        response = client.get("/v1/models")
        response.raise_for_status()
        models = tuple(str(m["id"]) for m in response.json().get("data", []) if isinstance(m, dict) and "id" in m)
    except (httpx.HTTPError, ValueError, AttributeError) as err:
        models_error = redact(f"{type(err).__name__}: {err}", secret)
    version = _json_object(client, "/version")
    props = _json_object(client, "/props")
    try:
        response = client.get("/metrics")
        samples = tuple(parse_metrics(response.text)) if response.status_code == 200 else ()
    except httpx.HTTPError:
        samples = ()
    return ServerInfo(models, models_error, version, ServerProbe(samples, version, props))


def _json_object(client: httpx.Client, path: str) -> dict | None:
    try:
        response = client.get(path)
        if response.status_code == 200:
            data = response.json()
            return data if isinstance(data, dict) else {"value": data}
    except (httpx.HTTPError, ValueError):
        pass
    return None


def scrape_spec_counters(
    client: httpx.Client, adapter: ServerAdapter | None, no_adapter_note: str
) -> tuple[SpecCounters | None, str | None]:
    """(counters, None), or (None, why not): no /metrics, no known server, or no speculative counters on it."""
    try:
        response = client.get("/metrics")
    except httpx.HTTPError as err:
        return None, f"could not scrape /metrics ({type(err).__name__})"
    if response.status_code != 200:
        return None, f"the server has no /metrics (http {response.status_code})"
    if adapter is None:
        return None, no_adapter_note
    counters = adapter.read_counters(parse_metrics(response.text))
    if counters is None:
        return None, f"the server's /metrics exports no {adapter.name} speculative-decoding counters"
    return counters, None

"""What a server says about itself (/v1/models, /version, /props) and its speculative counters (/metrics).

Its speculative config, where it tells (read only to label a drafting server's cells, never to decide whether it
drafts: that is whether its counters move, runs/drafting.py):
- specbench serve: /version `speculative` = {"method", "num_steps"} (specbench/serve/app.py).
- llama.cpp server: /props `default_generation_settings.params` `speculative.n_max` (the longest draft; its
  `speculative.types` names the method in newer builds).
- vLLM, SGLang: no endpoint says it; k is then read from the /metrics per-position labels (server_acceptance.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from specbench.backends.credentials import redact
from specbench.backends.prometheus import parse_metrics
from specbench.backends.server_adapters import ServerAdapter, ServerProbe
from specbench.backends.spec_counters import SpecCounters

INFO_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ServerSpeculation:
    """A server's speculative config as it reports it; None fields: it does not say."""

    method: str | None
    num_steps: int | None
    source: str  # where it was read, e.g. "/version" or "/props"


@dataclass(frozen=True)
class ServerInfo:
    models: tuple[str, ...]  # ids listed by /v1/models
    models_error: str | None  # why /v1/models could not be read
    version: dict | None  # /version's JSON (vLLM, specbench serve); None where absent
    probe: ServerProbe  # for choosing the server adapter

    @property
    def speculation(self) -> ServerSpeculation | None:
        return speculation_of(self.probe.version, self.probe.props)


def speculation_of(version: dict | None, props: dict | None) -> ServerSpeculation | None:
    spec = (version or {}).get("speculative")
    if isinstance(spec, dict):
        return ServerSpeculation(_text(spec.get("method")), _int(spec.get("num_steps")), "/version")
    settings = (props or {}).get("default_generation_settings")
    params = settings.get("params", settings) if isinstance(settings, dict) else None
    if isinstance(params, dict) and "speculative.n_max" in params:
        types = _text(params.get("speculative.types"))
        return ServerSpeculation(types if types != "none" else None, _int(params["speculative.n_max"]), "/props")
    return None


def _text(value) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


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

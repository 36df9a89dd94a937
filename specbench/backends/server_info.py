"""What a server says about itself (/v1/models, /version, /props) and its speculative counters (/metrics).

Every call runs under its deadline (deadline.py); an answer of the wrong shape is one line naming the endpoint.

Its speculative config, where it tells (read only to label a drafting server's cells, never to decide whether it
drafts: that is whether its counters move, runs/drafting.py):
- specbench serve: /version `speculative` = {"method", "num_steps"} and `fault` (the injected fault's name, or null:
  a mutant server's runs record it as their `fault_injected`) (specbench/serve/app.py).
- llama.cpp server: /props `default_generation_settings.params` `speculative.n_max` (the longest draft; its
  `speculative.types` names the method in newer builds).
- vLLM, SGLang: no endpoint says it; k is then read from the /metrics per-position labels (server_acceptance.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, ValidationError

from specbench.backends.credentials import redact
from specbench.backends.deadline import MAX_METRICS_BYTES, DeadlineClient, DeadlinePassed, ServerAnswerError
from specbench.backends.prefix_cache import PrefixCacheReading, read_prefix_cache
from specbench.backends.prometheus import parse_metrics
from specbench.backends.server_adapters import ServerAdapter, ServerProbe
from specbench.backends.spec_counters import SpecCounters

MODELS_PATH = "/v1/models"


class _ModelCard(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str


class _ModelList(BaseModel):
    """OpenAI's list-models answer: {"data": [{"id": ...}, ...]} (other fields ignored)."""

    model_config = ConfigDict(extra="allow")
    data: list[_ModelCard]


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
    version: dict | None  # /version's JSON object (vLLM, specbench serve); None where absent or not an object
    probe: ServerProbe  # for choosing the server adapter

    @property
    def speculation(self) -> ServerSpeculation | None:
        return speculation_of(self.probe.version, self.probe.props)

    @property
    def is_hybrid(self) -> bool:
        """Whether the server says its target carries recurrent state (specbench serve's /version `hybrid`)."""
        return (self.version or {}).get("hybrid") is True

    @property
    def fault(self) -> str | None:
        """The fault a `specbench serve --inject` server runs with (its /version `fault`); None: a real engine, or
        a server that does not say."""
        return _text((self.version or {}).get("fault"))


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


def read_server_info(client: DeadlineClient, secret: str | None) -> ServerInfo:
    models: tuple[str, ...] = ()
    models_error = None
    try:
        models = read_models(client)
    except ServerAnswerError as err:
        models_error = redact(str(err), secret)
        if isinstance(err, DeadlinePassed):  # a stalling server: the optional probes would each wait as long
            return ServerInfo(models, models_error, None, ServerProbe((), None, None))
    version = _json_object(client, "/version")
    props = _json_object(client, "/props")
    try:
        response = client.get("/metrics", client.deadlines.metrics_s, MAX_METRICS_BYTES)
        samples = tuple(parse_metrics(response.text)) if response.status_code == 200 else ()
    except ServerAnswerError:
        samples = ()
    return ServerInfo(models, models_error, version, ServerProbe(samples, version, props))


def read_models(client: DeadlineClient) -> tuple[str, ...]:
    """The model ids /v1/models lists; raises ServerAnswerError (status, deadline, shape)."""
    response = client.get(MODELS_PATH, client.deadlines.info_s)
    response.raise_for_status()
    try:
        listing = _ModelList.model_validate(response.json())
    except ValidationError as err:
        raise ServerAnswerError(f"{response.call}: unexpected answer ({shape_error(err)})") from None
    return tuple(card.id for card in listing.data)


def shape_error(err: ValidationError) -> str:
    """The first problem of a pydantic error as one short phrase: "data.0.id: Field required"."""
    first = err.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "the answer"
    return f"{where}: {first['msg']}"


def _json_object(client: DeadlineClient, path: str) -> dict | None:
    """An optional probe: None when absent, failing or not a JSON object."""
    try:
        response = client.get(path, client.deadlines.info_s)
        data = response.json() if response.status_code == 200 else None
    except ServerAnswerError:
        return None
    return data if isinstance(data, dict) else None


def scrape_spec_counters(
    client: DeadlineClient, adapter: ServerAdapter | None, no_adapter_note: str
) -> tuple[SpecCounters | None, str | None]:
    """(counters, None), or (None, why not): no /metrics, no known server, or no speculative counters on it."""
    try:
        response = client.get("/metrics", client.deadlines.metrics_s, MAX_METRICS_BYTES)
    except ServerAnswerError as err:
        return None, f"could not scrape /metrics ({err})"
    if response.status_code != 200:
        return None, f"the server has no /metrics (http {response.status_code})"
    if adapter is None:
        return None, no_adapter_note
    counters = adapter.read_counters(parse_metrics(response.text))
    if counters is None:
        return None, f"the server's /metrics exports no {adapter.name} speculative-decoding counters"
    return counters, None


def scrape_prefix_cache(client: DeadlineClient) -> PrefixCacheReading | None:
    """The server's prefix-cache metrics (backends/prefix_cache.py); None without /metrics or without them."""
    try:
        response = client.get("/metrics", client.deadlines.metrics_s, MAX_METRICS_BYTES)
    except ServerAnswerError:
        return None
    return read_prefix_cache(parse_metrics(response.text)) if response.status_code == 200 else None

"""Server adapters: whose /metrics counters and response-body fields a server speaks, detected from /metrics
(metric namespace), /version or /props, or named with --server-adapter.

Names and fields, from each engine's source or docs (not memory):
- vllm: `vllm:spec_decode_*`, `vllm:generation_tokens` (docs.vllm.ai, "Metrics", v0.x V1 engine);
  per request `metrics.speculative_decoding` (see request_draft.py). /version answers {"version": ...}.
- sglang: `sglang:spec_verify_calls`, `sglang:generation_tokens` (docs.sglang.ai "Production metrics");
  per request `meta_info.spec_verify_ct`.
- llamacpp: `llamacpp:spec_decode_*` incl. `..._per_pos{position=}`, `llamacpp:tokens_predicted` (llama.cpp
  tools/server/server-task.cpp `to_metrics`, llama-cpp-python 0.3.36 vendored build); per request `timings.draft_n`
  / `draft_n_accepted`; GET /props answers with `build_info`.
- specbench: `specbench:spec_decode_*`, `specbench:generation_tokens` (specbench/serve/metrics.py); /version says
  {"server": "specbench"}.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from specbench.backends.prometheus import Sample
from specbench.backends.request_draft import llamacpp_draft, sglang_draft, vllm_draft
from specbench.backends.spec_counters import SpecCounters, has_namespace, read_sglang, read_vllm_style
from specbench.registry import Registry
from specbench.runs.request_draft import RequestDraft

AUTO = "auto"


@dataclass(frozen=True)
class ServerProbe:
    """What a server said about itself before a run."""

    samples: tuple[Sample, ...]  # one /metrics scrape; () without /metrics
    version: dict[str, Any] | None  # /version's JSON
    props: dict[str, Any] | None  # /props' JSON (llama.cpp)


@dataclass(frozen=True)
class ServerAdapter:
    name: str
    matches: Callable[[ServerProbe], bool]
    read_counters: Callable[[Sequence[Sample]], SpecCounters | None]
    request_draft: Callable[[dict[str, Any]], RequestDraft | None]  # from the response's final event


SERVER_ADAPTERS: Registry[ServerAdapter] = Registry("server adapter")


@SERVER_ADAPTERS.register("llamacpp")
def _llamacpp() -> ServerAdapter:
    return ServerAdapter(
        "llamacpp",
        lambda p: has_namespace(p.samples, "llamacpp") or (p.props is not None and "build_info" in p.props),
        lambda samples: read_vllm_style(samples, "llamacpp", "tokens_predicted"),
        llamacpp_draft,
    )


@SERVER_ADAPTERS.register("specbench")
def _specbench() -> ServerAdapter:
    return ServerAdapter(
        "specbench",
        lambda p: has_namespace(p.samples, "specbench") or (p.version or {}).get("server") == "specbench",
        lambda samples: read_vllm_style(samples, "specbench", "generation_tokens"),
        vllm_draft,
    )


@SERVER_ADAPTERS.register("sglang")
def _sglang() -> ServerAdapter:
    return ServerAdapter("sglang", lambda p: has_namespace(p.samples, "sglang"), read_sglang, sglang_draft)


@SERVER_ADAPTERS.register("vllm")
def _vllm() -> ServerAdapter:
    return ServerAdapter(
        "vllm",
        lambda p: has_namespace(p.samples, "vllm"),
        lambda samples: read_vllm_style(samples, "vllm", "generation_tokens"),
        vllm_draft,
    )


DETECTION_ORDER = ("llamacpp", "specbench", "sglang", "vllm")  # most specific marker first


def choose_adapter(name: str, probe: ServerProbe) -> tuple[ServerAdapter | None, str]:
    """(adapter, how it was chosen); (None, why) when auto-detection finds no known server."""
    if name != AUTO:
        return SERVER_ADAPTERS.create(name), f"--server-adapter {name}"
    for candidate in DETECTION_ORDER:
        adapter = SERVER_ADAPTERS.create(candidate)
        if adapter.matches(probe):
            return adapter, "detected"
    return None, "no known server: /metrics has no vllm:, sglang:, llamacpp: or specbench: metrics"

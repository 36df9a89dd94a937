"""The checks' independent reference: one engine configuration that shares no code with the fast path.

Every check compares the engine under test with something; that something must not run the code it judges.
The reference engine decodes one step at a time (synchronous loop, no overlap), eagerly (no CUDA graphs), with
the unfused torch layers, the torch attention backend and the torch verifier, and recomputes every prompt (no prefix
cache): a bug in the overlapped loop, a graph, a fused projection, a Triton kernel or the prefix cache cannot corrupt
it. The greedy check's reference tokens, the margins
of its divergences, the sampled check's target probabilities and the draft oracle's cache-free recomputations all
come from engines built here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from specbench.config import EngineConfig
from specbench.llm import LLM

# What makes an engine the reference, whatever the setup under test runs.
REFERENCE_SETTINGS = {
    "async_scheduling": False,  # one step at a time: the host reads every step before scheduling the next
    "enforce_eager": True,  # no CUDA graphs
    "fused_kernels": "off",  # the eager torch layers (no fused norms, RoPE, SiLU-and-mul or projections)
    "attention_backend": "torch",
    "verifier": "torch",
    "debug_invariants": False,  # the reference is not under test
    "synthetic_acceptance": None,
    "enable_chunked_prefill": False,  # whole-prompt prefill steps: the chunked rows' independent reference
    "enable_prefix_caching": False,  # every prompt computed from scratch: the cache's independent reference
}


def reference_engine(engine: EngineConfig) -> EngineConfig:
    """The plain-decoding reference of `engine`: its target, dtype, device and seed; method none."""
    return replace(engine, method="none", draft=None, max_num_steps=0, **REFERENCE_SETTINGS)


def reference_drafting_engine(engine: EngineConfig) -> EngineConfig:
    """`engine`'s method and draft under the reference settings: its models (target, draft LM or EAGLE head) are
    the cache-free recomputations' models; it is never asked to generate."""
    return replace(engine, **REFERENCE_SETTINGS)


def build_reference_llm(engine: EngineConfig) -> LLM:
    return LLM(reference_engine(engine))


def build_reference_drafting_llm(engine: EngineConfig) -> LLM:
    return LLM(reference_drafting_engine(engine))


@dataclass(frozen=True)
class ReferenceCrossCheck:
    """The reference engine itself checked against an implementation outside specbench (HF transformers, where a
    tiny model allows): a bug in the eager layers both engines share shows here, not as a silent agreement."""

    is_agreed: bool
    detail: str  # one clause for the greedy check's detail line

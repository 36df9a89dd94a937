"""Per-request speculative counts that servers put in their response bodies (the final streamed event).

Formats (from each server's source/docs):
- llama.cpp server (vendored in llama-cpp-python 0.3.36, tools/server/server-common.cpp `server_slot_stats`):
  `timings.draft_n` (draft tokens proposed) and `timings.draft_n_accepted`, present only when n_draft > 0; no
  round count per request.
- vLLM (docs.vllm.ai v0.32.0 "Per-Request Acceptance Metrics", server flag --per-request-spec-decode-metrics
  summary|detailed): `metrics.speculative_decoding` with `num_spec_steps`, `num_draft_tokens`,
  `num_accepted_draft_tokens` and, when detailed, `acceptance_histogram` ([k + 1] steps accepting j drafts).
- SGLang (python/sglang/srt/managers/tokenizer_manager.py): `meta_info.spec_verify_ct` (verify rounds) on the
  finished request; no accepted count, so no acceptance is derived from it.
"""

from __future__ import annotations

from typing import Any

from specbench.runs.request_draft import LLAMACPP_TIMINGS, SGLANG_META, VLLM_METRICS, RequestDraft


def llamacpp_draft(event: dict[str, Any]) -> RequestDraft | None:
    timings = event.get("timings")
    if not isinstance(timings, dict) or not _is_int(timings.get("draft_n")):
        return None
    accepted = timings.get("draft_n_accepted")
    return RequestDraft(LLAMACPP_TIMINGS, None, timings["draft_n"], accepted if _is_int(accepted) else None, ())


def vllm_draft(event: dict[str, Any]) -> RequestDraft | None:
    metrics = event.get("metrics")
    spec = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    if not isinstance(spec, dict) or not _is_int(spec.get("num_spec_steps")):
        return None
    histogram = spec.get("acceptance_histogram")
    per_pos: tuple[int, ...] = ()
    if isinstance(histogram, list) and all(_is_int(n) for n in histogram):
        # position k (0-based) is accepted in every step that accepted more than k drafts
        per_pos = tuple(sum(histogram[k + 1:]) for k in range(len(histogram) - 1))
    drafted, accepted = spec.get("num_draft_tokens"), spec.get("num_accepted_draft_tokens")
    return RequestDraft(VLLM_METRICS, spec["num_spec_steps"], drafted if _is_int(drafted) else None,
                        accepted if _is_int(accepted) else None, per_pos)


def sglang_draft(event: dict[str, Any]) -> RequestDraft | None:
    meta = event.get("meta_info")
    if not isinstance(meta, dict) or not _is_int(meta.get("spec_verify_ct")):
        return None
    return RequestDraft(SGLANG_META, meta["spec_verify_ct"], None, None, ())


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)

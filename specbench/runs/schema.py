"""The results schema of a sweep run directory (stable; bump SCHEMA_VERSION on any change). Plain pandas reads it.

`results/<run-id>/` holds:
- `manifest.json`: versions, git sha, models and weight hashes, device, data sha256, the full config (see manifest.py).
- `cells.parquet`: one row per cell and repeat (CELL_COLUMNS, then `accept_rate_pos_{k}` / `cond_accept_rate_pos_{k}`
  for k = 1..max num-steps of the sweep).
- `requests.parquet`: one row per measured request (one per turn of a multi-turn sample), raw timestamps kept so
  every cell metric can be recomputed (`specbench.runs.records.cell_metrics_from_rows`).
- `steps.parquet`: one row per engine step of a cell's measured window.
- `categories.parquet`: one row per cell and sample category (acceptance and latency per category).
- `recommendations.parquet`: the best (num-steps, eagle_topk, draft_token_budget) per (workload, method,
  temperature, concurrency), when the sweep measured several (bench/recommend.py).
- `parts/{cells,requests,steps,categories}/<cell_id>.parquet`: the same rows, one file per completed cell. Each part
  is written to `.tmp/` and renamed into place, requests/steps/categories before cells: a cell is complete exactly
  when `parts/cells/<cell_id>.parquet` exists. The four consolidated files are rewritten (atomically) after every
  cell, so after a kill they hold every completed cell, or every one but the last (`pd.read_parquet(run /
  "parts" / "cells")` is always current). `--resume` runs the cells without a cells part.

HTTP backends (`cells.backend` != "embedded") measure on the client: arrival = when the request was sent (after
its concurrency slot), one emission per streamed event that brings text or (per-chunk usage) tokens, the
end-of-sequence token's text-less closing event included (metrics/definitions.py); failed requests are rows with
`error` set, left out of every metric. What the server reports is sanity-checked (`anomalies`, kinds in
`specbench/runs/anomalies.py`); an impossible count is an error. Acceptance is one column family whatever its source
(`acceptance_source`): per request where the engine or the server's response bodies give counts (requests' draft
columns; per category too), else per cell from the server's /metrics counter deltas over the measured window
(requests' draft columns null; compare then uses the cell values, with an interval only across repeats). A cell
that drafted is never a baseline (specbench/runs/drafting.py): a server that speculates on its own, swept without
--method/-k, gets its method and k from the server where it tells (`drafting_note`) and no speedup or agreement
vs k=0.

Times are `time.perf_counter()` seconds of the sweep's process (unix time = `time_origin_unix` of manifest.json,
or of its `resumed` entry for cells run by a resumed session, + t). Temperature NaN = the workload's own per-sample
temperature (mt_bench: FastChat's per-category table). List columns read as numpy arrays. Metric definitions:
`specbench/metrics/definitions.py`.
"""

from __future__ import annotations

import pyarrow as pa

from specbench.metrics.metric_spec import Latency, MetricSpec
from specbench.metrics.specs import (
    ACCEPTANCE_LENGTH,
    ACCEPTANCE_RATE,
    ACCURACY_FLEXIBLE,
    ACCURACY_STRICT,
    DEPTH_DOC,
    AGREEMENT_FLEXIBLE,
    AGREEMENT_STRICT,
    AGREEMENT_TEXT,
    GOOD_REQUEST_FRACTION,
    LATENCIES,
    OUTPUT_GOODPUT,
    OUTPUT_THROUGHPUT,
    POSITION_COLUMN,
    POSITION_DOC,
    REQUEST_GOODPUT,
    REQUEST_THROUGHPUT,
    SPEEDUP,
    TOKENS_PER_EMISSION,
    TOTAL_THROUGHPUT,
    RANK_DOC,
    TREE_DEPTH_RATES,
    TREE_RANK_RATES,
    TREE_SIZE,
)
from specbench.runs.anomalies import AnomalyKind, kinds_doc

SCHEMA_VERSION = 7  # 2: backend, errors, token-count and acceptance sources (HTTP backends); 3: load pattern
# (duration, ramp), prefix-cache reset, goodput, reasoning text, recommendations.parquet; 4: acceptance_source
# "response", drafting_note (a drafting server's k = 0 cell relabelled, no self-baseline), anomalies;
# run order, baseline drift and speedup-bound flags; 5: metrics recomputed (is_metrics_consistent,
# metrics_mismatch); per-request acceptance histogram and quantiles, degenerate loops, acceptance windows and drift
# (cells and requests); the server's prefix-cache hit rate (prefix_cache_*); 6: draft tree shapes as grid keys
# (eagle_topk, draft_token_budget; chain cell ids unchanged), tree acceptance (cells: tree_size, per depth and
# per rank; requests: tree_* counts), recommendations over (num_steps, eagle_topk, draft_token_budget); 7: requests:
# num_cached_prompt_tokens (prefix-cache hits per request); cells: num_rounds_by_drafted_length

F64, I64, STR, BOOL = pa.float64(), pa.int64(), pa.string(), pa.bool_()
Column = tuple[str, pa.DataType, str]

KEY_COLUMNS: tuple[Column, ...] = (
    ("run_id", STR, "run directory name"),
    ("cell_id", STR, "r{repeat}-t{temperature}-c{concurrency}-k{num_steps}, then -top{eagle_topk} and "
     "-n{draft_token_budget} for tree drafts (k of the grid: a drafting server's k0 cell keeps its id when "
     "num_steps is relabelled, see drafting_note)"),
    ("repeat", I64, "0-based repeat index"),
    ("concurrency", I64, "max requests in flight"),
    ("temperature", F64, "grid temperature; NaN = workload default per sample"),
    ("num_steps", I64, "draft tokens per round k (0 = no speculation, or a drafting server's unknown k); the "
     "depth of a draft tree"),
    ("eagle_topk", I64, "children kept per draft node (--eagle-topk): 1 = chains (k = 0 cells too), > 1 = tree "
     "drafts; read as 1 where a table lacks the column"),
    ("draft_token_budget", I64, "--num-draft-tokens: a tree's drafted nodes per round, root excluded; null = "
     "every node the steps and topk give (always null for chains)"),
    ("method", STR, "speculative method (none | ngram | draft | ...; unknown: a server drafts but does not say how)"),
    ("workload", STR, "workload name"),
    ("workload_version", STR, "workload version (compare like with like)"),
    ("label", STR, "user --label (e.g. before / after), may be null"),
)


def _distribution(latency: Latency) -> tuple[Column, ...]:
    """The summary statistics metrics/distribution.py keeps of a latency (compare reads some: metrics/specs.py)."""
    prefix, name = latency.field, latency.doc
    return (
        (f"{prefix}_count", I64, f"requests (or gaps) with a defined {name}"),
        *((f"{prefix}_{stat}", F64, f"{stat} of {name}, seconds") for stat in ("mean", "median", "p90", "p99", "std")),
    )


def _metric(spec: MetricSpec) -> Column:
    return (spec.column, F64, spec.doc)


CELL_COLUMNS: tuple[Column, ...] = KEY_COLUMNS + (
    ("request_rate", F64, "arrivals per second (inf = all at once under the concurrency cap)"),
    ("burstiness", F64, "gamma shape of inter-arrival times (1 = Poisson)"),
    ("duration_limit_s", F64, "--duration: seconds of first-turn arrivals, samples cycled; null = each sample once"),
    ("ramp_up_strategy", STR, "linear: arrival rate ramped from ramp_up_start_rps to ramp_up_end_rps; else null"),
    ("ramp_up_start_rps", F64, "ramp start rate (arrivals/s); null without a ramp"),
    ("ramp_up_end_rps", F64, "ramp end rate (arrivals/s); null without a ramp"),
    ("num_warmup", I64, "warmup requests run before the measured window (synthetic prompts, never measured ones)"),
    ("is_cache_reset", BOOL, "the backend's prefix cache was emptied right before the cell (its warmup included)"),
    ("cache_reset_note", STR, "how it was reset (e.g. 'POST /reset_prefix_cache'), or why not (no prefix cache, no "
     "endpoint, --no-cache-reset)"),
    ("start_unix_s", F64, "unix time the cell started (warmup included)"),
    ("wall_s", F64, "cell wall time, warmup included"),
    ("run_index", I64, "position in the sweep's run order (grid order: k = 0 first in each (repeat, temperature, "
     "concurrency), the other k's reversed on odd repeats; --server-cmd: grouped by k); start_unix_s: when it ran"),
    ("backend", STR, "embedded | openai (an OpenAI-compatible server over HTTP)"),
    ("num_errors", I64, "measured requests that failed (left out of every metric)"),
    ("error_summary", STR, "failures by kind, e.g. '2 x http 500; 1 x timeout'; null without failures"),
    ("num_anomalies", I64, "sanity checks the server's reports failed: every measured request's (failed ones "
     "too) plus the window's counter checks (HTTP; 0 for the embedded engine)"),
    ("anomaly_summary", STR, "anomalies by kind, e.g. '2 x usage_mismatch; 1 x counter_mismatch'; null without"),
    ("window_anomalies", pa.list_(STR), "HTTP: 'kind: detail' of the /metrics counter checks over the measured "
     "window (counter_backwards, counter_mismatch)"),
    ("token_count_source", STR, "how output tokens were counted (requests' token_count_source, or 'mixed')"),
    ("num_requests", I64, "measured requests (turns) that succeeded"),
    ("duration_s", F64, "measured window: last emission - first arrival"),
    ("num_prompt_tokens", I64, "sum of prompt tokens"),
    ("num_output_tokens", I64, "sum of output tokens"),
    ("num_emissions", I64, "sum of emissions (an emission may carry several tokens)"),
    _metric(OUTPUT_THROUGHPUT),
    _metric(TOTAL_THROUGHPUT),
    _metric(REQUEST_THROUGHPUT),
    _metric(TOKENS_PER_EMISSION),
    ("goodput_slo", STR, "--goodput bounds in ms, e.g. 'ttft:200,tpot:50'; null (and the next four) without"),
    ("num_good_requests", I64, "measured requests meeting every bound"),
    _metric(GOOD_REQUEST_FRACTION),
    _metric(REQUEST_GOODPUT),
    _metric(OUTPUT_GOODPUT),
    *(column for latency in LATENCIES for column in _distribution(latency)),
    ("num_draft_rounds", I64, "verify rounds with >= 1 draft token (D)"),
    ("num_draft_tokens", I64, "draft tokens proposed (T_d)"),
    ("num_accepted_tokens", I64, "draft tokens accepted (A)"),
    _metric(ACCEPTANCE_RATE),
    _metric(ACCEPTANCE_LENGTH),
    ("acceptance_length_per_request", F64, "request-weighted AL: mean of 1 + A_i / D_i"),
    ("acceptance_length_from_positions", F64, "1 + sum_k accept_rate_pos_k"),
    _metric(TREE_SIZE),
    (TREE_DEPTH_RATES, pa.list_(F64), DEPTH_DOC),
    (TREE_RANK_RATES, pa.list_(F64), RANK_DOC),
    ("is_acceptance_consistent", BOOL, "acceptance_length == acceptance_length_from_positions"),
    ("is_metrics_consistent", BOOL, "acceptance and latency columns agree with a second, independent computation "
     "from the request rows, and those rows keep their invariants (sum_k A_k = A, A_k non-increasing, A <= T_d, "
     "tokens per emission sum to output tokens, emission times non-decreasing, TTFT >= 0) (metrics/recompute.py); "
     "acceptance from a server's /metrics is not checked; null without a successful request"),
    ("metrics_mismatch", STR, "what disagrees, e.g. 'acceptance_length 1.9 vs recomputed 1.75; ...'; null when "
     "consistent"),
    ("acceptance_source", STR, "where the acceptance columns come from: engine (per-request stats) | response "
     "(per-request counts in the server's response bodies, see draft_stats_source) | server:vllm / "
     "server:specbench / server:llamacpp / server:sglang (Prometheus /metrics counter deltas over the measured "
     "window: per cell only); null when unavailable"),
    ("draft_stats_source", STR, "where the requests' per-request draft columns come from: engine | "
     "llamacpp:timings | vllm:metrics.speculative_decoding | sglang:meta_info | mixed; null when none sent"),
    ("server_accepted_per_pos", pa.list_(F64), "HTTP: [num_positions] A_k counter deltas at every position the "
     "server reported (variable-length drafts may exceed num-steps; per-position columns stop at num-steps)"),
    ("acceptance_note", STR, "why the acceptance columns are null or approximate (HTTP), else null"),
    ("drafting_note", STR, "set when a cell labelled k=0 drafted (a server speculating on its own): the method and "
     "k it was relabelled with and where they were read, or 'unknown'; it is no baseline (no speedup/agreement)"),
    ("server_generation_tokens", I64, "HTTP: delta of the server's generation-token counter over the window "
     "(all its traffic: more than num_output_tokens means other requests were mixed in); else null"),
    ("num_preemptions", I64, "sum of request preemptions; null over HTTP"),
    ("num_rounds_by_drafted_length", pa.list_(I64), "[num_steps] verify rounds that drafted exactly L tokens, "
     "L = 1..k: D_L - D_(L+1) of the requests' rounds proposing position L (a drafter that drafts fewer than k "
     "where it finds nothing, or a server with adaptive k); null over HTTP and at k = 0"),
    ("baseline_cell_id", STR, "num-steps 0 cell of the same (repeat, temperature, concurrency) that did not draft; "
     "null if none"),
    _metric(SPEEDUP),
    ("speedup_bound", F64, "most speedup the acceptance allows: acceptance_length x (1 - drafting share of the "
     "decode step time, embedded engine) (bench/speedup_bound.py); null for k = 0"),
    ("is_speedup_implausible", BOOL, "speedup > speedup_bound by more than the tolerance: not a property of the "
     "method (load changed between the cells, or a broken measurement); null when unknown"),
    ("baseline_drift", F64, "end / start - 1 of the output throughput of two short k = 0 probes bracketing the "
     "cell's (repeat, temperature, concurrency) group (bench/drift.py); null when not measured (--server-cmd, "
     "HTTP, no k = 0, an interrupted group)"),
    ("is_drift_suspect", BOOL, "|baseline_drift| > tolerance and |log speedup| <= |log(1 + baseline_drift)|: "
     "the drift alone could explain the speedup; null for k = 0 or without drift"),
    ("acceptance_length_histogram", pa.list_(I64), "[8] requests whose acceptance length 1 + A_i / D_i falls in "
     "each of 8 equal bins of [1, k + 1] (metrics/request_acceptance.py); null for k = 0 or without per-request "
     "counts"),
    ("acceptance_length_request_p10", F64, "10th percentile of the requests' 1 + A_i / D_i"),
    ("acceptance_length_request_p50", F64, "median of the requests' 1 + A_i / D_i"),
    ("acceptance_length_request_p90", F64, "90th percentile of the requests' 1 + A_i / D_i"),
    ("num_loop_requests", I64, "successful requests flagged is_degenerate_loop (metrics/loops.py)"),
    ("loop_request_fraction", F64, "num_loop_requests / successful requests"),
    ("acceptance_length_without_loops", F64, "1 + A / D over the requests that do not loop; null for k = 0 or "
     "without per-request counts"),
    ("loop_acceptance_inflation", F64, "acceptance_length over all requests / acceptance_length_without_loops - 1"),
    ("is_acceptance_loop_inflated", BOOL, "some request loops and either all do or loop_acceptance_inflation > 5% "
     "(bench/sweep_checks.py): the cell's acceptance is a benchmark artefact"),
    ("acceptance_windows", pa.list_(F64), "[12] tokens per decode emission in equal time windows of the cell's "
     "decode span, null where empty (bench/acceptance_drift.py)"),
    ("acceptance_drift", F64, "Theil-Sen slope of acceptance_windows x (windows - 1) / mean: relative change over "
     "the cell; null unless k > 0 on a --duration run with >= 8 filled windows"),
    ("acceptance_drift_p", F64, "two-sided Mann-Kendall p-value of the windows' trend"),
    ("is_acceptance_drift", BOOL, "acceptance_drift_p < 0.01 and |acceptance_drift| > 10%"),
    ("prefix_cache_hit_rate", F64, "the server's prefix-cache hit rate over the measured window, from its own "
     "/metrics (backends/prefix_cache.py): vLLM delta prefix_cache_hits / delta prefix_cache_queries (tokens), "
     "else a gauge at the window's end (vllm:gpu_prefix_cache_hit_rate, sglang:cache_hit_rate); the embedded "
     "engine's from its step stats (prefix-hit / queried prompt tokens); null when not exported or caching is off"),
    ("prefix_cache_source", STR, "the metric(s) read, '(gauge at window end)' for a gauge; null when none"),
    ("prefix_cache_note", STR, "why prefix_cache_hit_rate is null"),
    ("accuracy_n", I64, "scored requests (gsm8k); 0 for speed-only workloads"),
    _metric(ACCURACY_STRICT),
    ("accuracy_strict_stderr", F64, "sample std / sqrt(n)"),
    _metric(ACCURACY_FLEXIBLE),
    ("accuracy_flexible_stderr", F64, "sample std / sqrt(n)"),
    ("agreement_num_pairs", I64, "requests paired with the baseline cell by (sample_id, turn)"),
    _metric(AGREEMENT_STRICT),
    _metric(AGREEMENT_FLEXIBLE),
    _metric(AGREEMENT_TEXT),
)
POSITION_COLUMNS: tuple[Column, ...] = (
    (POSITION_COLUMN, F64, POSITION_DOC),
    ("cond_accept_rate_pos_{k}", F64, "A_k / A_(k-1), A_0 = D"),
)

REQUEST_COLUMNS: tuple[Column, ...] = KEY_COLUMNS + (
    ("request_id", STR, "engine request id"),
    ("request_index", I64, "submission order within the cell"),
    ("sample_id", STR, "workload sample id (stable across runs)"),
    ("category", STR, "sample category"),
    ("subcategory", STR, "spec_bench: MT-Bench category of its mt_bench questions; speed_bench: the row's "
     "sub_category; else null"),
    ("turn", I64, "0-based turn; turn t+1 carries the model's own answer to turn t"),
    ("scheduled_time", F64, "Poisson/gamma arrival target (first turns under a finite or ramped rate); else null"),
    ("arrival_time", F64, "when the request became eligible to run; HTTP: when it was sent (TTFT/E2E start here)"),
    ("first_scheduled_time", F64, "first engine step that ran it; null over HTTP"),
    ("finish_time", F64, "last emission"),
    ("emission_times", pa.list_(F64), "[num_emissions] emission times (HTTP: streamed events with answer or "
     "reasoning text, or with tokens under per-chunk usage; the closing event when it brings the last tokens)"),
    ("tokens_per_emission", pa.list_(I64), "[num_emissions] tokens in each emission (see token_count_source)"),
    ("num_prompt_tokens", I64, "prompt tokens"),
    ("num_output_tokens", I64, "output tokens (sum of tokens_per_emission)"),
    ("num_emissions", I64, "emissions"),
    ("finish_reason", STR, "stop | length (null when the request failed before it finished)"),
    ("error", STR, "why the request failed (HTTP: connection, http <status>, timeout, malformed or cut stream, "
     "or a fatal anomaly); null on success"),
    ("anomalies", pa.list_(STR), "[num_anomalies] 'kind: detail' of each sanity check the server's report failed "
     f"(HTTP; kinds: {kinds_doc()}; a fatal one also sets error); [] for the embedded engine"),
    ("num_anomalies", I64, "len(anomalies)"),
    ("token_count_source", STR, "engine | server_per_chunk (usage in every chunk) | retokenized (chunk text, local "
     "tokenizer) | one_per_chunk (no per-chunk counts, no tokenizer); totals match the server's usage if sent"),
    ("is_usage_reported", BOOL, "HTTP: the server sent a usage block; null for the embedded engine"),
    ("draft_stats_source", STR, "engine | llamacpp:timings | vllm:metrics.speculative_decoding | sglang:meta_info "
     "(per-request counts from the response body); null when none"),
    ("ttft_s", F64, "first emission - arrival"),
    ("tpot_s", F64, "(e2e - ttft) / (output tokens - 1); null below 2 tokens"),
    ("e2e_s", F64, "last emission - arrival"),
    ("num_draft_rounds", I64, "verify rounds with >= 1 draft (this and the next five: over HTTP only what the "
     "server's response body says, see draft_stats_source, else null)"),
    ("num_draft_tokens", I64, "draft tokens proposed"),
    ("num_accepted_tokens", I64, "draft tokens accepted"),
    ("num_drafted_per_pos", pa.list_(I64), "[num_steps] rounds proposing draft position k"),
    ("num_accepted_per_pos", pa.list_(I64), "[num_steps] rounds accepting draft position k"),
    ("accepted_per_round", pa.list_(I64), "[num_draft_rounds] accepted drafts per round"),
    ("acceptance_length", F64, "1 + num_accepted_tokens / num_draft_rounds; null without draft rounds"),
    ("tree_num_rounds", I64, "tree drafts (eagle_topk > 1): rounds that verified a tree (this and the next six "
     "null for chains and over HTTP; speculation/verify/tree_stats.py)"),
    ("tree_num_accepted", I64, "draft tokens accepted on tree rounds"),
    ("tree_num_nodes", I64, "drafted tree nodes, summed over rounds (root excluded)"),
    ("tree_offered_per_depth", pa.list_(I64), "[max_depth] rounds whose accepted path reached depth d - 1 with a "
     "child to try"),
    ("tree_accepted_per_depth", pa.list_(I64), "[max_depth] of those, rounds whose path went on to depth d"),
    ("tree_offered_per_rank", pa.list_(I64), "[max_rank + 1] accepted-path nodes (root included) with a child of "
     "sibling rank r (0 = the drafter's best)"),
    ("tree_accepted_per_rank", pa.list_(I64), "[max_rank + 1] path steps through a child of rank r"),
    ("loop_period", I64, "period of the output's longest periodic suffix holding >= 3 periods (metrics/loops.py); "
     "over token ids (embedded) or text characters (HTTP); null without one"),
    ("loop_coverage", F64, "that suffix's length / output length"),
    ("is_degenerate_loop", BOOL, "loop_coverage >= 0.5 and the suffix >= 24 tokens (characters over HTTP): the "
     "output ends in one block repeated; null without output"),
    ("num_preemptions", I64, "times the request was preempted; null over HTTP"),
    ("num_cached_prompt_tokens", I64, "prompt tokens served from the prefix cache at the request's first admission "
     "(embedded engine), or the server's usage.prompt_tokens_details.cached_tokens; null with prefix caching off or "
     "where the server does not say"),
    ("request_temperature", F64, "temperature the request ran with"),
    ("max_tokens", I64, "max new tokens"),
    ("request_seed", I64, "sampling seed (same for the same sample and turn in every cell of a repeat)"),
    ("prompt_sha256", STR, "sha256 of the prompt token ids (HTTP without a tokenizer: of 'text:' + prompt text)"),
    ("output_text", STR, "completion text (cut at stop strings); for reasoning models the answer only"),
    ("reasoning_text", STR, "reasoning: streamed reasoning_content / reasoning deltas (HTTP), or inline "
     "<think>...</think> split off by --reasoning-parser think; else null"),
    ("is_good", BOOL, "meets every --goodput bound (false when failed); null without --goodput"),
    ("gold_answer", STR, "gsm8k: normalised gold answer; else null"),
    ("strict_answer", STR, "gsm8k: strict-match extraction"),
    ("flexible_answer", STR, "gsm8k: flexible-extract extraction"),
    ("strict_normalized", STR, "gsm8k: strict answer after exact_match normalisation"),
    ("flexible_normalized", STR, "gsm8k: flexible answer after normalisation"),
    ("is_strict_match", BOOL, "gsm8k: strict answer == gold"),
    ("is_flexible_match", BOOL, "gsm8k: flexible answer == gold"),
)

STEP_COLUMNS: tuple[Column, ...] = KEY_COLUMNS + (
    ("step", I64, "engine step index (global over the sweep)"),
    ("start_time", F64, "step start"),
    ("phase", STR, "prefill | decode"),
    ("num_reqs", I64, "requests in the step"),
    ("num_scheduled_tokens", I64, "target query tokens in the forward"),
    ("num_draft_tokens", I64, "drafts proposed"),
    ("num_accepted_tokens", I64, "drafts accepted"),
    ("num_preempted", I64, "requests preempted by the step"),
    ("num_free_blocks", I64, "free KV blocks after the step"),
    ("draft_ms", F64, "proposer time"),
    ("target_ms", F64, "target forward time"),
    ("sample_ms", F64, "verify / sampling time"),
    ("step_ms", F64, "whole step wall time"),
    ("num_prefix_queried_tokens", I64, "prefill steps: tokens of the admitted requests' prefills (prefix caching "
     "on; else 0)"),
    ("num_prefix_hit_tokens", I64, "of those, served from the engine's prefix cache"),
)

CATEGORY_COLUMNS: tuple[Column, ...] = KEY_COLUMNS + (
    ("category", STR, "sample category"),
    ("num_requests", I64, "measured requests (turns) of the category"),
    ("num_output_tokens", I64, "output tokens"),
    ("num_emissions", I64, "emissions"),
    ("tokens_per_emission", F64, "pooled output tokens / emissions"),
    ("ttft_s_mean", F64, "mean TTFT"),
    ("tpot_s_mean", F64, "mean TPOT"),
    ("e2e_s_mean", F64, "mean E2E latency"),
    ("num_draft_rounds", I64, "D"),
    ("num_draft_tokens", I64, "T_d"),
    ("num_accepted_tokens", I64, "A"),
    ("acceptance_rate", F64, "A / T_d"),
    ("acceptance_length", F64, "1 + A / D"),
    ("acceptance_length_per_request", F64, "mean of 1 + A_i / D_i"),
)

# recommendations.parquet: one row per (workload, method, temperature, concurrency) of a sweep with several
# (num-steps, tree shape) values, written after the last cell (bench/recommend.py); not per cell, so not in TABLES.
RECOMMENDATION_COLUMNS: tuple[Column, ...] = (
    ("run_id", STR, "run directory name"),
    ("workload", STR, "workload name"),
    ("method", STR, "speculative method"),
    ("temperature", F64, "grid temperature; NaN = workload default per sample"),
    ("concurrency", I64, "max requests in flight"),
    ("optimize", STR, "throughput (highest output throughput) | tpot (lowest median TPOT)"),
    ("metric", STR, "compare metric ranked: output_throughput | tpot_median"),
    ("num_candidates", I64, "(num-steps, tree shape) values measured at this point"),
    ("best_num_steps", I64, "recommended k"),
    ("best_eagle_topk", I64, "its eagle_topk (1 = chains)"),
    ("best_draft_token_budget", I64, "its draft_token_budget (null: none)"),
    ("best_value", F64, "its metric value (tok/s or seconds; mean over repeats)"),
    ("runner_up_num_steps", I64, "second-best k"),
    ("runner_up_eagle_topk", I64, "its eagle_topk"),
    ("runner_up_draft_token_budget", I64, "its draft_token_budget"),
    ("runner_up_value", F64, "its metric value"),
    ("ratio", F64, "best_value / runner_up_value"),
    ("ratio_low", F64, "bootstrap 95% interval of the ratio (requests resampled as compare does); null when too "
     "few requests"),
    ("ratio_high", F64, "upper end of that interval"),
    ("is_distinguishable", BOOL, "the interval excludes 1 (best beats runner-up beyond noise); null without one"),
)

TABLES: dict[str, tuple[Column, ...]] = {
    "cells": CELL_COLUMNS,
    "requests": REQUEST_COLUMNS,
    "steps": STEP_COLUMNS,
    "categories": CATEGORY_COLUMNS,
}
# Per-position columns appended to these tables, k = 1..max num-steps of the sweep.
POSITIONAL: dict[str, tuple[Column, ...]] = {"cells": POSITION_COLUMNS, "categories": POSITION_COLUMNS[:1]}


def columns(table: str, num_positions: int) -> tuple[Column, ...]:
    specs = POSITIONAL.get(table, ())
    return TABLES[table] + tuple(
        (name.format(k=k), dtype, doc) for k in range(1, num_positions + 1) for name, dtype, doc in specs
    )


def arrow_schema(table: str, num_positions: int) -> pa.Schema:
    return pa.schema([pa.field(name, dtype) for name, dtype, _ in columns(table, num_positions)])


def schema_markdown() -> str:
    """The column reference as Markdown (for the README): key columns once, then each table's own."""

    def rows(specs: tuple[Column, ...]) -> list[str]:
        return ["| column | type | meaning |", "|---|---|---|"] + [
            f"| `{name}` | {dtype} | {doc.replace('|', '/')} |" for name, dtype, doc in specs
        ]

    lines = [f"Results schema version {SCHEMA_VERSION} (`schema_version` in manifest.json). `compare` and `--resume` "
             "refuse a run directory of another version with one error naming both versions: read it with the "
             "specbench that wrote it, or as plain parquet.", "",
             "#### Key columns (first in every table)", "", *rows(KEY_COLUMNS), ""]
    for table, specs in TABLES.items():
        lines += [f"#### `{table}.parquet`", "", *rows(specs[len(KEY_COLUMNS):] + POSITIONAL.get(table, ())), ""]
    lines += ["#### `recommendations.parquet` (sweeps with several num-steps or tree shape values)", "",
              *rows(RECOMMENDATION_COLUMNS), ""]
    lines += ["#### Anomaly kinds (`anomalies`, `window_anomalies`, `anomaly_summary`; fatal ones set `error`)", "",
              "| kind | fatal | meaning |", "|---|---|---|",
              *(f"| `{k.label}` | {'yes' if k.is_fatal else 'no'} | {k.description} |" for k in AnomalyKind), ""]
    return "\n".join(lines)

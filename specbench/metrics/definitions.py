"""Metric definitions used by specbench (the single reference; other modules implement exactly these).

Times are `time.perf_counter()` seconds recorded in-process by the engine (`RequestStats`). For request i:
arrival `t_arr` = RequestStats.arrival_time (when the request became eligible to run, so queueing counts);
emissions e_1..e_m at t_1..t_m = the moments tokens left the device, each carrying n_j >= 1 tokens
(speculative steps emit accepted + 1 tokens at once); N_i = sum_j n_j output tokens.

End of a request (every backend): its last token, with or without text, so t_m is when the last token left the
engine. Embedded: the step that produced it (the end-of-sequence token rides in its step's emission). Over HTTP
(backends/token_counts.py), with per-chunk usage, every streamed event that brings tokens is an emission, text or
none: a step whose text the server held back (a partial character, a possible stop string), and the closing event
that brings the end-of-sequence token or the end of a stop string. Without per-chunk usage an emission is an event
with text, and the tokens the final usage has beyond the text's count go to the text-less finish event, unless the
request ended by length or finished on a chunk with text (then to the last text chunk). Plain decoding thus reads
1.000 tokens per emission over HTTP as embedded, and TPOT spans to the last token. A server's counts are
sanity-checked first (runs/anomalies.py, backends/anomalies.py); an impossible one fails the request.

Latency
- TTFT_i = t_1 - t_arr.
- E2E_i = t_m - t_arr.
- TPOT_i = (E2E_i - TTFT_i) / (N_i - 1), only when N_i >= 2 (else undefined). Amortised per token:
  vLLM/SGLang "TPOT" = AIPerf and GuideLLM "ITL".
- ITL = the gaps t_j - t_{j-1} (j >= 2) between emissions, pooled over all requests of a cell. Under
  speculative decoding a gap spans one verify step, not one token: read it next to tokens per emission.
  (vLLM "ITL", AIPerf "ICL").
- Tokens per emission_i = N_i / m_i; for a cell, pooled: sum N_i / sum m_i.
- Summaries: mean, median, p90, p99 (numpy linear interpolation) and population std (ddof=0) over the
  per-request values (ITL: over the pooled gaps). Requests without a defined value are left out.

Throughput over a measured window of duration T = (last emission - first arrival) among the measured
requests, unless the caller passes T (warmup requests are never measured):
- output throughput = sum N_i / T; total throughput = sum (prompt_i + N_i) / T; request throughput = n / T.

Goodput under service-level objectives (--goodput ttft:MS tpot:MS e2el:MS; vLLM's definition):
- request i is good when it meets every bound given: TTFT_i <= ttft, TPOT_i <= tpot, E2E_i <= e2el (ms,
  inclusive). TPOT undefined (one output token) meets the TPOT bound (vLLM counts it as 0); a request that
  emitted nothing, or failed, is not good.
- goodput (req/s) = good requests / T; output goodput (tok/s) = output tokens of good requests / T;
  share of good requests = good / all measured requests, failed ones included (compare resamples the
  successful requests only).

Load patterns (bench/load_pattern.py): arrivals all at once under the concurrency cap, or gamma gaps of mean
1 / rate (shape = burstiness). A linear ramp (vLLM --ramp-up-strategy linear) uses rate start + (end - start) *
progress for each gap, progress = i / (n - 1) over n arrivals, or t_i / duration under --duration. With
--duration, first turns arrive (samples cycled) until the duration has passed; requests in flight then finish
and are measured, so T may exceed the duration.

Best num-steps (bench/recommend.py): per (workload, method, temperature, concurrency) with several k, the k with
the highest output throughput (or the lowest median TPOT), and the ratio best / runner-up with the percentile
interval of its bootstrap replicates (compare's resampling, each cell drawn independently); distinguishable when
the interval excludes 1.

Acceptance, summed over the measured requests. A draft round = a verify step in which >= 1 draft token
was proposed for the request. D = rounds, T_d = draft tokens proposed, A = draft tokens accepted,
A_k = rounds whose draft position k (1-based) was accepted (accepting k implies accepting 1..k-1).
- acceptance rate = A / T_d (undefined without drafts).
- acceptance length (AL), token-weighted = 1 + A / D: tokens emitted per verify round, the bonus /
  recovered token included (1.0 = no speculation; also reported as 1.0 when D = 0).
- AL, request-weighted = mean over requests with D_i >= 1 of (1 + A_i / D_i). Both are reported; they
  differ when the number of rounds correlates with acceptance.
- per-position (unconditional) acceptance p_k = A_k / D.
- conditional acceptance c_k = A_k / A_{k-1}, with A_0 = D (undefined when A_{k-1} = 0).
- consistency check: sum_k A_k = A, hence AL == 1 + sum_k p_k (checked to 1e-9 relative).
- acceptance histogram h_j = rounds that accepted exactly j drafts.

Prefix-cache hit rate over a window = prompt tokens served from the prefix cache / prompt tokens queried, where a
request queries every token it prefills at admission (a preempted one: prompt and output, again), hit or not (vLLM's
prefix_cache_hits / prefix_cache_queries). Embedded: summed from the window's steps (StepStats
num_prefix_hit_tokens / num_prefix_queried_tokens); over HTTP: the server's counters differenced
(backends/prefix_cache.py).

Comparisons, always against the num-steps=0 (no speculation) cell of the same (concurrency, temperature):
- speedup = output throughput / baseline output throughput.
- accuracy (GSM8K) = mean exact_match under strict-match and flexible-extract, stored with its stderr =
  sample std (ddof=1) / sqrt(n) (lm-eval's mean_stderr; undefined for n < 2), printed with its 95% Wilson score
  interval (metrics/accuracy.accuracy_interval: meaningful at 0 and 1, where the stderr is 0).
- answer agreement = fraction of paired requests whose normalised extracted answers are equal (strict and
  flexible separately), and fraction whose full completion texts are identical.
"""

ACCEPTANCE_LENGTH_RTOL = 1e-9  # tolerance of the AL == 1 + sum p_k consistency check


# The formulas of the declared metrics (metrics/specs.py), written once: each spec's pooled computation and every
# consumer of a count pair (a request, a row, a server's counters, the gate's pool) call these, on numbers or numpy
# arrays alike. Each takes a positive denominator: what a value without one reads (None, NaN, 1.0) is the caller's.
# metrics/recompute.py alone does not call them, on purpose: it is the independent second computation.
# NOTE: a leaf (no imports), so that request_metrics.py, which pooled.py and the specs read, can call them too.


def acceptance_length(num_accepted_tokens, num_draft_rounds):
    """AL = 1 + A / D: tokens emitted per verify round, the bonus / recovered token included."""
    return 1.0 + num_accepted_tokens / num_draft_rounds


def acceptance_rate(num_accepted_tokens, num_draft_tokens):
    """A / T_d: accepted draft tokens over proposed ones."""
    return num_accepted_tokens / num_draft_tokens


def position_acceptance_rate(num_accepted_at_position, num_draft_rounds):
    """p_k = A_k / D: rounds accepting draft position k (1-based) per round (unconditional)."""
    return num_accepted_at_position / num_draft_rounds


def tokens_per_emission(num_output_tokens, num_emissions):
    """N / m: output tokens per emission (speculative steps emit accepted + 1 at once)."""
    return num_output_tokens / num_emissions


def speedup(output_throughput, baseline_output_throughput):
    """Output throughput over the num-steps=0 cell's of the same (concurrency, temperature)."""
    return output_throughput / baseline_output_throughput

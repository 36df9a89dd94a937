"""Server counters of `specbench serve` and their Prometheus text exposition (names mirror vLLM's, prefix
`specbench:`), so a benchmark client can difference them over a window exactly as it does a vLLM server's."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

from specbench.engine.outputs import RequestOutput

PREFIX = "specbench"


@dataclass
class ServerCounters:
    """Updated on the engine thread when a request finishes (so a window's deltas cover whole requests);
    read by /metrics under the lock."""

    num_positions: int  # draft positions k of the engine
    num_drafts: int = 0  # D: verify rounds with >= 1 draft
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    num_accepted_per_pos: list[int] = field(default_factory=list)  # [num_positions]
    num_prompt_tokens: int = 0
    num_generation_tokens: int = 0
    num_finished: Counter = field(default_factory=Counter)  # finish reason -> requests
    num_aborted: int = 0  # dropped unfinished: client disconnected, or server shutdown
    num_failed: int = 0  # dropped unfinished: the engine failed on the request (answered 500)
    # prefix cache (engine/prefix_reuse.py), in prompt tokens: refreshed after every step from the engine's totals
    num_prefix_queries: int = 0
    num_prefix_hits: int = 0
    num_running: int = 0  # gauges, refreshed after every step
    num_waiting: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.num_accepted_per_pos = [0] * self.num_positions

    def on_finish(self, output: RequestOutput) -> None:
        stats = output.stats
        with self.lock:
            self.num_drafts += stats.num_draft_rounds
            self.num_draft_tokens += stats.num_draft_tokens
            self.num_accepted_tokens += stats.num_accepted_tokens
            for k, accepted in enumerate(stats.num_accepted_per_pos):
                if k >= len(self.num_accepted_per_pos):
                    self.num_accepted_per_pos.append(0)
                self.num_accepted_per_pos[k] += accepted
            self.num_prompt_tokens += stats.num_prompt_tokens
            self.num_generation_tokens += len(output.output_token_ids)
            self.num_finished[output.finish_reason] += 1

    def on_abort(self) -> None:
        with self.lock:
            self.num_aborted += 1

    def on_failure(self) -> None:
        with self.lock:
            self.num_failed += 1

    def set_prefix_cache(self, num_queries: int, num_hits: int) -> None:
        with self.lock:
            self.num_prefix_queries, self.num_prefix_hits = num_queries, num_hits

    def set_load(self, num_running: int, num_waiting: int) -> None:
        with self.lock:
            self.num_running, self.num_waiting = num_running, num_waiting

    def render(self, model_name: str, fault: str | None = None) -> str:
        """Prometheus text format 0.0.4: HELP/TYPE per family, counters exposed as `<name>_total`; `fault`: the
        injected fault's name (`specbench:fault_injected{fault="..."} 1`), None for a real engine."""
        label = f'model_name="{_escape(model_name)}"'
        with self.lock:
            families = [
                ("spec_decode_num_drafts", "counter", "Verify rounds that carried draft tokens.",
                 [("", self.num_drafts)]),
                ("spec_decode_num_draft_tokens", "counter", "Draft tokens proposed.", [("", self.num_draft_tokens)]),
                ("spec_decode_num_accepted_tokens", "counter", "Draft tokens accepted.",
                 [("", self.num_accepted_tokens)]),
                ("spec_decode_num_accepted_tokens_per_pos", "counter",
                 "Verify rounds that accepted the draft token at each 0-based position.",
                 [(f'position="{k}"', n) for k, n in enumerate(self.num_accepted_per_pos)]),
                ("prompt_tokens", "counter", "Prompt tokens of finished requests.", [("", self.num_prompt_tokens)]),
                ("generation_tokens", "counter", "Generated tokens of finished requests.",
                 [("", self.num_generation_tokens)]),
                ("request_success", "counter", "Finished requests by finish reason.",
                 [(f'finished_reason="{_escape(r)}"', n) for r, n in sorted(self.num_finished.items())]),
                ("request_aborted", "counter", "Requests dropped unfinished (client disconnected, or shutdown).",
                 [("", self.num_aborted)]),
                ("request_failed", "counter", "Requests the engine failed on (answered 500; the others go on).",
                 [("", self.num_failed)]),
                ("prefix_cache_queries", "counter", "Prompt tokens looked up in the prefix cache (admitted prefills).",
                 [("", self.num_prefix_queries)]),
                ("prefix_cache_hits", "counter", "Of those, prompt tokens served from the prefix cache.",
                 [("", self.num_prefix_hits)]),
                ("num_requests_running", "gauge", "Requests in the running batch.", [("", self.num_running)]),
                ("num_requests_waiting", "gauge", "Requests waiting to be scheduled.", [("", self.num_waiting)]),
            ]
        lines = []
        for name, kind, help_text, samples in families:
            full = f"{PREFIX}:{name}"
            lines += [f"# HELP {full} {help_text}", f"# TYPE {full} {kind}"]
            suffix = "_total" if kind == "counter" else ""
            for extra, value in samples:
                labels = ",".join(part for part in (label, extra) if part)
                lines.append(f"{full}{suffix}{{{labels}}} {float(value)}")
        if fault is not None:  # a mutant says so to every scraper: an info gauge whose label names the fault
            full = f"{PREFIX}:fault_injected"
            lines += [f"# HELP {full} The engine runs with an injected fault (--inject): not a real result.",
                      f"# TYPE {full} gauge", f'{full}{{{label},fault="{_escape(fault)}"}} 1.0']
        return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

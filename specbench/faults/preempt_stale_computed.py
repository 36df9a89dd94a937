"""preemption: under overlapped plain decoding, a preempted request resumes with the computed-token count it had
when preempted (seed class: stale state reused across phases).

Preemption frees a request's KV and its recompute prefill rebuilds all of it, after which the target KV holds every
token but the newest. Here the overlapped loop's launch (engine/step_loop.py) restores the count saved at preemption
on the request's first launch after it resumes, one short of the truth: that step writes the newest token's K/V
over its predecessor's position and every later position is off by one. The synchronous loop and speculative
rounds resume correctly.
"""

from __future__ import annotations

from specbench.faults.fault import Fault
from specbench.faults.path_mutant import PathMutant


class PreemptStaleComputed(PathMutant):
    fault = Fault("preempt-stale-computed", "an overlapped decode step resumes a preempted request with its "
                  "computed-token count from before the preemption", "002 (stale state reused)", "target",
                  None, path="preemption", is_plain_hosted=True)

    def __init__(self) -> None:
        self._saved: dict[str, int] = {}  # request id -> num_cached_tokens when it was preempted

    def preempting(self, request) -> None:
        if request.num_cached_tokens:
            self._saved[request.request_id] = request.num_cached_tokens

    def plain_decode_launch(self, requests, newest_token_ids):
        for request in requests:
            saved = self._saved.pop(request.request_id, None)
            if saved is not None and request.num_cached_tokens == request.num_tokens - 1:  # resumed
                request.num_cached_tokens = saved
        return newest_token_ids

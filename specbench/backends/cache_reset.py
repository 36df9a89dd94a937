"""Reset a server's prefix cache between cells, where the server offers an endpoint for it.

vLLM: POST /reset_prefix_cache (served when the server runs with VLLM_SERVER_DEV_MODE=1). SGLang: POST
/flush_cache. llama.cpp's server has no whole-cache reset over HTTP (only per-slot erase), and specbench serve
keeps no prefix cache: both answer 404 and the cell records that nothing was reset.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the embedded backend imports CacheReset without needing an HTTP client
    from specbench.backends.deadline import DeadlineClient

RESET_ENDPOINTS = (("/reset_prefix_cache", "vLLM"), ("/flush_cache", "SGLang"))
NOT_FOUND = (404, 405)


@dataclass(frozen=True, slots=True)
class CacheReset:
    is_reset: bool  # the cache was emptied right before this cell
    note: str  # how ("POST /reset_prefix_cache"), or why not


SKIPPED = CacheReset(False, "skipped (--no-cache-reset)")


class PrefixCacheResetter:
    """Remembers which endpoint worked (or that none exists) after the first cell."""

    def __init__(self, client: DeadlineClient) -> None:
        self._client = client
        self._endpoint: str | None = None
        self._none_offered = False

    def reset(self) -> CacheReset:
        from specbench.backends.deadline import ServerAnswerError

        if self._none_offered:
            return self._no_endpoint()
        candidates = [self._endpoint] if self._endpoint else [path for path, _ in RESET_ENDPOINTS]
        for path in candidates:
            try:  # only the status counts: servers answer with an empty body, text or JSON
                response = self._client.post(path, self._client.deadlines.cache_reset_s)
            except ServerAnswerError as err:
                return CacheReset(False, f"failed: {err}")
            if response.status_code in NOT_FOUND:
                continue
            if response.status_code >= 400:
                return CacheReset(False, f"POST {path} answered http {response.status_code}")
            self._endpoint = path
            return CacheReset(True, f"POST {path}")
        self._none_offered = True
        return self._no_endpoint()

    @staticmethod
    def _no_endpoint() -> CacheReset:
        tried = ", ".join(f"{path} ({server})" for path, server in RESET_ENDPOINTS)
        return CacheReset(False, f"the server offers no prefix-cache reset (tried POST {tried}; vLLM serves "
                                 "its endpoint only with VLLM_SERVER_DEV_MODE=1)")

"""HTTP calls to a server's side endpoints (/v1/models, /metrics, cache reset, readiness, probes) under a deadline
on the whole call: connect plus every byte of the answer.

httpx's own timeouts bound each socket operation, so a server that sends one byte every second never trips them.
Here each call runs as an asyncio task that `wait_for` cancels when its deadline passes (cancellation interrupts a
pending connect or read, whether the server drips bytes or sends nothing). Within a cell the calls also share one
CellBudget, so their sum is bounded too. Each call opens its own connection:
side calls are a few per cell, and no connection outlives the event loop that made it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from specbench.backends import server_text
from specbench.runs.deadlines import (
    CACHE_RESET_TIMEOUT_S,
    CELL_SIDE_TIMEOUT_S,
    INFO_TIMEOUT_S,
    METRICS_TIMEOUT_S,
)

if TYPE_CHECKING:
    from specbench.runs.sweep_config import SweepConfig

MAX_ANSWER_BYTES = 1 << 20  # a JSON side answer larger than this is refused (it would land in the manifest)
MAX_METRICS_BYTES = 64 << 20  # a /metrics page (histograms of a large deployment run to a few MB)


class ServerAnswerError(Exception):
    """One line naming the call: "GET /metrics: answered http 500"."""


class DeadlinePassed(ServerAnswerError):
    """The call had no complete answer by its deadline: "GET /metrics: no complete answer within 5 s"."""


@dataclass(frozen=True)
class SideDeadlines:
    """Seconds each kind of side call may take, connect to last byte; `cell_s`: all of one cell's together."""

    info_s: float = INFO_TIMEOUT_S
    metrics_s: float = METRICS_TIMEOUT_S
    cache_reset_s: float = CACHE_RESET_TIMEOUT_S
    cell_s: float = CELL_SIDE_TIMEOUT_S

    @classmethod
    def of(cls, config: SweepConfig) -> SideDeadlines:
        cell_s = max(CELL_SIDE_TIMEOUT_S, config.metrics_timeout, config.cache_reset_timeout)  # one call fits
        return cls(config.info_timeout, config.metrics_timeout, config.cache_reset_timeout, cell_s)


@dataclass
class CellBudget:
    """One cell's side calls: together at most `total_s`, and a call that let its deadline pass is not made again in
    the cell (a server dripping /metrics would take each later scrape's whole deadline too; the cell's counters
    need both ends of the window anyway)."""

    total_s: float
    spent_s: float = 0.0
    timed_out: set[str] = field(default_factory=set)  # calls ("GET /metrics") that passed their deadline

    def refusal(self, call: str) -> str | None:
        """Why `call` is not made (one line), else None."""
        if call in self.timed_out:
            return f"{call}: not asked again in this cell (no complete answer within its deadline before)"
        if self.spent_s >= self.total_s:
            return f"{call}: not asked: this cell's side calls used their {self.total_s:g} s"
        return None


@dataclass(frozen=True)
class Answer:
    call: str  # "GET /metrics": names the endpoint in every error
    status_code: int
    body: bytes  # the whole body (at most the call's max_bytes)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        try:
            return server_text.loads(self.body)  # lone surrogates replaced: answers are stored and printed
        except ValueError as err:  # JSONDecodeError and UnicodeDecodeError
            raise ServerAnswerError(f"{self.call}: the answer is not JSON ({err})") from None

    def raise_for_status(self) -> None:
        if self.status_code >= 400:
            raise ServerAnswerError(f"{self.call}: answered http {self.status_code}")


class DeadlineClient:
    """A synchronous facade: `get`/`post` return the whole Answer or raise ServerAnswerError (never httpx's)."""

    def __init__(self, base_url: str, headers: dict[str, str] | None = None,
                 deadlines: SideDeadlines = SideDeadlines()) -> None:
        self.base_url = base_url
        self.headers = dict(headers or {})
        self.deadlines = deadlines
        self.budget: CellBudget | None = None  # set per cell by start_cell; None: each call bounded alone

    def start_cell(self) -> None:
        """From here until the next start_cell, calls share one CellBudget of deadlines.cell_s."""
        self.budget = CellBudget(self.deadlines.cell_s)

    def get(self, path: str, deadline_s: float, max_bytes: int = MAX_ANSWER_BYTES) -> Answer:
        return self.request("GET", path, deadline_s, max_bytes=max_bytes)

    def post(self, path: str, deadline_s: float, json_body: Any = None, max_bytes: int = MAX_ANSWER_BYTES) -> Answer:
        return self.request("POST", path, deadline_s, json_body, max_bytes)

    def request(self, method: str, path: str, deadline_s: float, json_body: Any = None,
                max_bytes: int = MAX_ANSWER_BYTES) -> Answer:
        call = f"{method} {path}"
        budget = self.budget
        if budget is not None:
            refusal = budget.refusal(call)
            if refusal is not None:
                raise DeadlinePassed(refusal)
            deadline_s = min(deadline_s, budget.total_s - budget.spent_s)
        fetch = _fetch(self.base_url, self.headers, method, path, json_body, max_bytes)
        started = time.monotonic()
        try:
            return _run_sync(asyncio.wait_for(fetch, deadline_s))
        except (asyncio.TimeoutError, httpx.TimeoutException):
            if budget is not None:
                budget.timed_out.add(call)
            raise DeadlinePassed(f"{call}: no complete answer within {deadline_s:g} s") from None
        except _TooLarge:
            raise ServerAnswerError(f"{call}: the answer exceeds {max_bytes} bytes") from None
        except httpx.HTTPError as err:
            raise ServerAnswerError(f"{call}: {type(err).__name__}" + (f": {err}" if str(err) else "")) from None
        finally:
            if budget is not None:
                budget.spent_s += time.monotonic() - started

    def close(self) -> None:
        pass  # nothing held between calls


class _TooLarge(Exception):
    pass


async def _fetch(base_url: str, headers: dict[str, str], method: str, path: str, json_body: Any,
                 max_bytes: int) -> Answer:
    # httpx's per-operation timeouts are left off: the caller's wait_for is the one bound.
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=None, verify=_ssl_context()) as client:
        async with client.stream(method, path, json=json_body) as response:
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > max_bytes:
                    raise _TooLarge
            return Answer(f"{method} {path}", response.status_code, bytes(body))


@functools.cache
def _ssl_context():
    """httpx's default verifying context, built once (building it takes ~70 ms: a few side calls per cell)."""
    return httpx.create_ssl_context()


def _run_sync(coroutine):
    """asyncio.run, or on a worker thread where this thread already runs a loop (a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()

"""An OpenAI-compatible server as a benchmark backend: streamed requests timed on the client, counters per cell.

Client-side timing: arrival = when a request is sent (after its concurrency slot); each streamed chunk with text
is one emission, carrying the tokens the server reports per chunk (else re-tokenised, else one per chunk; see
token_counts.py). Acceptance comes from /metrics counter deltas over each cell's measured window.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import httpx

from specbench.backends.anomalies import Asked, counters_backwards, draft_anomalies, response_anomalies
from specbench.backends.base import CellWindow
from specbench.backends.cache_reset import CacheReset, PrefixCacheResetter
from specbench.backends.chat_stand_in import ServerChatTemplate
from specbench.backends.credentials import api_key_from_env, auth_headers, public_url, redact
from specbench.backends.deadline import DeadlineClient, SideDeadlines
from specbench.backends.http_stream import run_request
from specbench.backends.request_body import build_request
from specbench.backends.server_adapters import choose_adapter
from specbench.backends.prefix_cache import prefix_cache_window
from specbench.backends.server_info import read_server_info, scrape_prefix_cache, scrape_spec_counters
from specbench.backends.spec_counters import counter_delta
from specbench.backends.stream_state import StreamState
from specbench.backends.token_counts import count_tokens
from specbench.engine.outputs import RequestOutput
from specbench.engine.stats import RequestStats
from specbench.errors import SpecbenchError
from specbench.runs.cell_key import CellKey
from specbench.runs.finished_turn import FinishedTurn
from specbench.runs.sweep_config import SweepConfig
from specbench.runs.turns import Turn, TurnPlanner, TurnSettings
from specbench.workloads.base import Sample


def server_root(base_url: str) -> str:
    """`--base-url` may end in /v1 (OpenAI-client style); requests and /metrics are under the server root."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


class OpenAIBackend:
    name = "openai"
    has_draft_stats = False

    def __init__(self, config: SweepConfig, local_tokenizer: tuple[Any, bool] | None = None) -> None:
        """`local_tokenizer`: (tokenizer, can_tokenize) already loaded by the caller (one load per sweep)."""
        self.root = server_root(config.base_url or "")
        self._api_key = api_key_from_env(config.api_key_env)
        self.timeout_s = config.request_timeout
        self.tokenizer, self.can_tokenize = local_tokenizer or local_tokenizer_of(config)
        self._client = DeadlineClient(self.root, auth_headers(self._api_key), SideDeadlines.of(config))
        self.info = read_server_info(self._client, self._api_key)
        self.adapter, self.adapter_choice = choose_adapter(config.server_adapter, self.info.probe)
        # how output constraints are sent (backends/constraint_body.py): the detected server's own fields
        self.constraint_dialect = "openai" if self.adapter is None else self.adapter.name
        if config.server_model is not None:
            self.model = config.server_model
        elif self.info.models:
            self.model = self.info.models[0]
        else:
            why = self.info.models_error or "it lists no model"
            raise SpecbenchError(f"cannot read {public_url(self.root)}/v1/models ({why}); pass --model NAME")
        self._cache = PrefixCacheResetter(self._client)
        self._window_start = None
        self._window_note: str | None = None
        self._cache_start = None  # PrefixCacheReading at begin_window

    @property
    def api_key(self) -> str | None:
        return self._api_key

    def check_prompts(
        self, planner: TurnPlanner, samples: Sequence[Sample], config: SweepConfig, settings: TurnSettings
    ) -> None:
        if not samples:
            raise SpecbenchError(f"workload {config.workload} has no samples")
        for sample in samples:  # renders every first turn: template problems surface before anything is written
            planner.first_turn(sample, settings)

    @property
    def server_fault(self) -> str | None:
        return self.info.fault

    def manifest_entries(self, config: SweepConfig) -> dict[str, Any]:
        url = public_url(self.root)
        return {
            "backend": {
                "name": self.name,
                "base_url": url,
                "api_key_env": config.api_key_env,  # the variable's name; its value is never written
                "server": {
                    "model": self.model,
                    "models": list(self.info.models),
                    "models_error": self.info.models_error,
                    "version": self.info.version,
                    # its speculative config where it says it (server_info.py); labels a drafting k=0 cell
                    "speculative": None if self.info.speculation is None else dataclasses.asdict(self.info.speculation),
                    "adapter": None if self.adapter is None else self.adapter.name,
                    "adapter_choice": self.adapter_choice,
                },
                "tokenizer": _tokenizer_source(config) if self.can_tokenize else None,
            },
            "device": {"type": "remote", "name": url, "dtype": None},
            "kv_pool": None,
            "models": {"target": {"path": self.model, "weights_sha256": None}, "draft_source": config.engine.draft},
            "proposer": None,
            "engine_config": None,
        }

    def check_resume(self, run_dir: Path, manifest: dict[str, Any]) -> None:
        stored = (manifest.get("backend") or {}).get("server", {}).get("model")
        if stored != self.model:
            raise SpecbenchError(f"--resume {run_dir}: the run measured model {stored!r}, the server now serves "
                                 f"{self.model!r}")

    def start_cell(self, key: CellKey) -> None:
        self._client.start_cell()  # the cell's cache reset and /metrics scrapes share one deadline

    def reset_prefix_cache(self) -> CacheReset:
        return self._cache.reset()

    def run_turns(
        self,
        turns: Iterable[Turn],
        concurrency: int,
        *,
        id_prefix: str,
        next_turn: Callable[[Turn, str], Turn | None] = lambda turn, completion: None,
        on_finish: Callable[[FinishedTurn], None] | None = None,
    ) -> list[FinishedTurn]:
        return asyncio.run(self._run(turns, concurrency, id_prefix, next_turn, on_finish))

    async def _run(self, turns, concurrency, id_prefix, next_turn, on_finish) -> list[FinishedTurn]:
        """One task per conversation; a semaphore keeps `concurrency` requests in flight, and a conversation
        keeps its slot for its follow-up turns (as the embedded admission does)."""
        slots = asyncio.Semaphore(concurrency)
        counter = itertools.count()
        finished: list[FinishedTurn] = []
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        async with httpx.AsyncClient(base_url=self.root, headers=auth_headers(self._api_key), limits=limits,
                                     timeout=self.timeout_s) as client:

            async def conversation(turn: Turn | None) -> None:  # runs in an acquired slot; None once over
                try:
                    while turn is not None:
                        item = await self._one(client, turn, next(counter), id_prefix)
                        finished.append(item)
                        if on_finish is not None:
                            on_finish(item)
                        turn = next_turn(turn, item.output.text or "") if item.error is None else None
                finally:
                    slots.release()

            tasks = []
            source = iter(turns)
            while True:  # a first turn is pulled when a slot is free (a duration-bounded source ends on time)
                await slots.acquire()
                turn = next(source, None)
                if turn is None:
                    slots.release()
                    break
                if turn.scheduled_time is not None and turn.scheduled_time > time.perf_counter():
                    slots.release()  # wait for the arrival time without holding a slot, then for a slot
                    await asyncio.sleep(turn.scheduled_time - time.perf_counter())
                    await slots.acquire()
                tasks.append(asyncio.create_task(conversation(turn)))
            await asyncio.gather(*tasks)
        return finished

    async def _one(self, client: httpx.AsyncClient, turn: Turn, index: int, id_prefix: str) -> FinishedTurn:
        # Chat-template prompts go to /v1/chat/completions (the server renders the template); plain ones as text.
        is_chat = bool(turn.prompt.messages) and not turn.prompt.add_special_tokens
        state, error = await run_request(client, build_request(turn, self.model, chat=is_chat,
                                                                dialect=self.constraint_dialect), self.timeout_s)
        try:
            return self._finished(turn, index, id_prefix, state,
                                  None if error is None else redact(error, self._api_key))
        except (ValueError, TypeError, LookupError, ArithmeticError) as err:  # a response no check foresaw
            # fails alone: the sweep and the cell in flight go on, this request an error row without its numbers
            why = redact(f"unreadable: {type(err).__name__}: {err}", self._api_key)
            return self._finished(turn, index, id_prefix, StreamState(send_time=state.send_time), why)

    def _finished(self, turn: Turn, index: int, id_prefix: str, state: StreamState, error: str | None):
        tokenizer = self.tokenizer if self.can_tokenize else None
        asked = self._asked(turn)
        draft = self.adapter.request_draft(state.server_fields) if self.adapter is not None else None
        anomalies = response_anomalies(state, asked, tokenizer) if state.chunks else ()
        if not any(a.kind.is_fatal for a in anomalies):  # else the usage it would be compared with is false
            anomalies += draft_anomalies(draft, state, asked)
        fatal = next((a for a in anomalies if a.kind.is_fatal), None)
        if error is None and fatal is not None:
            error = str(fatal)  # an impossible report: an error row, its numbers counted from the text alone
        counts = count_tokens(state, tokenizer, use_usage=fatal is None)
        reported = state.prompt_tokens if fatal is None else None
        num_prompt = reported if reported is not None else len(turn.token_ids)
        stats = RequestStats(
            arrival_time=state.send_time if state.send_time is not None else time.perf_counter(),
            num_prompt_tokens=num_prompt,
            emission_times=list(counts.emission_times),
            tokens_per_emission=list(counts.tokens_per_emission),
            num_cached_prompt_tokens=_cached_prompt_tokens(state.cached_prompt_tokens, num_prompt) if fatal is None
            else None,
        )
        output = RequestOutput(
            request_id=f"{id_prefix}/{index}/{turn.sample.sample_id}/t{turn.turn_index}",
            prompt=turn.prompt.text,
            prompt_token_ids=turn.token_ids,
            output_token_ids=(),  # text only over HTTP
            text=state.answer_text,
            finish_reason=state.finish_reason,
            stats=stats,
        )
        return FinishedTurn(turn, output, index, error=error, token_count_source=counts.source,
                            is_usage_reported=state.is_usage_reported, has_draft_stats=False,
                            reasoning_text=state.reasoning_text or None,
                            server_draft=draft if fatal is None else None,
                            anomalies=tuple(map(str, anomalies)))

    def _asked(self, turn: Turn) -> Asked:
        prompt = turn.prompt
        size = max(len(turn.token_ids), len(prompt.token_ids or ()), len(prompt.text.encode()))
        return Asked(self.model, turn.params.max_tokens, size, turn.params.ignore_eos)

    def begin_window(self) -> None:
        self._window_start, self._window_note = self._scrape()
        self._cache_start = scrape_prefix_cache(self._client)

    def _scrape(self):
        return scrape_spec_counters(self._client, self.adapter, self.adapter_choice)

    def end_window(self) -> CellWindow:
        after, note = self._scrape()
        cache = prefix_cache_window(self._cache_start, scrape_prefix_cache(self._client))
        if self._window_note is not None or note is not None:
            return CellWindow((), None, self._window_note or note, self.info.speculation, prefix_cache=cache)
        delta, note = counter_delta(self._window_start, after)
        return CellWindow((), delta, note, self.info.speculation,
                          tuple(map(str, counters_backwards(self._window_start, after))), prefix_cache=cache)

    def close(self) -> None:
        self._client.close()


def _tokenizer_source(config: SweepConfig) -> str | None:
    if config.engine.tokenizer is not None:
        return config.engine.tokenizer
    return config.engine.target if config.engine.target != "default" else None


def local_tokenizer_of(config: SweepConfig):
    """(tokenizer, can_tokenize): the --tokenizer / --target one when given (exact prompt hashes, re-tokenising
    fallback), else a stand-in that only renders chat prompts for hashing (the server applies its template).
    A .gguf file gives the tokenizer embedded in it."""
    source = _tokenizer_source(config)
    if source is None:
        return ServerChatTemplate(), False
    from specbench.models.tokenizer import load_tokenizer

    path = Path(source)
    if path.suffix == ".gguf" and path.is_file():
        return load_tokenizer(path.parent, gguf_file=path.name), True
    return load_tokenizer(source), True


def _cached_prompt_tokens(reported: int | None, num_prompt: int) -> int | None:
    """The server's cached prompt tokens, where it is a count a prompt can hold (a negative or oversized one is not
    a number to record)."""
    return reported if reported is not None and 0 <= reported <= num_prompt else None

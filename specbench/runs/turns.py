"""Requests of a cell as conversation turns: prompt ids, sampling params, and the next turn after an answer."""

from __future__ import annotations

import dataclasses
import hashlib
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specbench.sampling_params import SamplingParams
from specbench.workloads.base import Prompt, Sample, Workload

if TYPE_CHECKING:
    from specbench.runs.cell_key import CellKey
    from specbench.runs.sweep_config import SweepConfig


@dataclass(frozen=True, slots=True)
class Turn:
    sample: Sample
    turn_index: int  # 0-based
    prompt: Prompt
    token_ids: tuple[int, ...]  # [num_prompt_tokens]; () over HTTP without a local tokenizer
    params: SamplingParams
    scheduled_time: float | None  # perf_counter arrival target (first turns under a finite rate), else None

    @property
    def prompt_sha256(self) -> str:
        """Of the token ids; without them (HTTP, no tokenizer) of the prompt text, prefixed "text:"."""
        if not self.token_ids:
            return hashlib.sha256(("text:" + self.prompt.text).encode()).hexdigest()
        return hashlib.sha256(" ".join(map(str, self.token_ids)).encode()).hexdigest()


@dataclass(frozen=True)
class TurnSettings:
    temperature: float | None  # None: the workload's per-sample default
    max_tokens: int | None
    top_p: float
    top_k: int
    chat_template: bool
    seed: int  # run seed; request seeds derive from (seed, repeat, sample, turn)
    repeat: int


def turn_settings(config: SweepConfig, key: CellKey, chat_template: bool) -> TurnSettings:
    """A cell's turn settings: the sweep's budget and sampling knobs at the cell's temperature and repeat."""
    return TurnSettings(
        temperature=key.temperature,
        max_tokens=config.max_tokens,
        top_p=config.top_p,
        top_k=config.top_k,
        chat_template=chat_template,
        seed=config.engine.seed,
        repeat=key.repeat,
    )


class TurnPlanner:
    """Renders and tokenizes turns for one workload; first-turn prompts are cached across cells."""

    def __init__(self, workload: Workload, tokenizer, *, tokenize: bool = True) -> None:
        """`tokenize` False: prompts keep no token ids (an HTTP server tokenises them; `tokenizer` only renders)."""
        self.workload = workload
        self.tokenizer = tokenizer
        self.tokenize = tokenize
        self._first: dict[tuple[str, bool], tuple[Prompt, tuple[int, ...]]] = {}

    def first_turn(self, sample: Sample, settings: TurnSettings, scheduled_time: float | None = None) -> Turn:
        key = (sample.sample_id, settings.chat_template)
        if key not in self._first:
            prompt = self.workload.first_prompt(sample, self.tokenizer, chat_template=settings.chat_template)
            self._first[key] = (prompt, self.encode(prompt))
        prompt, token_ids = self._first[key]
        return Turn(sample, 0, prompt, token_ids, self._params(sample, 0, settings), scheduled_time)

    def next_turn(self, turn: Turn, completion: str, settings: TurnSettings) -> Turn | None:
        prompt = self.workload.next_turn(
            turn.sample, turn.prompt, completion, self.tokenizer, chat_template=settings.chat_template
        )
        if prompt is None:
            return None
        index = turn.turn_index + 1
        return Turn(turn.sample, index, prompt, self.encode(prompt), self._params(turn.sample, index, settings), None)

    def encode(self, prompt: Prompt) -> tuple[int, ...]:
        if prompt.token_ids is not None:
            return tuple(prompt.token_ids)
        if not self.tokenize:
            return ()
        return tuple(self.tokenizer(prompt.text, add_special_tokens=prompt.add_special_tokens)["input_ids"])

    def _params(self, sample: Sample, turn_index: int, settings: TurnSettings) -> SamplingParams:
        # The same sample and turn get the same seed in every cell of a repeat, so cells differ only by k.
        seed = zlib.crc32(f"{settings.seed}/{settings.repeat}/{sample.sample_id}/{turn_index}".encode())
        params = self.workload.sampling_params(
            sample, temperature=settings.temperature, max_tokens=settings.max_tokens, seed=seed
        )
        return dataclasses.replace(params, top_p=settings.top_p, top_k=settings.top_k)

"""The workload plug point: boundary types (Sample, Prompt, Score, LoadedData) and the Workload Protocol."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from specbench.grammar.spec import GrammarSpec
from specbench.sampling_params import SamplingParams

INVALID_ANSWER = "[invalid]"  # lm-eval's regex-filter fallback when nothing matches
# The most text one row of a user's prompt file may hold, checked before anything is tokenised: 1M tokens (past
# any model's context) is ~4 MB of UTF-8; twice that is no prompt but a mistake (one 100 MB line took 12 GB)
MAX_ROW_BYTES = 8 << 20


@dataclass(frozen=True, slots=True)
class Message:
    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass(frozen=True, slots=True)
class FewShotExample:
    question: str
    answer: str  # full gold solution, calculator annotations and "#### N" included


@dataclass(frozen=True, slots=True)
class Sample:
    """One evaluation item. Self-contained: rendering and scoring need nothing else (shots included)."""

    sample_id: str  # stable across runs and limits (upstream id or dataset index)
    category: str  # per-category breakdowns group by this
    turns: tuple[str, ...] = ()  # user messages in order; gsm8k: (question,); random: ()
    subcategory: str | None = None  # spec_bench: the MT-Bench category inside "mt_bench"
    reference_answer: str | None = None  # gsm8k gold solution ("... #### 18")
    fewshot: tuple[FewShotExample, ...] = ()  # gsm8k shots in prompt order
    num_prompt_tokens: int | None = None  # random: fixed input length
    num_output_tokens: int | None = None  # random: fixed output length (ignore_eos)
    seed: int | None = None  # random: seed of the prompt token draw
    system: str | None = None  # file: system message sent before the first user turn
    max_tokens: int | None = None  # file: per-row max new tokens (--max-tokens overrides it)
    temperature: float | None = None  # file: per-row temperature (used when the grid temperature is 'default')
    is_raw_prompt: bool = False  # file: a `prompt` row, sent as plain text unless a chat template is applied
    grammar: GrammarSpec | None = None  # json_schema: the answer's constraint (carried into its SamplingParams)

    @property
    def num_turns(self) -> int:
        return max(len(self.turns), 1)


@dataclass(frozen=True, slots=True)
class Prompt:
    """What to send for one turn. `token_ids`, when set, is used instead of `text`."""

    text: str  # fully rendered (chat template already applied when asked)
    messages: tuple[Message, ...] = ()  # conversation so far, for chat backends; () for plain completions
    token_ids: tuple[int, ...] | None = None  # [num_prompt_tokens] random workload
    # False once a chat template rendered BOS & co into `text`: do not add them again when tokenizing.
    add_special_tokens: bool = True
    turn_index: int = 0  # 0-based; turn_index + 1 user turns have been asked


@dataclass(frozen=True, slots=True)
class Score:
    """GSM8K-style exact match under lm-eval's two filters."""

    gold_answer: str  # gold after exact_match normalisation
    strict_answer: str  # strict-match filter output, INVALID_ANSWER when nothing matched
    flexible_answer: str  # flexible-extract filter output
    strict_normalized: str  # what exact_match compares to gold_answer
    flexible_normalized: str
    is_strict_match: bool
    is_flexible_match: bool


@dataclass(frozen=True, slots=True)
class DataSource:
    """Where a workload reads its data files (resolved by `workloads.data.resolve_data_source`)."""

    data_dir: Path | None  # None: fall back to the Hugging Face hub where a workload has a hub id
    origin: str  # "--data-dir" | DATA_DIR_ENV (data.py) | "../shared/data" | "hub"
    searched: tuple[str, ...] = ()  # hub: where local data was looked for first, for the error when the hub fails


@dataclass(frozen=True, slots=True)
class DataFile:
    name: str  # path relative to the data root, e.g. "gsm8k/test.jsonl"
    sha256: str  # of the file bytes (hub rows: of their upstream-format JSONL serialisation)
    num_rows: int


@dataclass(frozen=True, slots=True)
class LoadedData:
    samples: tuple[Sample, ...]
    files: tuple[DataFile, ...]  # every file read, in read order
    source: str  # "local:<dir>", "hub:<id>" or "synthetic"

    @property
    def data_sha256(self) -> str:
        """One digest over all files used (name + sha256 per line); "" for synthetic data."""
        if not self.files:
            return ""
        lines = "".join(f"{f.name} {f.sha256}\n" for f in self.files)
        return hashlib.sha256(lines.encode()).hexdigest()


class Tokenizer(Protocol):
    """The part of a transformers tokenizer that workloads use."""

    def apply_chat_template(
        self, conversation: list[dict[str, str]], *, tokenize: bool, add_generation_prompt: bool, **kwargs: Any
    ) -> Any: ...


class Workload(Protocol):
    name: str
    version: str  # bump when prompts, data handling or scoring change
    is_chat: bool  # default for `chat_template` (conversational workloads)
    stop_strings: tuple[str, ...]

    def load(self, source: DataSource, limit: int | None, seed: int) -> LoadedData:
        """Read the samples once.

        Args:
            source: where data files live (see `workloads.data.resolve_data_source`).
            limit: keep `limit` samples (None: all): the first in dataset order, or for category workloads
                (mt_bench, spec_bench) a `seed`-drawn sample spread across categories, in dataset order.
            seed: run seed; only workloads with random content or a sampled `limit` use it.
        Raises:
            SpecbenchError: missing or malformed data.
        """

    def first_prompt(self, sample: Sample, tokenizer: Tokenizer | None, *, chat_template: bool) -> Prompt:
        """Render turn 1. `tokenizer` is needed only when `chat_template` is set (or for random ids)."""

    def next_turn(
        self, sample: Sample, previous: Prompt, completion: str, tokenizer: Tokenizer | None, *, chat_template: bool
    ) -> Prompt | None:
        """The next turn, asked with the model's own `completion` to `previous` in the history; None when done."""

    def sampling_params(
        self,
        sample: Sample,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> SamplingParams:
        """Protocol defaults for this sample; `temperature`/`max_tokens` override them when given."""

    def score(self, sample: Sample, completion: str) -> Score | None:
        """Accuracy of a final completion; None for speed-only workloads."""

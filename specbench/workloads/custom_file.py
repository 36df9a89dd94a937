"""`--workload file:PATH`: the user's own prompts (JSONL `prompt` / `messages`, or ShareGPT JSON).

Conversations are replayed turn by turn as MT-Bench is: each user turn is asked after the model's own answer to
the previous one (the file's assistant messages are not sent). Per-row `max_tokens` applies unless --max-tokens
is given; per-row `temperature` applies when the grid temperature is 'default' (else the grid's); `category`
groups categories.parquet.
"""

from __future__ import annotations

from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.sampling_params import SamplingParams
from specbench.workloads.base import DataFile, LoadedData, Message, Prompt, Sample, Score, Tokenizer
from specbench.workloads.chat import render_conversation, replay_next_turn
from specbench.workloads.base import DataSource
from specbench.workloads.prompt_file import PromptRow, read_prompt_file

DEFAULT_MAX_TOKENS = 256
DEFAULT_TEMPERATURE = 0.0


class PromptFileWorkload:
    name = "file"
    version = "1"
    stop_strings: tuple[str, ...] = ()  # chat models stop on EOS

    def __init__(self, path: str, max_tokens: int = DEFAULT_MAX_TOKENS) -> None:
        self.path = Path(path).expanduser()
        if not self.path.is_file():
            raise SpecbenchError(f"--workload file:{path}: no such file")
        self.max_tokens = max_tokens
        self.rows, self.sha256 = read_prompt_file(self.path)  # bounded: rows are checked before any tokenising
        # Chat template on by default when the file holds conversations (as for mt_bench).
        self.is_chat = not all(row.is_raw_prompt for row in self.rows)

    def load(self, source: DataSource, limit: int | None, seed: int) -> LoadedData:
        samples = tuple(_sample(row) for row in self.rows)
        data_file = DataFile(str(self.path), self.sha256, len(samples))
        return LoadedData(samples[:limit] if limit is not None else samples, (data_file,), f"file:{self.path}")

    def first_prompt(self, sample: Sample, tokenizer: Tokenizer | None, *, chat_template: bool) -> Prompt:
        if sample.is_raw_prompt and not chat_template:
            return Prompt(text=sample.turns[0])
        system = (Message("system", sample.system),) if sample.system is not None else ()
        return render_conversation(system + (Message("user", sample.turns[0]),), tokenizer,
                                   chat_template=chat_template)

    def next_turn(
        self, sample: Sample, previous: Prompt, completion: str, tokenizer: Tokenizer | None, *, chat_template: bool
    ) -> Prompt | None:
        return replay_next_turn(sample.turns, previous, completion, tokenizer, chat_template=chat_template)

    def sampling_params(
        self,
        sample: Sample,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> SamplingParams:
        if temperature is None:
            temperature = DEFAULT_TEMPERATURE if sample.temperature is None else sample.temperature
        return SamplingParams(
            temperature=temperature,
            max_tokens=max_tokens or sample.max_tokens or self.max_tokens,
            stop=self.stop_strings,
            seed=seed,
        )

    def score(self, sample: Sample, completion: str) -> Score | None:
        return None  # no reference answers: speed and acceptance only


def _sample(row: PromptRow) -> Sample:
    return Sample(
        sample_id=row.row_id,
        category=row.category,
        turns=row.user_turns,
        system=row.system,
        max_tokens=row.max_tokens,
        temperature=row.temperature,
        is_raw_prompt=row.is_raw_prompt,
    )

"""Multi-turn chat workloads over FastChat-format question files (`question_id`, `category`, `turns`)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from specbench.errors import SpecbenchError
from specbench.sampling_params import SamplingParams
from specbench.workloads.base import LoadedData, Message, Prompt, Sample, Score, Tokenizer
from specbench.workloads.chat import render_conversation, replay_next_turn
from specbench.workloads.data import DataFileSpec, RowError, field, read_rows
from specbench.workloads.base import DataSource


class Question(NamedTuple):
    question_id: int
    category: str
    turns: tuple[str, ...]


def parse_question(row: Mapping[str, Any]) -> Question:
    turns = field(row, "turns", list)
    if not turns or not all(isinstance(t, str) for t in turns):
        raise RowError("'turns' should be a non-empty list of strings")
    return Question(field(row, "question_id", int), field(row, "category", str), tuple(turns))


class ChatQuestionWorkload:
    """Turn k+1 is asked after the model's own (stripped) answer to turn k, as FastChat's gen_model_answer does.

    Subclasses set name/version/data_file and map questions to samples and default temperatures.
    """

    name: str
    version: str
    data_file: DataFileSpec
    is_chat = True
    stop_strings: tuple[str, ...] = ()  # chat models stop on EOS

    def __init__(self, max_tokens: int = 1024) -> None:
        if max_tokens < 1:
            raise SpecbenchError(f"max tokens must be >= 1, got {max_tokens}")
        self.max_tokens = max_tokens

    def make_sample(self, question: Question) -> Sample:
        raise NotImplementedError

    def default_temperature(self, sample: Sample) -> float:
        raise NotImplementedError

    def load(self, source: DataSource, limit: int | None, seed: int) -> LoadedData:
        questions, data_file, label = read_rows(source, self.data_file, parse_question)
        samples = tuple(self.make_sample(q) for q in questions)
        return LoadedData(sample_across_categories(samples, limit, seed), (data_file,), label)

    def first_prompt(self, sample: Sample, tokenizer: Tokenizer | None, *, chat_template: bool) -> Prompt:
        return render_conversation((Message("user", sample.turns[0]),), tokenizer, chat_template=chat_template)

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
        return SamplingParams(
            temperature=self.default_temperature(sample) if temperature is None else temperature,
            max_tokens=max_tokens or self.max_tokens,
            stop=self.stop_strings,
            seed=seed,
        )

    def score(self, sample: Sample, completion: str) -> Score | None:
        return None  # speed-only: MT-Bench quality needs an LLM judge, which specbench does not run


def sample_across_categories(samples: Sequence[Sample], limit: int | None, seed: int) -> tuple[Sample, ...]:
    """`limit` samples drawn round-robin over the categories (in order of first appearance), each category's
    order shuffled by `seed`; returned in dataset order. None or >= len(samples): all of them."""
    if limit is None or limit >= len(samples):
        return tuple(samples)
    by_category: dict[str, list[int]] = {}
    for index, sample in enumerate(samples):
        by_category.setdefault(sample.category, []).append(index)
    rng = random.Random(f"limit/{seed}")
    queues = [rng.sample(indices, len(indices)) for indices in by_category.values()]
    chosen: list[int] = []
    while len(chosen) < limit:
        for queue in queues:
            if queue and len(chosen) < limit:
                chosen.append(queue.pop())
    return tuple(samples[i] for i in sorted(chosen))

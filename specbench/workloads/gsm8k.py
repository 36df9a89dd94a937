"""GSM8K k-shot, replicating lm-eval's `gsm8k` task (v3.0): train-split shots, greedy, strict + flexible match."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from specbench.errors import SpecbenchError
from specbench.sampling_params import SamplingParams
from specbench.workloads.base import FewShotExample, LoadedData, Message, Prompt, Sample, Score, Tokenizer
from specbench.workloads.chat import apply_chat_template
from specbench.workloads.data import DataFileSpec, HubSplit, RowError, field, read_rows
from specbench.workloads.base import DataSource
from specbench.workloads.gsm8k_scoring import score_completion, truncate_at_stop

TEST_FILE = DataFileSpec("gsm8k/test.jsonl", HubSplit("openai/gsm8k", "main", "test"))
TRAIN_FILE = DataFileSpec("gsm8k/train.jsonl", HubSplit("openai/gsm8k", "main", "train"))
LM_EVAL_FEWSHOT_SEED = 1234
NUM_SHOTS = 5  # lm-eval gsm8k v3: 5-shot
MAX_TOKENS = 256  # lm-eval gsm8k v3: max_gen_toks


class Gsm8kDoc(NamedTuple):
    question: str
    answer: str


def parse_doc(row: Mapping[str, Any]) -> Gsm8kDoc:
    doc = Gsm8kDoc(field(row, "question", str), field(row, "answer", str))
    if "#### " not in doc.answer:
        raise RowError("answer has no '#### <number>' line")
    return doc


def select_fewshot(
    pool: Sequence[Gsm8kDoc], eval_docs: Sequence[Gsm8kDoc], num_shots: int, seed: int
) -> list[tuple[int, ...]]:
    """Pool indices of the shots of each eval doc, in prompt order."""
    if num_shots > len(pool):
        raise SpecbenchError(f"--shots {num_shots} exceeds the {len(pool)} available few-shot examples")
    rnd = random.Random(seed)
    in_pool = set(pool)
    selected: list[tuple[int, ...]] = []
    for doc in eval_docs:
        if num_shots == 0:
            selected.append(())
        elif doc in in_pool:
            drawn = rnd.sample(range(len(pool)), min(num_shots + 1, len(pool)))
            shots = tuple(i for i in drawn if pool[i] != doc)[:num_shots]
            if len(shots) < num_shots:
                raise SpecbenchError(f"--shots {num_shots} leaves no room to exclude the eval doc from the pool")
            selected.append(shots)
        else:
            selected.append(tuple(rnd.sample(range(len(pool)), num_shots)))
    return selected


def render_fewshot_text(sample: Sample) -> str:
    shots = "".join(f"Question: {s.question}\nAnswer: {s.answer}\n\n" for s in sample.fewshot)
    return f"{shots}Question: {sample.turns[0]}\nAnswer:"


class Gsm8kWorkload:
    """Shots: one `random.Random(fewshot_seed)` shared by all test docs taken in dataset order; each doc draws
    `num_shots` train indices with `rnd.sample`. lm-eval draws `num_shots + 1` and drops the eval doc when the
    few-shot split is the eval split; we do so for any eval doc found in the pool. No GSM8K test doc is in train,
    so every doc is a plain `num_shots` draw, as in lm-eval. Shots of doc i depend only on i: `--limit` changes
    which docs run, never their prompts.

    Chat template: the whole few-shot text is ONE user message, as lm-eval `--apply_chat_template` without
    `--fewshot_as_multiturn` does. With `--fewshot_as_multiturn` lm-eval instead sends each shot as a user
    "Question: ...\nAnswer:" / assistant "<solution>" pair; that variant is not offered.
    """

    name = "gsm8k"
    version = "1"  # prompt and scoring of lm-eval gsm8k v3.0
    is_chat = False
    stop_strings = ("Question:", "</s>", "<|im_end|>")

    def __init__(self, num_shots: int = NUM_SHOTS, fewshot_seed: int = LM_EVAL_FEWSHOT_SEED,
                 max_tokens: int = MAX_TOKENS) -> None:
        if num_shots < 0:
            raise SpecbenchError(f"--shots must be >= 0, got {num_shots}")
        if max_tokens < 1:
            raise SpecbenchError(f"max tokens must be >= 1, got {max_tokens}")
        self.num_shots = num_shots
        self.fewshot_seed = fewshot_seed
        self.max_tokens = max_tokens

    def load(self, source: DataSource, limit: int | None, seed: int) -> LoadedData:
        # `seed` is unused: shots follow lm-eval's own few-shot seed so scores stay comparable to lm-eval.
        test, test_file, label = read_rows(source, TEST_FILE, parse_doc)
        files = [test_file]
        test = test[:limit] if limit is not None else test
        train: list[Gsm8kDoc] = []
        if self.num_shots > 0:
            train, train_file, _ = read_rows(source, TRAIN_FILE, parse_doc)
            files.append(train_file)
        shot_indices = select_fewshot(train, test, self.num_shots, self.fewshot_seed)
        samples = tuple(
            Sample(
                sample_id=str(i),
                category="gsm8k",
                turns=(doc.question,),
                reference_answer=doc.answer,
                fewshot=tuple(FewShotExample(train[j].question, train[j].answer) for j in shots),
            )
            for i, (doc, shots) in enumerate(zip(test, shot_indices))
        )
        return LoadedData(samples, tuple(files), label)

    def first_prompt(self, sample: Sample, tokenizer: Tokenizer | None, *, chat_template: bool) -> Prompt:
        text = render_fewshot_text(sample)
        if not chat_template:
            return Prompt(text=text)
        messages = (Message("user", text),)
        return Prompt(apply_chat_template(tokenizer, messages), messages, add_special_tokens=False)

    def next_turn(
        self, sample: Sample, previous: Prompt, completion: str, tokenizer: Tokenizer | None, *, chat_template: bool
    ) -> Prompt | None:
        return None

    def sampling_params(
        self,
        sample: Sample,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> SamplingParams:
        return SamplingParams(
            temperature=0.0 if temperature is None else temperature,
            max_tokens=max_tokens or self.max_tokens,
            stop=self.stop_strings,
            seed=seed,
        )

    def score(self, sample: Sample, completion: str) -> Score | None:
        if sample.reference_answer is None:
            raise ValueError(f"gsm8k sample {sample.sample_id} has no reference answer")
        return score_completion(truncate_at_stop(completion, self.stop_strings), sample.reference_answer)

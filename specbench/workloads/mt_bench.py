"""MT-Bench (FastChat llm_judge): 80 questions x 2 turns in 8 categories, FastChat per-category temperatures."""

from __future__ import annotations

from specbench.workloads.base import Sample
from specbench.workloads.data import DataFileSpec
from specbench.workloads.questions import ChatQuestionWorkload, Question

# FastChat `temperature_config`; categories not listed get 0.7.
FASTCHAT_TEMPERATURES = {
    "writing": 0.7,
    "roleplay": 0.7,
    "extraction": 0.0,
    "math": 0.0,
    "coding": 0.0,
    "reasoning": 0.0,
    "stem": 0.1,
    "humanities": 0.1,
}
FASTCHAT_DEFAULT_TEMPERATURE = 0.7


class MtBenchWorkload(ChatQuestionWorkload):
    """max_tokens defaults to FastChat's --max-new-token 1024; a temperature override replaces every category's."""

    name = "mt_bench"
    version = "2"  # 2: --limit samples across categories (seeded), not the first N
    data_file = DataFileSpec("mt_bench/question.jsonl", hub=None)  # no hub copy in the upstream format

    def make_sample(self, question: Question) -> Sample:
        return Sample(sample_id=str(question.question_id), category=question.category, turns=question.turns)

    def default_temperature(self, sample: Sample) -> float:
        return FASTCHAT_TEMPERATURES.get(sample.category, FASTCHAT_DEFAULT_TEMPERATURE)

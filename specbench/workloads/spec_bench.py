"""Spec-Bench: 480 questions in its 6 categories (mt_bench, translation, summarization, qa, math_reasoning, rag)."""

from __future__ import annotations

from specbench.workloads.base import Sample
from specbench.workloads.data import DataFileSpec
from specbench.workloads.mt_bench import FASTCHAT_TEMPERATURES
from specbench.workloads.questions import ChatQuestionWorkload, Question

MT_BENCH_CATEGORY = "mt_bench"


class SpecBenchWorkload(ChatQuestionWorkload):
    """The 80 MT-Bench questions (2 turns each) form the "mt_bench" category, their own category kept as
    `subcategory`; the other 400 have one turn. Greedy for every category, 1024 new tokens, as Spec-Bench runs."""

    name = "spec_bench"
    version = "2"  # 2: --limit samples across categories (seeded), not the first N
    data_file = DataFileSpec("spec_bench/question.jsonl", hub=None)

    def make_sample(self, question: Question) -> Sample:
        is_mt_bench = question.category in FASTCHAT_TEMPERATURES
        return Sample(
            sample_id=str(question.question_id),
            category=MT_BENCH_CATEGORY if is_mt_bench else question.category,
            turns=question.turns,
            subcategory=question.category if is_mt_bench else None,
        )

    def default_temperature(self, sample: Sample) -> float:
        return 0.0

"""MT-Bench and Spec-Bench: loading, categories, multi-turn history, sampling defaults."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from specbench.workloads.chat import VICUNA_SYSTEM
from specbench.workloads.data import resolve_data_source
from specbench.workloads.mt_bench import MtBenchWorkload
from specbench.workloads.spec_bench import SpecBenchWorkload

SHARED_DATA = Path(os.environ.get("SPECBENCH_DATA_DIR") or Path(__file__).resolve().parents[3] / "shared" / "data")
MT_BENCH_CATEGORIES = {"writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"}


class FakeChatTokenizer:
    def apply_chat_template(self, conversation, tools=None, *, tokenize=True, add_generation_prompt=False, **kwargs):
        assert tokenize is False and add_generation_prompt is True
        return "".join(f"[{m['role']}]{m['content']}" for m in conversation) + "[assistant]"


@pytest.fixture(scope="module")
def source():
    if not (SHARED_DATA / "mt_bench" / "question.jsonl").is_file():
        pytest.skip(f"shared MT-Bench / Spec-Bench data not found under {SHARED_DATA}")
    return resolve_data_source(SHARED_DATA)


def test_mt_bench_loads_80_questions_in_8_categories_of_2_turns(source):
    loaded = MtBenchWorkload().load(source, None, seed=0)
    samples = loaded.samples
    assert len(samples) == 80
    assert Counter(s.category for s in samples) == {c: 10 for c in MT_BENCH_CATEGORIES}
    assert all(len(s.turns) == 2 for s in samples)
    assert [s.sample_id for s in samples] == [str(i) for i in range(81, 161)]
    assert [f.name for f in loaded.files] == ["mt_bench/question.jsonl"]
    # --limit: a seeded sample spread over the categories, in dataset order
    limited = MtBenchWorkload().load(source, 8, seed=0).samples
    assert len({s.category for s in limited}) == 8 and list(limited) == [s for s in samples if s in limited]


def test_mt_bench_turn_two_carries_the_models_own_answer(source):
    workload = MtBenchWorkload()
    sample = workload.load(source, 1, seed=0).samples[0]
    tokenizer = FakeChatTokenizer()
    first = workload.first_prompt(sample, tokenizer, chat_template=True)
    assert first.text == f"[user]{sample.turns[0]}[assistant]"
    assert first.turn_index == 0 and not first.add_special_tokens

    second = workload.next_turn(sample, first, "  My travel blog.\n", tokenizer, chat_template=True)
    assert second is not None and second.turn_index == 1
    assert [(m.role, m.content) for m in second.messages] == [
        ("user", sample.turns[0]),
        ("assistant", "My travel blog."),  # stripped, as FastChat post-processes answers
        ("user", sample.turns[1]),
    ]
    assert second.text == f"[user]{sample.turns[0]}[assistant]My travel blog.[user]{sample.turns[1]}[assistant]"
    assert workload.next_turn(sample, second, "done", tokenizer, chat_template=True) is None


def test_plain_rendering_is_vicuna_v1_1(source):
    workload = MtBenchWorkload()
    sample = workload.load(source, 1, seed=0).samples[0]
    first = workload.first_prompt(sample, None, chat_template=False)
    assert first.text == f"{VICUNA_SYSTEM} USER: {sample.turns[0]} ASSISTANT:"
    second = workload.next_turn(sample, first, "A1", None, chat_template=False)
    assert second is not None
    assert second.text == f"{VICUNA_SYSTEM} USER: {sample.turns[0]} ASSISTANT: A1</s>USER: {sample.turns[1]} ASSISTANT:"


def test_mt_bench_temperatures_follow_fastchat(source):
    workload = MtBenchWorkload()
    expected = {"writing": 0.7, "roleplay": 0.7, "extraction": 0.0, "math": 0.0, "coding": 0.0,
                "reasoning": 0.0, "stem": 0.1, "humanities": 0.1}
    seen = {}
    for sample in workload.load(source, None, seed=0).samples:
        params = workload.sampling_params(sample)
        seen[sample.category] = params.temperature
        assert params.max_tokens == 1024 and params.stop == ()
        assert workload.sampling_params(sample, temperature=0.0, max_tokens=64).temperature == 0.0
    assert seen == expected
    assert MtBenchWorkload(max_tokens=300).sampling_params(sample).max_tokens == 300
    assert workload.score(sample, "anything") is None


def test_spec_bench_loads_480_questions_in_its_6_categories(source):
    samples = SpecBenchWorkload().load(source, None, seed=0).samples
    assert len(samples) == 480
    counts = Counter(s.category for s in samples)
    assert counts == {c: 80 for c in ("mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag")}
    mt = [s for s in samples if s.category == "mt_bench"]
    assert Counter(s.subcategory for s in mt) == {c: 10 for c in MT_BENCH_CATEGORIES}
    assert all(len(s.turns) == 2 for s in mt)
    assert all(len(s.turns) == 1 and s.subcategory is None for s in samples if s.category != "mt_bench")
    assert {SpecBenchWorkload().sampling_params(s).temperature for s in samples} == {0.0}


def test_spec_bench_single_turn_question_ends_after_turn_one(source):
    workload = SpecBenchWorkload()
    sample = next(s for s in workload.load(source, None, seed=0).samples if s.category == "translation")
    first = workload.first_prompt(sample, FakeChatTokenizer(), chat_template=True)
    assert workload.next_turn(sample, first, "answer", FakeChatTokenizer(), chat_template=True) is None

"""GSM8K few-shot prompt construction: exact format, lm-eval shot order, determinism, chat template."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from specbench.errors import SpecbenchError
from specbench.workloads.data import resolve_data_source
from specbench.workloads.gsm8k import Gsm8kWorkload

SHARED_DATA = Path(os.environ.get("SPECBENCH_DATA_DIR") or Path(__file__).resolve().parents[3] / "shared" / "data")


class FakeChatTokenizer:
    """transformers-compatible `apply_chat_template` rendering a visible, easily checked format."""

    def __init__(self) -> None:
        self.conversations: list[list[dict[str, str]]] = []

    def apply_chat_template(self, conversation, tools=None, *, tokenize=True, add_generation_prompt=False, **kwargs):
        assert tokenize is False
        self.conversations.append(conversation)
        text = "<s>" + "".join(f"<|{m['role']}|>{m['content']}<|end|>" for m in conversation)
        return text + ("<|assistant|>" if add_generation_prompt else "")


def _write_gsm8k(root: Path, train: list[tuple[str, str]], test: list[tuple[str, str]]) -> Path:
    (root / "gsm8k").mkdir(parents=True)
    for name, rows in (("train", train), ("test", test)):
        lines = "".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in rows)
        (root / "gsm8k" / f"{name}.jsonl").write_text(lines)
    return root


def _rows(prefix: str, n: int) -> list[tuple[str, str]]:
    return [(f"{prefix} question {i}?", f"{prefix} step {i}\n#### {i}") for i in range(n)]


@pytest.fixture
def tiny_source(tmp_path):
    return resolve_data_source(_write_gsm8k(tmp_path, _rows("train", 12), _rows("test", 6)))


@pytest.fixture
def shared_source():
    if not (SHARED_DATA / "gsm8k" / "train.jsonl").is_file():
        pytest.skip(f"shared GSM8K data not found under {SHARED_DATA}")
    return resolve_data_source(SHARED_DATA)


def test_rendered_prompt_has_the_lm_eval_format(tiny_source):
    workload = Gsm8kWorkload()
    sample = workload.load(tiny_source, None, seed=0).samples[2]
    prompt = workload.first_prompt(sample, None, chat_template=False)

    blocks = prompt.text.split("\n\n")
    assert len(blocks) == 6  # 5 shots + the question (answers hold no blank line)
    train = dict(_rows("train", 12))
    for block, shot in zip(blocks[:5], sample.fewshot):
        assert block == f"Question: {shot.question}\nAnswer: {shot.answer}"
        assert train[shot.question] == shot.answer  # a real train pair, full solution
    assert blocks[5] == "Question: test question 2?\nAnswer:"
    assert prompt.messages == () and prompt.token_ids is None and prompt.add_special_tokens
    assert len({s.question for s in sample.fewshot}) == 5


def test_shots_match_lm_eval_for_docs_0_and_4(shared_source):
    # Openings of the shot questions in lm-eval's gsm8k 5-shot prompts for test docs 0 and 4, as
    # published in prompts rendered by lm-eval (shared Random(1234), docs in dataset order).
    expected = {
        0: ["Jen and Tyler are gymnasts", "Four people in a law firm", "A charcoal grill burns",
            "A bear is preparing to hibernate", "Brendan can cut 8 yards"],
        4: ["Surfers enjoy going to the Rip", "Tim takes his 3 children", "Jerry is cutting up wood",
            "Luther designs clothes", "At Rainbow Preschool"],
    }
    workload = Gsm8kWorkload()
    samples = workload.load(shared_source, 5, seed=0).samples
    for index, openings in expected.items():
        shots = [s.question for s in samples[index].fewshot]
        assert [q[: len(o)] for q, o in zip(shots, openings)] == openings
    text = workload.first_prompt(samples[0], None, chat_template=False).text
    assert text.startswith("Question: Jen and Tyler are gymnasts practicing flips.")
    assert text.endswith("How much in dollars does she make every day at the farmers' market?\nAnswer:")


def test_shots_are_deterministic_and_independent_of_limit(tiny_source):
    full = Gsm8kWorkload().load(tiny_source, None, seed=0).samples
    again = Gsm8kWorkload().load(tiny_source, None, seed=99).samples  # run seed does not move shots
    limited = Gsm8kWorkload().load(tiny_source, 3, seed=0).samples
    assert full == again
    assert limited == full[:3]
    other_seed = Gsm8kWorkload(fewshot_seed=7).load(tiny_source, None, seed=0).samples
    assert [s.fewshot for s in other_seed] != [s.fewshot for s in full]
    assert len({s.fewshot for s in full}) > 1  # the shared RNG gives each doc its own shots


def test_shots_never_include_the_eval_doc(tmp_path):
    rows = _rows("same", 7)  # few-shot pool == eval split: every eval doc is in the pool
    source = resolve_data_source(_write_gsm8k(tmp_path, rows, rows))
    samples = Gsm8kWorkload(num_shots=5).load(source, None, seed=0).samples
    for sample in samples:
        questions = [s.question for s in sample.fewshot]
        assert len(questions) == len(set(questions)) == 5
        assert sample.turns[0] not in questions


def test_zero_shots_reads_no_train_file(tiny_source):
    loaded = Gsm8kWorkload(num_shots=0).load(tiny_source, 2, seed=0)
    assert [f.name for f in loaded.files] == ["gsm8k/test.jsonl"]
    prompt = Gsm8kWorkload(num_shots=0).first_prompt(loaded.samples[1], None, chat_template=False)
    assert prompt.text == "Question: test question 1?\nAnswer:"


def test_too_many_shots_is_a_user_error(tiny_source):
    with pytest.raises(SpecbenchError, match="--shots 13"):
        Gsm8kWorkload(num_shots=13).load(tiny_source, None, seed=0)
    with pytest.raises(SpecbenchError):
        Gsm8kWorkload(num_shots=-1)


def test_chat_template_wraps_the_whole_fewshot_text_in_one_user_turn(tiny_source):
    workload = Gsm8kWorkload()
    sample = workload.load(tiny_source, 1, seed=0).samples[0]
    plain = workload.first_prompt(sample, None, chat_template=False).text
    tokenizer = FakeChatTokenizer()
    prompt = workload.first_prompt(sample, tokenizer, chat_template=True)
    assert tokenizer.conversations == [[{"role": "user", "content": plain}]]
    assert prompt.text == f"<s><|user|>{plain}<|end|><|assistant|>"
    assert [(m.role, m.content) for m in prompt.messages] == [("user", plain)]
    assert not prompt.add_special_tokens  # the template already rendered BOS


def test_chat_template_without_tokenizer_template_is_a_user_error(tiny_source):
    class NoTemplate:
        def apply_chat_template(self, conversation, **kwargs):
            raise ValueError("tokenizer.chat_template is not set")

    workload = Gsm8kWorkload()
    sample = workload.load(tiny_source, 1, seed=0).samples[0]
    with pytest.raises(SpecbenchError, match="chat template"):
        workload.first_prompt(sample, NoTemplate(), chat_template=True)


def test_sampling_and_turns(tiny_source):
    workload = Gsm8kWorkload()
    sample = workload.load(tiny_source, 1, seed=0).samples[0]
    params = workload.sampling_params(sample)
    assert (params.temperature, params.max_tokens, params.stop) == (0.0, 256, ("Question:", "</s>", "<|im_end|>"))
    assert workload.sampling_params(sample, temperature=0.5, max_tokens=64).temperature == 0.5
    prompt = workload.first_prompt(sample, None, chat_template=False)
    assert workload.next_turn(sample, prompt, "#### 1", None, chat_template=False) is None

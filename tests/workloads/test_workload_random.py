"""Random-token workload: fixed lengths, seeded ids, special tokens excluded, the acceptance warning."""

from __future__ import annotations

import pytest

from specbench.errors import SpecbenchError
from specbench.workloads.base import DataSource
from specbench.workloads.random_tokens import RandomTokensWarning, RandomTokensWorkload

NO_DATA = DataSource(None, "hub")


class FakeTokenizer:
    all_special_ids = [0, 1, 2]

    def __len__(self) -> int:
        return 10


def _load(workload, limit=None, seed=0):
    with pytest.warns(RandomTokensWarning, match="say nothing about a real drafter"):
        return workload.load(NO_DATA, limit, seed)


def test_lengths_and_sampling():
    workload = RandomTokensWorkload(input_len=17, output_len=9, num_prompts=5, vocab_size=1000)
    loaded = _load(workload)
    assert len(loaded.samples) == 5 and loaded.files == () and loaded.data_sha256 == ""
    for sample in loaded.samples:
        prompt = workload.first_prompt(sample, None, chat_template=False)
        assert prompt.token_ids is not None and len(prompt.token_ids) == 17
        assert all(0 <= t < 1000 for t in prompt.token_ids)
        params = workload.sampling_params(sample)
        assert params.ignore_eos and params.max_tokens == 9
        assert workload.next_turn(sample, prompt, "", None, chat_template=False) is None
        assert workload.score(sample, "x") is None


def test_ids_are_seeded_and_independent_of_limit():
    workload = RandomTokensWorkload(input_len=32, num_prompts=4, vocab_size=50_000)

    def ids(limit, seed):
        samples = _load(workload, limit, seed).samples
        return [workload.first_prompt(s, None, chat_template=False).token_ids for s in samples]

    full = ids(None, 3)
    assert ids(None, 3) == full
    assert ids(2, 3) == full[:2]
    assert ids(None, 4) != full
    assert len(set(full)) == 4


def test_tokenizer_vocab_without_special_ids():
    workload = RandomTokensWorkload(input_len=200, num_prompts=1)
    sample = _load(workload).samples[0]
    ids = set(workload.first_prompt(sample, FakeTokenizer(), chat_template=False).token_ids)
    assert ids <= set(range(3, 10)) and len(ids) > 1


def test_user_errors():
    workload = RandomTokensWorkload(num_prompts=1)
    sample = _load(workload).samples[0]
    with pytest.raises(SpecbenchError, match="tokenizer or an explicit vocab size"):
        workload.first_prompt(sample, None, chat_template=False)
    with pytest.raises(SpecbenchError, match="chat_template"):
        workload.first_prompt(sample, FakeTokenizer(), chat_template=True)
    with pytest.raises(SpecbenchError, match="input length"):
        RandomTokensWorkload(input_len=0)

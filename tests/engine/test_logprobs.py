"""Output and prompt logprobs are the target's raw distribution at the row predicting each token: the same at k > 0
(accepted, recovered and bonus tokens, under preemption) as at k = 0, and equal to a fresh HF forward."""

from __future__ import annotations

import pytest
import torch

from specbench import LLM, SamplingParams
from specbench.errors import SpecbenchError

MAX_TOKENS = 16
TOP = 4
TOL = 1e-5
PARAMS = SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True, logprobs=TOP, prompt_logprobs=2)


def _run(target, prompts, **kwargs):
    llm = LLM(target, dtype="fp32", device="cpu", block_size=4, max_concurrency=4, **kwargs)
    return llm.generate(prompts, PARAMS)


@pytest.fixture(scope="module")
def prompts(prompt_ids):
    return prompt_ids


@pytest.fixture(scope="module")
def plain(tiny_pair, prompts):
    return _run(tiny_pair[0], prompts, async_scheduling=False)


@pytest.fixture(scope="module")
def hf_logprobs(tiny_pair, prompts, plain):
    """[per request] log_softmax of one fresh HF forward over prompt + output: [num_tokens, vocab]."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_pair[0], dtype=torch.float32).eval()
    tables = []
    with torch.no_grad():
        for o in plain:
            ids = torch.tensor([list(o.prompt_token_ids) + list(o.output_token_ids)])
            tables.append(torch.log_softmax(model(ids).logits[0].float(), dim=-1))
    return tables


def _assert_close(got, expected, label):
    assert len(got) == len(expected), label
    for i, (a, b) in enumerate(zip(got, expected)):
        if a is None or b is None:
            assert a is b is None, (label, i)
            continue
        assert a.token_id == b.token_id and a.rank == b.rank, (label, i)
        assert abs(a.logprob - b.logprob) < TOL, (label, i, a.logprob, b.logprob)
        assert [t for t, _ in a.top] == [t for t, _ in b.top], (label, i)
        assert max(abs(x - y) for (_, x), (_, y) in zip(a.top, b.top)) < TOL, (label, i)


def test_plain_logprobs_equal_a_fresh_hf_forward(plain, hf_logprobs):
    for o, table in zip(plain, hf_logprobs):
        num_prompt = len(o.prompt_token_ids)
        assert len(o.logprobs) == len(o.output_token_ids) == MAX_TOKENS
        for i, entry in enumerate(o.logprobs):
            row = table[num_prompt - 1 + i]  # the row that predicts output token i
            assert entry.token_id == o.output_token_ids[i]
            assert abs(entry.logprob - row[entry.token_id].item()) < TOL
            values, ids = row.topk(TOP)
            assert [t for t, _ in entry.top] == ids.tolist()
            assert max(abs(a - b) for (_, a), b in zip(entry.top, values.tolist())) < TOL
            # greedy: the chosen token is the most likely one; the list is sorted, most likely first
            assert entry.top[0][0] == entry.token_id and entry.rank == 1
            assert all(a[1] >= b[1] for a, b in zip(entry.top, entry.top[1:]))
        assert len(o.prompt_logprobs) == num_prompt and o.prompt_logprobs[0] is None
        for p in range(1, num_prompt):
            entry = o.prompt_logprobs[p]
            assert entry.token_id == o.prompt_token_ids[p]
            assert abs(entry.logprob - table[p - 1][entry.token_id].item()) < TOL
            assert len(entry.top) == 2 and entry.top[0][1] >= entry.logprob - TOL
            assert entry.rank == 1 + int((table[p - 1] > table[p - 1][entry.token_id]).sum())


def test_overlapped_plain_decoding_gives_the_same_logprobs(tiny_pair, prompts, plain):
    for got, ref in zip(_run(tiny_pair[0], prompts, async_scheduling=True), plain):
        _assert_close(got.logprobs, ref.logprobs, "async k=0")
        _assert_close(got.prompt_logprobs, ref.prompt_logprobs, "async k=0 prompt")


@pytest.mark.parametrize(("method", "num_steps"), [("ngram", 2), ("draft", 3)])
def test_speculative_logprobs_equal_plain_under_preemption(tiny_pair, prompts, plain, method, num_steps):
    target, draft = tiny_pair
    # 20 blocks of 4 tokens cannot hold 4 concurrent requests growing by 16 + k: running requests are preempted
    outs = _run(target, prompts, method=method, max_num_steps=num_steps, num_kv_blocks=20,
                draft=draft if method == "draft" else None, ngram_min=1, ngram_max=3)
    assert sum(o.stats.num_preemptions for o in outs) > 0, "the pool was sized to force preemption"
    rounds = [a for o in outs for a in o.stats.accepted_per_round]
    assert 0 in rounds and max(rounds) > 0, "rounds with recovered and accepted tokens"
    for got, ref in zip(outs, plain):
        assert got.output_token_ids == ref.output_token_ids
        _assert_close(got.logprobs, ref.logprobs, f"{method} k={num_steps}")
        _assert_close(got.prompt_logprobs, ref.prompt_logprobs, f"{method} k={num_steps} prompt")


def test_logprobs_are_absent_unless_asked(tiny_pair, prompts):
    llm = LLM(tiny_pair[0], dtype="fp32", device="cpu", block_size=4, max_concurrency=4)
    mixed = [SamplingParams(max_tokens=4, ignore_eos=True, logprobs=0),
             SamplingParams(max_tokens=4, ignore_eos=True)]
    a, b = llm.generate(prompts[:2], mixed)
    assert len(a.logprobs) == 4 and all(e.top == () for e in a.logprobs) and a.prompt_logprobs is None
    assert b.logprobs is None and b.prompt_logprobs is None


@pytest.mark.parametrize("field", ["logprobs", "prompt_logprobs"])
@pytest.mark.parametrize("value", [-1, 21])
def test_limits_are_declared_once(field, value):
    with pytest.raises(SpecbenchError, match=field):
        SamplingParams(**{field: value})


def test_the_default_path_computes_no_logprobs(tiny_pair, prompts, monkeypatch):
    """No request asks: no logprob table is built (no extra device work, no extra device->host copy)."""
    from specbench.engine import step_runner

    def refuse(*args, **kwargs):
        raise AssertionError("logprobs computed although no request asked")

    monkeypatch.setattr(step_runner, "logprob_table", refuse)
    monkeypatch.setattr(step_runner, "prompt_logprobs_of", refuse)
    monkeypatch.setattr(step_runner, "raw_logprobs", refuse)
    llm = LLM(tiny_pair[0], dtype="fp32", device="cpu", block_size=4, max_concurrency=4, method="draft",
              draft=tiny_pair[1], max_num_steps=2)
    outs = llm.generate(prompts[:2], SamplingParams(max_tokens=6, ignore_eos=True))
    assert all(o.logprobs is None and len(o.output_token_ids) == 6 for o in outs)


def test_a_one_token_prompt_has_only_the_none_entry(tiny_pair):
    llm = LLM(tiny_pair[0], dtype="fp32", device="cpu", block_size=4, max_concurrency=4)
    (out,) = llm.generate([[7]], SamplingParams(max_tokens=2, ignore_eos=True, logprobs=1, prompt_logprobs=3))
    assert out.prompt_logprobs == (None,) and len(out.logprobs) == 2


def test_a_row_shift_mutant_corrupts_speculative_logprobs_only(tiny_pair, prompts, plain):
    """The logprobs-row-shift mutant (vLLM #34497's class): tokens stay identical, logprobs move; plain decoding is
    unaffected. What a logprobs check (k > 0 vs k = 0) must catch."""
    from specbench.config import EngineConfig
    from specbench.engine.llm_engine import LLMEngine
    from specbench.faults.logprobs_row_shift import LogprobsRowShift

    def run(**kwargs):
        config = EngineConfig(target=tiny_pair[0], dtype="fp32", device="cpu", block_size=4, max_concurrency=4,
                              **kwargs)
        engine = LLMEngine(config, hooks=LogprobsRowShift())
        ids = [engine.add_request(p, PARAMS) for p in prompts]
        by_id = {o.request_id: o for o in engine.run_until_done()}
        return [by_id[i] for i in ids]

    for got, ref in zip(run(), plain):
        _assert_close(got.logprobs, ref.logprobs, "mutant k=0")
    spec = run(method="draft", draft=tiny_pair[1], max_num_steps=3)
    assert [o.output_token_ids for o in spec] == [o.output_token_ids for o in plain]
    num_moved = sum(abs(a.logprob - b.logprob) > 1e-3 for got, ref in zip(spec, plain)
                    for a, b in zip(got.logprobs, ref.logprobs))
    assert num_moved > 0

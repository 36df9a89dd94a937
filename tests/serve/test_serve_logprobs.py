"""`specbench serve` logprobs over HTTP: OpenAI's completions and chat shapes, streamed and whole, and vLLM's
prompt_logprobs, equal to a fresh HF forward of the target although the server speculates (a draft LM, k = 3)."""

from __future__ import annotations

import json

import httpx
import pytest
import torch

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

MAX_TOKENS = 10
TOL = 1e-4  # the engine vs HF in fp32 (the engine tests hold 1e-5; JSON round trips floats exactly)


@pytest.fixture(scope="module")
def server(tiny_model_dir, tiny_draft_dir):
    from specbench.config import EngineConfig
    from specbench.serve import ServeConfig, start_server

    engine = EngineConfig(target=str(tiny_model_dir), method="draft", draft=str(tiny_draft_dir), max_num_steps=3,
                          device="cpu", kv_cache_gb=0.02, max_model_len=256)
    with start_server(ServeConfig(engine, served_model_name="tiny")) as running:
        yield running


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def prompt_ids(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    return tok("Question: 3 + 4 is 7 and 4 + 3 is 7 and 3 + 4 is")["input_ids"]


@pytest.fixture(scope="module")
def hf(tiny_model_dir, prompt_ids):
    """(greedy output ids, log_softmax rows [num_prompt + MAX_TOKENS, vocab]) from HF transformers."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None
    x = torch.tensor([prompt_ids])
    with torch.no_grad():
        y = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=MAX_TOKENS, do_sample=False,
                           pad_token_id=0)
        table = torch.log_softmax(model(y).logits[0].float(), dim=-1)
    return y[0, len(prompt_ids):].tolist(), table


def _completion(prompt_ids, **fields):
    return {"prompt": prompt_ids, "max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True, **fields}


def _chunks(response: httpx.Response) -> list[dict]:
    assert response.status_code == 200, response.text
    lines = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def test_completions_logprobs_equal_a_fresh_forward(server, client, prompt_ids, hf):
    output_ids, table = hf
    body = client.post("/v1/completions", json=_completion(prompt_ids, logprobs=3, prompt_logprobs=2)).json()
    assert sum(s.num_accepted_tokens for s in server.loop.engine.step_stats) > 0, "accepted drafts were reported"
    choice = body["choices"][0]
    logprobs = choice["logprobs"]
    assert set(logprobs) == {"tokens", "token_logprobs", "top_logprobs", "text_offset"}
    assert len(logprobs["tokens"]) == len(logprobs["token_logprobs"]) == MAX_TOKENS
    num_prompt = len(prompt_ids)
    for i, (token, lp, top) in enumerate(zip(logprobs["tokens"], logprobs["token_logprobs"],
                                             logprobs["top_logprobs"])):
        assert abs(lp - table[num_prompt - 1 + i][output_ids[i]].item()) < TOL
        assert len(top) <= 3 and abs(max(top.values()) - lp) < TOL  # greedy: the chosen token is the top one
        assert top.get(token) == lp or token not in top
    assert logprobs["text_offset"][0] == 0
    assert all(b - a == len(t) for a, b, t in zip(logprobs["text_offset"], logprobs["text_offset"][1:],
                                                    logprobs["tokens"]))
    prompt = choice["prompt_logprobs"]
    assert len(prompt) == num_prompt and prompt[0] is None
    for p in range(1, num_prompt):
        entry = prompt[p][str(prompt_ids[p])]
        assert abs(entry["logprob"] - table[p - 1][prompt_ids[p]].item()) < TOL
        assert entry["rank"] >= 1 and 2 <= len(prompt[p]) <= 3


def test_streamed_completions_carry_the_same_logprobs(client, prompt_ids):
    fields = {"logprobs": 2, "prompt_logprobs": 1}
    whole = client.post("/v1/completions", json=_completion(prompt_ids, **fields)).json()["choices"][0]
    chunks = _chunks(client.post("/v1/completions", json=_completion(prompt_ids, stream=True, **fields)))
    streamed = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    for chunk in chunks:
        logprobs = chunk["choices"][0]["logprobs"]
        for key in streamed if logprobs is not None else ():
            streamed[key] += logprobs[key]
    assert streamed == whole["logprobs"]
    prompts = [c["choices"][0]["prompt_logprobs"] for c in chunks if "prompt_logprobs" in c["choices"][0]]
    assert prompts == [whole["prompt_logprobs"]]  # once, in the first chunk that has tokens
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["text"]


def test_chat_logprobs_whole_and_streamed(client):
    body = {"messages": [{"role": "user", "content": "What is 2 + 2?"}], "max_tokens": 6, "temperature": 0,
            "ignore_eos": True, "logprobs": True, "top_logprobs": 2}
    whole = client.post("/v1/chat/completions", json=body).json()["choices"][0]["logprobs"]["content"]
    assert len(whole) == 6
    for entry in whole:
        assert set(entry) == {"token", "logprob", "bytes", "top_logprobs"}
        assert entry["bytes"] == list(entry["token"].encode()) and len(entry["top_logprobs"]) == 2
        assert entry["logprob"] <= 0 and abs(entry["top_logprobs"][0]["logprob"] - entry["logprob"]) < TOL
        assert entry["top_logprobs"][0]["logprob"] >= entry["top_logprobs"][1]["logprob"]
    streamed = []
    for chunk in _chunks(client.post("/v1/chat/completions", json={**body, "stream": True})):
        if chunk["choices"] and chunk["choices"][0]["logprobs"] is not None:
            streamed += chunk["choices"][0]["logprobs"]["content"]
    # the same tokens; logprobs to TOL: the second request's prompt starts on the first's cached blocks, a prefill of
    # other shape whose last bits may differ
    assert [(e["token"], [t["token"] for t in e["top_logprobs"]]) for e in streamed] == \
        [(e["token"], [t["token"] for t in e["top_logprobs"]]) for e in whole]
    for got, expected in zip(streamed, whole):
        assert abs(got["logprob"] - expected["logprob"]) < TOL
        assert all(abs(a["logprob"] - b["logprob"]) < TOL for a, b in zip(got["top_logprobs"], expected["top_logprobs"]))
    plain = client.post("/v1/chat/completions", json={**body, "logprobs": False, "top_logprobs": 0}).json()
    assert plain["choices"][0]["logprobs"] is None


def test_logprobs_zero_gives_the_chosen_token_only_and_no_request_gives_none(client, prompt_ids):
    zero = client.post("/v1/completions", json=_completion(prompt_ids, logprobs=0)).json()["choices"][0]
    assert zero["logprobs"]["top_logprobs"] == [{}] * MAX_TOKENS and "prompt_logprobs" not in zero
    bare = client.post("/v1/completions", json=_completion(prompt_ids)).json()["choices"][0]
    assert bare["logprobs"] is None and "prompt_logprobs" not in bare


@pytest.mark.parametrize(("route", "fields", "param"), [
    ("/v1/completions", {"logprobs": 21}, "logprobs"),
    ("/v1/completions", {"prompt_logprobs": -1}, "prompt_logprobs"),
    ("/v1/chat/completions", {"logprobs": True, "top_logprobs": 99}, "top_logprobs"),
    ("/v1/chat/completions", {"top_logprobs": 2}, "top_logprobs"),
])
def test_limits_are_one_clear_400(client, route, fields, param):
    base = {"prompt": "hi"} if route == "/v1/completions" else {"messages": [{"role": "user", "content": "hi"}]}
    response = client.post(route, json={**base, "max_tokens": 2, **fields})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and param in error["message"], error

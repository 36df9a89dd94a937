"""Helpers of the `specbench serve` hardening tests: the guarded server's engine, OpenAI error checks and the
"the server still works" probe."""

from __future__ import annotations

import httpx

GUARDED_MAX_MODEL_LEN = 128  # the guarded server's context: keeps any request a property test makes valid short
GUARDED_MAX_REQUEST_BYTES = 64 * 1024
PROMPT = "Question: 1 + 1?\nAnswer:"
VALID_COMPLETION = {"prompt": PROMPT, "max_tokens": 1, "temperature": 0}


def assert_error(response: httpx.Response, status: int, param: str | None = None) -> dict:
    """An OpenAI error of `status`; when `param` is given the error names it (as `param` and in the message)."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == status and error["message"], error
    if param is not None:
        assert error["param"] == param and param.split(".")[0] in error["message"], error
    return error


def assert_still_serving(client: httpx.Client) -> None:
    """A valid request succeeds and /health says ok."""
    response = client.post("/v1/completions", json=VALID_COMPLETION)
    assert response.status_code == 200, response.text
    assert response.json()["usage"]["completion_tokens"] == 1
    assert client.get("/health").status_code == 200


def guarded_engine_config(model_dir):
    from specbench.config import EngineConfig

    return EngineConfig(target=str(model_dir), method="ngram", max_num_steps=2, device="cpu", kv_cache_gb=0.02,
                        max_model_len=GUARDED_MAX_MODEL_LEN)

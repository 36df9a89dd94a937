"""Property: whatever JSON a client posts to /v1/completions or /v1/chat/completions, `specbench serve` answers 200
or 4xx, never 5xx (nor a streamed error event), and the next valid request still succeeds."""

from __future__ import annotations

import json

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from specbench.serve.request_models import FIELD_NAMES  # noqa: E402
from tests.support.serve_probe import PROMPT, assert_still_serving  # noqa: E402

LEAVES = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats()
          | st.text(max_size=12))
JSON = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                         max_size=4), max_leaves=10)
# Values near the fields' edges, so that bodies often get past the type checks into the range checks and the engine.
EDGES = (st.floats(min_value=-2.0, max_value=2.0) | st.sampled_from([0, 1, -1, 2**63, 2**64, 1e-30, 1e39])
         | st.integers(min_value=-3, max_value=6) | st.lists(st.integers(min_value=-2, max_value=1100), max_size=6)
         | st.sampled_from(["", "x", "\n", "user", "system", "tool"]))
MESSAGES = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system", "tool"]),
                                           "content": st.text(max_size=30) | JSON}), max_size=3)
NAMES = st.sampled_from(sorted(FIELD_NAMES) + ["bogus"])
FIELDS = st.dictionaries(NAMES, EDGES, max_size=2) | st.dictionaries(NAMES, EDGES | JSON | MESSAGES, max_size=5)
BASES = {"/v1/completions": {"prompt": PROMPT, "max_tokens": 3},
         "/v1/chat/completions": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}}
FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def client(guarded_server):
    with httpx.Client(base_url=guarded_server.url, timeout=60) as c:
        yield c


def _check(client: httpx.Client, route: str, body: object) -> None:
    raw = json.dumps(body)  # NaN / Infinity literals included, as Python's json reads them
    response = client.post(route, content=raw.encode(), headers={"content-type": "application/json"})
    assert response.status_code == 200 or 400 <= response.status_code < 500, (raw, response.text)
    if response.status_code == 200 and "text/event-stream" in response.headers["content-type"]:
        assert '"error"' not in response.text, (raw, response.text)
    assert_still_serving(client)


@pytest.mark.parametrize("route", sorted(BASES))
@FUZZ
@given(use_base=st.booleans(), fields=FIELDS, junk=JSON)
@pytest.mark.slow  # several seconds on 2 cores: the fast suite stays under 5 minutes
def test_any_json_body_is_answered_200_or_4xx_and_the_server_goes_on(client, route, use_base, fields, junk):
    body = {**BASES[route], **fields} if use_base else fields if fields else junk
    _check(client, route, body)

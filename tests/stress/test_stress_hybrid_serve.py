"""Issue 45's chain end to end: `specbench serve` on a tiny Qwen3-Next checkpoint (Gated DeltaNet + attention, fp32
CPU) with n-gram speculation (k = 3) and prefix caching (recurrent-state snapshots), stressed over HTTP against a
speculation-off twin by `specbench stress --conditions hybrid` as a user runs it. The server says it is hybrid
(/version), so the hybrid conditions come with their reasons; a clean server passes all of them with prefix hits
counted under speculation (vLLM #54360's class); hybrid-state mutants served with `--inject` fail at the smallest
condition that reaches them, the two the gentle gate passes included."""

from __future__ import annotations

import json
import urllib.request

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from tests.stress.test_stress_faults import _verdicts
from tests.support.cli_run import run_main
from tests.support.tiny_hybrid import build_tiny_hybrid
from tests.support.tiny_models import data_dir

pytestmark = pytest.mark.slow  # two servers and a matrix per test (about 5-10 s each on 2 cores)

HYBRID = "gentle,shared-prefix-8,warm-cache,multi-turn,zero-draft-mix-8"  # what `--conditions hybrid` expands to here


@pytest.fixture(scope="module")
def hybrid_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("stress_hybrid") / "target"
    build_tiny_hybrid(out, seed=0)
    return out


def _server(target, inject: str | None = None, method: str = "ngram"):
    from specbench.config import EngineConfig
    from specbench.faults import injection
    from specbench.serve import ServeConfig, start_server

    engine = EngineConfig(target=str(target), method=method, device="cpu", kv_cache_gb=0.05,
                          max_num_steps=3 if method != "none" else 0)
    return start_server(ServeConfig(engine, served_model_name="tiny-hybrid"), fault=injection(inject))


@pytest.fixture(scope="module")
def plain(hybrid_dir):
    with _server(hybrid_dir, method="none") as server:
        yield server


@pytest.fixture(scope="module")
def clean(hybrid_dir):
    with _server(hybrid_dir) as server:
        yield server


@pytest.fixture(scope="module")
def gate_reference(clean, tmp_path_factory):
    """The gentle gate's reference, recorded from the clean speculating server."""
    ref = tmp_path_factory.mktemp("stress_hybrid_gate") / "ref.json"
    result = run_main("gate", "--base-url", clean.url, *_gate_args(ref.parent), "--write-reference", str(ref))
    assert result.exit_code == 0, result.stdout + result.stderr
    return ref


def _gate_args(results) -> list[str]:
    return ["-k", "3", "--data-dir", str(data_dir()), "--num-prompts", "4", "--shots", "1", "--max-tokens", "12",
            "--results-dir", str(results / "results")]


def _stress(url: str, baseline: str, conditions: str = "hybrid") -> tuple[int, str]:
    result = run_main("stress", "--base-url", url, "--baseline-url", baseline, "-k", "3", "--rule", "output",
                      "--quiet", "--num-requests", "4", "--max-tokens", "12", "--conditions", conditions)
    return result.exit_code, result.stdout


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


def _counter(metrics: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines() if line.startswith(name + "{"))


def test_a_clean_served_hybrid_passes_every_hybrid_condition_with_prefix_hits(clean, plain):
    assert json.loads(_get(clean.url + "/version"))["hybrid"] is True
    code, out = _stress(clean.url, plain.url)
    metrics = _get(clean.url + "/metrics")
    assert code == 0 and out.startswith("## specbench stress: PASS: no corruption in 5 conditions"), out
    assert "hybrid target (recurrent state)" in out.splitlines()[2]
    assert _verdicts(out) == dict.fromkeys(HYBRID.split(","), "PASS")
    rows = {line.split(" (c=")[0].removeprefix("| "): line for line in out.splitlines() if "(c=" in line}
    for name in ("zero-draft-mix-8", "warm-cache", "multi-turn", "shared-prefix-8"):
        assert "| hybrid: " in rows[name], rows[name]  # each says why it is there for a recurrent state
    assert "after-restart: the server cannot be restarted from here" in out and "vLLM #39273" in out
    # vLLM #54360's class: with speculation on, prefix hits are counted (the warm passes hit the shared prefix)
    assert _counter(metrics, "specbench:prefix_cache_hits_total") > 0
    assert _counter(metrics, "specbench:spec_decode_num_draft_tokens_total") > 0


@pytest.mark.parametrize("fault, conditions, smallest, passing, gate", [
    # only rounds mixing zero-draft and drafting requests: one request at a time never mixes (the gate passes it)
    ("state-stale-in-mixed-batch", "gentle,warm-cache,multi-turn,zero-draft-mix-8", "zero-draft-mix-8", "gentle",
     "PASS"),
    # only prefix hits resume a snapshot: cold conditions pass, and so does the gate (a cold server)
    ("state-snapshot-wrong-block", "gentle,zero-draft-mix-8,warm-cache", "warm-cache", "gentle", "PASS"),
    # every zero-draft round, batched or not: an n-gram drafter's empty rounds at concurrency 1 already show it
    ("state-zero-draft-stale", "gentle,zero-draft-mix-8", "gentle", None, None),
])
def test_a_served_hybrid_state_mutant_fails_at_its_smallest_condition(hybrid_dir, plain, gate_reference, tmp_path,
                                                                       fault, conditions, smallest, passing, gate):
    with _server(hybrid_dir, inject=fault) as faulty:
        if gate:
            result = run_main("gate", "--base-url", faulty.url, *_gate_args(tmp_path), "--reference",
                              str(gate_reference))
            assert result.stdout.startswith(f"## specbench gate: {gate}"), result.stdout + result.stderr
        code, out = _stress(faulty.url, plain.url, conditions)
    assert code == 1, out
    headline = out.splitlines()[0]
    assert headline.startswith(f"## specbench stress: FAIL: FAIL at {smallest} ("), out
    verdicts = _verdicts(out)
    assert verdicts[smallest] == "FAIL"
    if passing:
        assert f"passes at {passing} (" in headline and verdicts[passing] == "PASS", out


def test_prefix_caching_off_while_drafting_passes_the_gate_and_fails_stress_as_no_cache_hits(hybrid_dir, plain,
                                                                                             gate_reference, tmp_path):
    """vLLM #54360's class served: outputs exact, the prefix cache serves nothing with speculation on."""
    with _server(hybrid_dir, inject="prefix-cache-off-when-drafting") as faulty:
        result = run_main("gate", "--base-url", faulty.url, *_gate_args(tmp_path), "--reference", str(gate_reference))
        assert result.stdout.startswith("## specbench gate: PASS"), result.stdout + result.stderr
        code, out = _stress(faulty.url, plain.url, "gentle,warm-cache,multi-turn")
        metrics = _get(faulty.url + "/metrics")
    assert code == 1, out
    assert out.startswith("## specbench stress: FAIL: NO-CACHE-HITS at warm-cache ("), out
    assert _verdicts(out) == {"gentle": "PASS", "warm-cache": "NO-CACHE-HITS", "multi-turn": "NO-CACHE-HITS"}
    rows = [line for line in out.splitlines() if "NO-CACHE-HITS |" in line]
    assert all(" | 0 [0.0%, " in row and "| 0.0% / " in row for row in rows), rows  # nothing corrupt; hits 0 on
    assert _counter(metrics, "specbench:prefix_cache_hits_total") == 0

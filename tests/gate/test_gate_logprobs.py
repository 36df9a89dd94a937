"""The gate's logprobs stage: its rules on hand-made logprobs, and end to end against `specbench serve` (in process,
draft, k = 2, fp32 on CPU): a clean server passes against a reference recorded from it; each logprobs-only fault
(`serve --inject`) passes every other stage and fails the logprobs stage alone; a server without logprobs is N/A."""

from __future__ import annotations

import json
import math

import pytest

from specbench.backends.server_logprobs import ServerTokenLogprob as T
from specbench.gate.logprobs_collect import LogprobsRun, LogprobsSample
from specbench.gate.logprobs_stage import LogprobsTolerance, invariant_violations, logprobs_stage
from specbench.gate.stage import Status

TOL = LogprobsTolerance(atol=2e-3, ppl_rtol=1e-3, off_fraction=0.0, near_tie_margin=0.1, basis="test")


def _token(token: str, logprob: float, *others: tuple[str, float]) -> T:
    """A greedy token: itself first in its top-n, then `others`."""
    return T(token, logprob, ((token, logprob), *others))


def _sample(sample_id: str = "0", shift: float = 0.0, prompt_shift: float = 0.0) -> LogprobsSample:
    out = (_token("a", -0.1 + shift, ("b", -2.5)), _token("b", -0.3, ("c", -1.6)), _token("c", -0.06, ("a", -3.0)))
    prompt = (None, T("x", -4.0 + prompt_shift, (("y", -1.0), ("x", -4.0 + prompt_shift))), T("y", -2.0, (("x", -0.5), ("y", -2.0))))
    return LogprobsSample(sample_id, out, prompt)


def _run(*samples: LogprobsSample, label: str = "k=2") -> LogprobsRun:
    return LogprobsRun(label, samples)


@pytest.mark.parametrize("token, why", [
    (T("a", 0.5, (("a", 0.5),)), "is not <= 0"),
    (T("a", math.nan, (("a", -1.0),)), "is not <= 0"),
    (T("a", 0.0, ()), "without the top-5"),  # llama.cpp #27972: 0.0 and nothing else
    (T("a", 0.0, (("a", 0.0), ("b", -2.0))), "exactly 0.0 although an alternative"),
    (T("a", -0.5, (("a", -1.5), ("b", -2.0))), "in its own top-n"),  # vLLM #34497: read off another row
    (T("a", -1.5, (("b", -0.5), ("a", -1.5))), "below the top-1"),  # greedy, yet not the argmax
    (T("a", -0.1, (("a", -0.1), ("b", -0.2))), "probability"),  # logsumexp > 0
])
def test_each_invariant_catches_its_violation(token, why):
    (line,) = invariant_violations([LogprobsSample("7", (token,), None)], 2e-3)
    assert why in line and "sample 7 output token 0" in line
    assert invariant_violations([_sample()], 2e-3) == []
    # exactly 0.0 is believed when every listed alternative is far below (a real float32 log_softmax can give it)
    assert invariant_violations([LogprobsSample("7", (T("a", 0.0, (("a", 0.0), ("b", -18.0))),), None)], 2e-3) == []


def test_equal_logprobs_pass_and_shifted_ones_fail():
    ok = logprobs_stage(_run(_sample()), _run(_sample(), label="k=0"), TOL)
    assert ok.status is Status.PASS and "outputs vs k=0: 0/3 tokens off" in ok.metric, ok
    assert "prompts: 0/2 tokens off" in ok.metric and "output error > 0.002 nats" in ok.power
    bad = logprobs_stage(_run(_sample(shift=-0.01)), _run(_sample()), TOL)
    assert bad.status is Status.FAIL and "1 output token(s) off" in bad.reason, bad
    bad = logprobs_stage(_run(_sample(prompt_shift=-0.5)), _run(_sample()), TOL)
    assert bad.status is Status.FAIL and "prompt token(s) off" in bad.reason and "perplexity" in bad.reason, bad
    # the count rule: one token beyond atol in 3 is within a 50% allowance
    loose = LogprobsTolerance(2e-3, 1e-3, 0.5, 0.1, "test")
    assert logprobs_stage(_run(_sample(shift=-0.01)), _run(_sample()), loose).status is Status.PASS


def test_tokens_after_a_divergence_are_not_compared_and_a_near_tie_is_named():
    # one context, two near-equal candidates: the run picked the other one; what follows differs in context
    ref = LogprobsSample("0", (_token("a", -0.6930, ("b", -0.6935)), _token("q", -0.1, ("r", -3.0))), None)
    now = LogprobsSample("0", (_token("b", -0.6932, ("a", -0.6932)), _token("z", -0.2, ("y", -3.0))), None)
    result = logprobs_stage(_run(now), _run(ref), TOL)
    assert result.status is Status.PASS and "1/1" not in result.metric and "0/1 tokens off" in result.metric, result
    assert any("diverge at output token 0" in d and "near-tie" in d for d in result.details)


def test_without_logprobs_the_stage_is_not_available_and_without_a_reference_it_checks_invariants():
    none = logprobs_stage(LogprobsRun("k=2", None, "the server returns no logprobs"), None, TOL)
    assert none.status is Status.NOT_AVAILABLE and "the server returns no logprobs" in none.reason
    alone = logprobs_stage(_run(_sample()), None, TOL)
    assert alone.status is Status.PASS and "no reference logprobs" in alone.reason
    zeroed = LogprobsSample("0", (T("a", 0.0, ()),), None)
    assert logprobs_stage(_run(zeroed), None, TOL).status is Status.FAIL


def test_the_reference_file_carries_logprobs_and_reads_version_1(tmp_path):
    from tests.gate.test_gate_stages import _observation

    from specbench.gate.reference import GateSettings, read_reference, reference_of, write_reference

    settings = GateSettings("gsm8k", 4, 1, 16, 2, 1)
    path = tmp_path / "ref.json"
    run = LogprobsRun("k=0", (_sample(), LogprobsSample("1", (T("a", -math.inf, ()),), None)))
    write_reference(reference_of(_observation(), settings, "embedded tiny", run), path)
    assert read_reference(path).logprobs == run
    doc = json.loads(path.read_text())
    doc["version"] = 1
    del doc["logprobs"]
    path.write_text(json.dumps(doc))
    assert read_reference(path).logprobs is None


def test_the_selftest_refuses_a_logprobs_only_fault():
    """It compares tokens and statistics, which these faults leave exact: it would report them missed."""
    from specbench.errors import SpecbenchError
    from specbench.faults.catalog import LOGPROBS_MUTANTS, selftest_faults
    from specbench.selftest.runner import run_selftest

    for mutant in LOGPROBS_MUTANTS:
        assert mutant.fault.name not in selftest_faults("cpu") + selftest_faults("cuda")
        with pytest.raises(SpecbenchError, match="logprobs only.*specbench gate"):
            run_selftest(faults=(mutant.fault.name,))


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("inject", [None, "logprobs-row-shift"])
def test_a_bf16_engine_passes_clean_and_fails_a_row_shift_under_the_16_bit_tolerance(inject, gate_pair, tmp_path,
                                                                                     monkeypatch, capsys):
    """On CUDA in bf16 the verify (k + 1 rows) and the k = 0 decode take other kernels: the 16-bit tolerance must
    absorb that on a clean engine and still see a row shift."""
    from tests.gate.conftest import engine_args, run_gate_cli

    args = [a if a != "cpu" else "cuda" for a in engine_args(gate_pair)] + ["--dtype", "bf16"]
    code, out, err = run_gate_cli([*args, "--results-dir", str(tmp_path), *(["--inject", inject] if inject else [])],
                                  monkeypatch, capsys)
    row = next(line for line in out.splitlines() if line.startswith("| logprobs |"))
    assert "(16-bit engine)" in row, out + err
    if inject is None:
        assert code == 0 and row.split(" | ")[1] == "PASS", out + err
    else:
        assert code == 1 and out.startswith("## specbench gate: FAIL (logprobs)\n"), out + err


# --- end to end: `specbench gate --base-url` against `specbench serve [--inject ...]` ------------------------------

fastapi = pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")


def _server(pair, inject: str | None = None):
    from specbench.config import EngineConfig
    from specbench.faults import injection
    from specbench.serve import ServeConfig, start_server

    engine = EngineConfig(target=str(pair.target), method="draft", draft=str(pair.draft), device="cpu",
                          dtype="fp32", kv_cache_gb=0.05, max_num_steps=2)
    return start_server(ServeConfig(engine, served_model_name="tiny"), fault=injection(inject))


def _args(url: str, tmp_path) -> list[str]:
    from tests.support.tiny_models import data_dir

    # the server is fp32 on CPU: the fp32 tolerance, not the default for a server of unknown dtype
    return ["--base-url", url, "-k", "2", "--data-dir", str(data_dir()), "--num-prompts", "2", "--shots", "1",
            "--max-tokens", "12", "--results-dir", str(tmp_path / "results"), "--logprobs-atol", "0.002",
            "--logprobs-ppl-rtol", "0.001"]


def _status(out: str, stage: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(f"| {stage} |")).split(" | ")[1]


@pytest.fixture(scope="module")
def clean_reference(gate_pair, tmp_path_factory):
    """A reference recorded from the clean server (its own k = 2 logprobs: a --base-url server's k is fixed)."""
    import contextlib
    import io
    from types import SimpleNamespace

    from tests.gate.conftest import run_gate_cli

    tmp = tmp_path_factory.mktemp("logprobs_ref")
    ref, printed = tmp / "ref.json", io.StringIO()
    captured = SimpleNamespace(readouterr=lambda: SimpleNamespace(out=printed.getvalue(), err=""))
    with pytest.MonkeyPatch.context() as mp, _server(gate_pair) as clean, contextlib.redirect_stdout(printed):
        code, out, _ = run_gate_cli([*_args(clean.url, tmp), "--write-reference", str(ref)], mp, captured)
    return ref, code, out


def test_a_clean_server_passes_the_logprobs_stage(gate_pair, clean_reference, tmp_path, monkeypatch, capsys):
    from tests.gate.conftest import run_gate_cli

    ref, code, out = clean_reference
    assert code == 0 and _status(out, "logprobs") == "PASS" and "invariants hold" in out, out
    assert json.loads(ref.read_text())["logprobs"]["label"] == "k=2 server (no k = 0 run)"
    with _server(gate_pair) as clean:
        code, out, err = run_gate_cli([*_args(clean.url, tmp_path), "--reference", str(ref)], monkeypatch, capsys)
    assert code == 0, out + err
    assert _status(out, "logprobs") == "PASS" and "outputs vs reference file, k=2 server" in out, out
    assert "prompts: 0/" in out and ", 0 invariant violations" in out


@pytest.mark.parametrize("fault", ["logprobs-row-shift", "prompt-logprobs-shift", "logprobs-zeroed"])
def test_each_logprobs_fault_fails_the_logprobs_stage_alone(fault, gate_pair, clean_reference, tmp_path,
                                                             monkeypatch, capsys):
    from tests.gate.conftest import run_gate_cli

    ref, _, _ = clean_reference
    with _server(gate_pair, inject=fault) as faulty:
        code, out, err = run_gate_cli([*_args(faulty.url, tmp_path), "--reference", str(ref)], monkeypatch, capsys)
    assert code == 1, out + err
    assert out.startswith("## specbench gate: FAIL (logprobs)\n"), out  # lossless, acceptance, outputs: PASS
    assert _status(out, "lossless") == "PASS" and _status(out, "outputs") == "PASS", out


def test_a_server_without_logprobs_gives_not_available(gate_pair, tmp_path, monkeypatch, capsys):
    """A server that ignores `logprobs` (many do) answers `"logprobs": null`: N/A, saying so, and the gate passes."""
    from tests.gate.conftest import run_gate_cli

    from specbench.serve import generation

    monkeypatch.setattr(generation, "completion_logprobs", lambda *args, **kwargs: None)
    with _server(gate_pair) as server:
        code, out, err = run_gate_cli(_args(server.url, tmp_path), monkeypatch, capsys)
    assert code == 0, out + err
    assert _status(out, "logprobs") == "N/A" and "the server returns no logprobs" in out, out


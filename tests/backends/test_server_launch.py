"""--server-cmd: a server launched per num-steps group (a stdlib stand-in for llama-server), readiness, log tail on
failure, SIGTERM then SIGKILL of the whole process group (no orphans, also on Ctrl-C), resume relaunching only what
is missing, and the k = 0 baseline giving speedup and agreement to HTTP cells."""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from tests.support.tiny_models import data_dir

STAND_IN = Path(__file__).with_name("stand_in_server.py")


def _template(tmp_path: Path, *extra: str) -> str:
    return " ".join([shlex.quote(sys.executable), shlex.quote(str(STAND_IN)), "--port {port}",
                     "--num-steps {num_steps}", "--pid-file", shlex.quote(str(tmp_path / "pids")),
                     "--launch-log", shlex.quote(str(tmp_path / "launches")), *extra])


def _sweep(tmp_path: Path, template: str, *extra: str, run_id: str = "run"):
    from specbench.cli.app import app

    args = ["sweep", "--backend", "openai", "--server-cmd", template, "--workload", "gsm8k", "--shots", "0",
            "--data-dir", str(data_dir()), "--max-tokens", "7", "--limit", "2", "-c", "1", "--warmup", "0",
            "--results-dir", str(tmp_path / "results"), "--run-id", run_id, "--quiet", *extra]
    return CliRunner().invoke(app, args, env={"HF_HUB_OFFLINE": "1"})


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead: its parent (this test process, for direct children) has not reaped it yet
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _pids(tmp_path: Path) -> list[int]:
    return [int(line) for line in (tmp_path / "pids").read_text().split()]


def _assert_all_dead(tmp_path: Path) -> None:
    deadline = time.monotonic() + 30  # polled: generous for a loaded box, quick when they are dead
    while any(_alive(pid) for pid in _pids(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in _pids(tmp_path) if _alive(pid)], "a launched process outlived the sweep"


def test_a_sweep_launches_one_server_per_num_steps_and_reads_its_acceptance(tmp_path):
    result = _sweep(tmp_path, _template(tmp_path, "--spawn-child"), "-k", "0,3")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "launches").read_text().split() == ["k0", "k3"]  # one launch per k, baseline first
    _assert_all_dead(tmp_path)
    run = tmp_path / "results" / "run"
    for k in (0, 3):
        log = (run / "servers" / f"k{k}.log").read_text()
        assert f"num_steps={k}" in log and "POST /v1/completions" in log
    cells = pd.read_parquet(run / "cells.parquet").set_index("num_steps")
    spec = cells.loc[3]
    assert spec["acceptance_source"] == "server:llamacpp" and spec["draft_stats_source"] == "llamacpp:timings"
    # 7 tokens per request at 1 + 2 accepted per round: rounds of 3, 3, 1 -> 3 rounds, 4 accepted, 9 drafted
    assert (spec["num_draft_rounds"], spec["num_accepted_tokens"], spec["num_draft_tokens"]) == (6, 8, 18)
    assert spec["acceptance_length"] == pytest.approx(1 + 8 / 6)
    assert list(spec["server_accepted_per_pos"]) == [4.0, 4.0, 0.0]
    assert spec["accept_rate_pos_1"] == pytest.approx(4 / 6) and spec["accept_rate_pos_3"] == 0
    assert not pd.isna(spec["speedup"]) and spec["agreement_text"] == 1.0 and spec["baseline_cell_id"].endswith("k0")
    requests = pd.read_parquet(run / "requests.parquet")
    spec_requests = requests[requests["num_steps"] == 3]
    assert (spec_requests["draft_stats_source"] == "llamacpp:timings").all()
    assert spec_requests["num_accepted_tokens"].sum() == spec["num_accepted_tokens"]  # timings agree with /metrics
    assert spec_requests["num_draft_rounds"].isna().all()  # llama.cpp sends no per-request round count
    base = requests[requests["num_steps"] == 0]
    assert base["draft_stats_source"].isna().all() and cells.loc[0]["acceptance_source"] == "server:llamacpp"
    assert "per-request draft columns from: llamacpp:timings" in result.output
    best = pd.read_parquet(run / "recommendations.parquet")  # a launch per k ranks k over HTTP too
    assert len(best) == 1 and set(best[["best_num_steps", "runner_up_num_steps"]].iloc[0]) == {0, 3}


def test_resume_relaunches_only_the_missing_num_steps(tmp_path):
    assert _sweep(tmp_path, _template(tmp_path), "-k", "0,2").exit_code == 0
    run = tmp_path / "results" / "run"
    k2 = next((run / "parts" / "cells").glob("*-k2.parquet"))
    k2.unlink()
    (tmp_path / "launches").unlink()
    from specbench.cli.app import app

    result = CliRunner().invoke(app, ["sweep", "--resume", str(run), "--quiet"], env={"HF_HUB_OFFLINE": "1"})
    assert result.exit_code == 0, result.output
    assert (tmp_path / "launches").read_text().split() == ["k2"]
    assert len(pd.read_parquet(run / "cells.parquet")) == 2
    _assert_all_dead(tmp_path)


def _main_error(monkeypatch, capsys, tmp_path: Path, template: str, *extra: str) -> str:
    """Run the CLI entry point (which turns user errors into `error:` + exit 2); returns stderr."""
    from specbench.cli.app import main

    monkeypatch.setattr(sys, "argv", ["specbench", "sweep", "--backend", "openai", "--server-cmd", template,
                                      "--shots", "0", "--data-dir", str(data_dir()), "--limit", "1", "--quiet",
                                      "--results-dir", str(tmp_path / "results"), *extra])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 2
    return capsys.readouterr().err


def test_a_server_that_dies_before_ready_is_one_error_quoting_its_log(tmp_path, monkeypatch, capsys):
    err = _main_error(monkeypatch, capsys, tmp_path, _template(tmp_path, "--exit-code", "3"), "-k", "0")
    assert "error: the server exited with status 3 before it was ready" in err and "Traceback" not in err
    assert "could not load the model (test hook)" in err  # the log's tail is quoted
    kept = err.split("(log ", 1)[1].split(")", 1)[0]  # the whole log, kept outside the run directory
    assert "could not load the model (test hook)" in Path(kept).read_text()
    assert not list((tmp_path / "results").iterdir())  # nothing was measured: no run directory is left


def test_a_server_never_ready_times_out_and_is_killed(tmp_path, monkeypatch, capsys):
    err = _main_error(monkeypatch, capsys, tmp_path, _template(tmp_path, "--startup-delay", "60", "--spawn-child"),
                      "-k", "0", "--server-ready-timeout", "1")
    assert "was not ready within 1 s" in err
    _assert_all_dead(tmp_path)


def test_stop_escalates_to_sigkill_for_the_whole_group(tmp_path):
    from specbench.backends.server_process import ServerProcess, free_port
    from specbench.backends.server_template import LaunchValues, render

    template = _template(tmp_path, "--ignore-sigterm", "--spawn-child")
    port = free_port()
    server = ServerProcess(render(template, LaunchValues(1, "draft", port, "m", None)), port, tmp_path / "s.log")
    server.start()
    server.wait_ready(30)
    started = time.monotonic()
    server.stop(grace_s=0.5)
    assert time.monotonic() - started < 5
    _assert_all_dead(tmp_path)


def test_ctrl_c_during_a_cell_stops_the_server(tmp_path, monkeypatch):
    from specbench.backends.launching_backend import LaunchingBackend

    def interrupted(self):  # Ctrl-C once the server is up and the cell's window opens
        raise KeyboardInterrupt

    monkeypatch.setattr(LaunchingBackend, "begin_window", interrupted)
    from specbench.bench.sweep import run_sweep
    from specbench.runs.sweep_config import SweepConfig

    config = SweepConfig(backend="openai", server_cmd=_template(tmp_path, "--spawn-child"), num_steps=(1,),
                         shots=0, data_dir=str(data_dir()), limit=1, max_tokens=3, warmup=0,
                         results_dir=str(tmp_path / "results"), run_id="cc", quiet=True, speedup=False)
    from specbench.errors import Interrupted

    with pytest.raises(Interrupted):  # the sweep turns Ctrl-C into one message saying what was kept
        run_sweep(config)
    assert _pids(tmp_path)  # the server had started
    _assert_all_dead(tmp_path)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"server_cmd": "srv --port {port} --k {k}"}, "unknown placeholder {k}; supported: {num_steps}"),
        ({"server_cmd": "srv --num-steps {num_steps}"}, "must contain {port}"),
        ({"server_cmd": "preset:tgi"}, "unknown --server-cmd preset 'tgi'; supported: llama-server"),
        ({"server_cmd": "srv --port {port}", "base_url": "http://h"}, "drop --base-url"),
        ({"server_cmd": "srv --port {port}", "server_adapter": "tgi"}, "unknown server adapter 'tgi'"),
        ({"server_baseline_cmd": "srv --port {port}", "base_url": "http://h"}, "--server-baseline-cmd needs"),
        ({"server_cmd": "srv --port {port} '"}, "No closing quotation"),
    ],
)
def test_launch_config_errors(fields, message):
    from specbench.bench.validate import validate_config
    from specbench.errors import SpecbenchError
    from specbench.runs.sweep_config import SweepConfig

    with pytest.raises(SpecbenchError, match=message.replace("{", r"\{").replace("}", r"\}").replace("(", r"\(")):
        validate_config(SweepConfig.from_flat({"backend": "openai", **fields}))


def test_presets_render_for_every_k_and_the_baseline_drops_speculation():
    from specbench.backends.server_template import PRESETS, LaunchValues, check_template, render, resolve_template

    for name in PRESETS:
        check_template(f"preset:{name}")
        values = LaunchValues(3, "draft", 8123, "/m/target.gguf", "/m/draft.gguf")
        spec = render(resolve_template(f"preset:{name}", None, 3), values)
        base = render(resolve_template(f"preset:{name}", None, 0), values)
        assert "8123" in spec and "8123" in base and "/m/target.gguf" in " ".join(base)
        assert "/m/draft.gguf" not in " ".join(base) and len(base) < len(spec)
        if name == "vllm":  # one argv: the JSON speculative config
            config = json.loads(spec[spec.index("--speculative-config") + 1])
            assert config == {"method": "draft_model", "model": "/m/draft.gguf", "num_speculative_tokens": 3}
        elif name != "sglang":
            assert "3" in spec
    assert resolve_template("a --port {port}", "b --port {port}", 0) == "b --port {port}"
    assert resolve_template("a --port {port}", None, 0) == "a --port {port}"


def test_check_lossless_launches_the_speculative_and_the_reference_server(tmp_path):
    from specbench.cli.app import app

    result = CliRunner().invoke(app, ["check-lossless", "--server-cmd", _template(tmp_path), "-k", "2",
                                      "--server-log-dir", str(tmp_path / "logs"), "--data-dir", str(data_dir()),
                                      "--shots", "0", "--num-prompts", "2", "--max-tokens", "5"],
                                env={"HF_HUB_OFFLINE": "1"}, catch_exceptions=False)
    assert result.exit_code == 0 and "2/2 turns identical" in result.output, result.output
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == ["k0.log", "k2.log"]
    assert sorted((tmp_path / "launches").read_text().split()) == ["k0", "k2"]
    _assert_all_dead(tmp_path)


def test_an_http_num_steps_needs_no_method_and_a_launch_adds_the_baseline():
    from specbench.bench.grid import build_grid
    from specbench.bench.validate import validate_config
    from specbench.runs.sweep_config import SweepConfig

    validate_config(SweepConfig(backend="openai", base_url="http://h", num_steps=(3,)))  # the server picks it
    launched = SweepConfig(backend="openai", server_cmd="s --port {port}", num_steps=(3, 1), concurrency=(1, 4))
    assert launched.grid_num_steps == (0, 1, 3)
    assert [key.num_steps for key in build_grid(launched)] == [0, 0, 1, 1, 3, 3]  # one launch per k


def test_a_baseline_server_that_drafts_is_no_baseline(tmp_path):
    """--server-cmd sets k per launch; a k=0 launch whose server drafts anyway keeps its k=0 label but is not the
    reference of the k>0 cells: no speedup or agreement anywhere, and a warning."""
    drafting_baseline = _template(tmp_path).replace("--num-steps {num_steps}", "--num-steps 2")
    result = _sweep(tmp_path, _template(tmp_path), "-k", "0,3", "--server-baseline-cmd", drafting_baseline)
    assert result.exit_code == 0, result.output
    _assert_all_dead(tmp_path)
    cells = pd.read_parquet(tmp_path / "results" / "run" / "cells.parquet").set_index("num_steps")
    assert cells.loc[0, "num_draft_tokens"] > 0 and "k=0 server drafts" in cells.loc[0, "drafting_note"]
    assert cells["speedup"].isna().all() and cells["agreement_text"].isna().all()
    assert cells["baseline_cell_id"].isna().all() and cells.loc[3, "num_draft_tokens"] > 0

"""What the command line declares and what it builds, as plain data: every command's options (flags, defaults,
help, panels), its rendered --help, and the SweepConfig each of a set of command lines turns into (or the error it
gives). `tests/cli/test_cli_snapshot.py` compares it with tests/cli/data/cli_snapshot.json, written from the
declarations before the sweep options were generated from SweepConfig.

Regenerate after a deliberate change (and review the diff; or list it in the test's DELIBERATE):
    .venv/bin/python -m tests.cli.cli_snapshot --write
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

SNAPSHOT = Path(__file__).parent / "data" / "cli_snapshot.json"
HELP_COMMANDS = ("sweep", "gsm8k", "mtbench", "demo", "check-lossless")
RUN_COMMANDS = ("sweep", "gsm8k", "mtbench")

# Command lines common to sweep and its presets; each becomes the SweepConfig (flat) and the explicit fields
# run_sweep receives, or one error line.
SWEEP_ARGVS: tuple[tuple[str, ...], ...] = (
    (),
    ("--method", "eagle3", "--draft", "head"),
    ("--draft", "d"),
    ("--method", "none"),
    ("-w", "mt_bench"),
    ("-w", "random", "--input-len", "5", "--output-len", "7"),
    ("-w", "file:p.jsonl",),
    ("-w", "speed_bench", "--speed-bench-data", "sb", "--speed-bench-split", "throughput_1k",
     "--speed-bench-categories", "mixed,low_entropy,mixed"),
    ("-n", "0"),
    ("--num-prompts", "10"),
    ("--limit", "3", "--duration", "5"),
    ("--duration", "2.5"),
    ("-c", "1,16,64", "-t", "0,0.7,default", "-k", "0,2"),
    ("--concurrency", "4,4,1", "--temperature", "1", "--num-steps", "3", "--no-speedup"),
    ("--speedup", "--top-p", "0.9", "--top-k", "5", "--request-rate", "2.5", "--burstiness", "0.5"),
    ("--request-rate", "inf",),
    ("--ramp-up-strategy", "linear", "--ramp-up-start-rps", "1", "--ramp-up-end-rps", "2"),
    ("--warmup", "3", "--no-cache-reset", "--goodput", "ttft:200", "--goodput", "tpot:50", "--optimize", "tpot",
     "--reasoning-parser", "think", "--repeats", "2"),
    ("--cache-reset", "--shots", "3", "--max-tokens", "9", "--chat-template"),
    ("--no-chat-template",),
    ("--backend", "openai", "--base-url", "http://h:1", "--model", "m", "--api-key-env", "K", "--request-timeout",
     "5", "--info-timeout", "1", "--metrics-timeout", "2", "--cache-reset-timeout", "3", "-k", "3"),
    ("--backend", "openai", "--server-cmd", "preset:vllm", "--server-baseline-cmd", "x {port}", "--server-adapter",
     "vllm", "--server-ready-timeout", "9"),
    ("--label", "a", "--results-dir", "r", "--run-id", "x", "-q", "-y"),
    ("--resume", "r/x", "--quiet"),
    ("--seed", "3", "--dtype", "fp32", "--synthetic-acceptance", "0.5,0.2", "-k", "0,2", "--no-async-scheduling"),
    ("--target", "t", "--device", "cpu", "--kv-cache-gb", "0.5", "--cpu-threads", "1", "--data-dir", "/d"),
    # user errors
    ("-c", "x"),
    ("-c", ""),
    ("-t", "hot"),
    ("-k", "a"),
    ("-k", "1,,2"),
    ("-w", "speed_bench", "--speed-bench-categories", "math,"),
    ("--top-k", "x"),
    ("--request-rate", "fast"),
    ("--repeats", "1.5"),
    ("--warmup", "-"),
    ("--duration", "soon"),
    ("--bogus",),
    ("-n",),
    ("--block-size", "0"),
    ("--synthetic-acceptance", "a,b"),
)
DEMO_ARGVS: tuple[tuple[str, ...], ...] = (
    (), ("--target", "t", "-n", "2", "--shots", "1", "--max-tokens", "4", "--data-dir", "/d", "--results-dir", "r",
         "-q"), ("--limit", "x"),
)
LOSSLESS_ARGVS: tuple[tuple[str, ...], ...] = (
    ("--base-url-spec", "http://a:1", "--base-url-ref", "http://b:2"),
    ("--base-url-spec", "http://a:1", "--base-url-ref", "http://b:2", "--model-spec", "s", "--model-ref", "r",
     "-w", "mt_bench", "-n", "3", "--shots", "1", "--chat-template", "--max-tokens", "5", "-c", "2",
     "--tokenizer", "tok", "--api-key-env", "K", "--request-timeout", "7", "--data-dir", "/d"),
    ("--server-cmd", "preset:vllm", "--server-baseline-cmd", "b {port}", "--server-ready-timeout", "3",
     "--target", "t", "--draft", "d", "--method", "eagle", "-k", "2", "--server-log-dir", "logs"),
    ("--request-timeout", "x"),
)

# SweepConfig changes (library side) -> validate_config's error, or "ok"; pairs show which check comes first.
VALIDATE_CHANGES: tuple[dict[str, Any], ...] = (
    {}, {"concurrency": (1, 0)}, {"concurrency": ()}, {"temperature": ()}, {"temperature": (-1.0,)},
    {"temperature": (None, -0.5)}, {"num_steps": (-1,)}, {"num_steps": ()}, {"limit": 0}, {"shots": -1},
    {"max_tokens": 0}, {"input_len": 0}, {"output_len": 0}, {"request_rate": 0.0}, {"request_rate": -1.0},
    {"burstiness": 0.0}, {"warmup": -1}, {"warmup": 2000}, {"repeats": 0}, {"top_p": 0.0}, {"top_p": 1.5},
    {"top_k": 0}, {"top_k": -2}, {"top_k": 5, "top_p": 0.5, "warmup": 3, "limit": 2},
    {"top_p": 1.5, "repeats": 0}, {"limit": 0, "concurrency": (0,)}, {"warmup": 2000, "top_k": 0},
    {"request_rate": -1.0, "top_p": 0.0}, {"shots": -1, "num_steps": (-1,)}, {"burstiness": 0.0, "top_k": 0},
)


class _Captured(Exception):
    pass


def _value(value: Any) -> Any:
    """JSON-safe and exact: floats and other non-JSON values by repr."""
    if isinstance(value, (list, tuple)):
        return [_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _value(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return repr(value)


def _params(command) -> list[dict[str, Any]]:
    rows = []
    for p in command.params:
        row = {
            "name": p.name, "opts": list(p.opts), "secondary_opts": list(p.secondary_opts),
            "type": repr(getattr(getattr(p, "type_descriptor", None), "annotation", None)), "default": _value(p.default), "required": p.required,
            "is_flag": getattr(p, "is_flag", None), "multiple": p.multiple, "help": getattr(p, "help", None),
            "panel": getattr(p, "rich_help_panel", None), "show_default": _value(getattr(p, "show_default", None)),
            "hidden": getattr(p, "hidden", None), "nargs": p.nargs,
        }
        # the usual values left out (a change to or from one still shows as a key added or removed)
        rows.append({k: v for k, v in row.items() if v not in (None, False, []) and (k, v) != ("nargs", 1)})
    return rows


def _help(name: str) -> str:
    import typer.rich_utils as rich_utils  # imported outside the env below: it reads TERMINAL_WIDTH once, at import
    from typer.testing import CliRunner

    from specbench.cli.app import app

    previous, rich_utils.MAX_WIDTH = rich_utils.MAX_WIDTH, 100  # restored: other tests render at their own width
    try:
        result = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "100", "TERMINAL_WIDTH": "100"})
    finally:
        rich_utils.MAX_WIDTH = previous
    assert result.exit_code == 0, result.output
    return result.output


def _outcome(root, argv: tuple[str, ...]) -> Any:
    """The config(s) a command line hands the library, or the one error line `main` would print."""
    from typer.exceptions import TyperException

    from specbench.errors import SpecbenchError

    try:
        with root.make_context("specbench", list(argv)) as ctx:
            root.invoke(ctx)
    except _Captured as captured:
        return captured.args[0]
    except SpecbenchError as exc:
        return f"error: {exc}"
    except TyperException as exc:
        return f"error: {exc.format_message()} (exit {exc.exit_code})"
    return "no call"


def _validate(changes: dict[str, Any]) -> str:
    from specbench.bench.validate import validate_config
    from specbench.errors import SpecbenchError
    from specbench.runs.sweep_config import SweepConfig

    try:
        validate_config(SweepConfig(**changes))
    except SpecbenchError as exc:
        return f"error: {exc}"
    return "ok"


def build() -> dict[str, Any]:
    """With the debug-invariants variable unset (the test suite sets it): the snapshot is the same either way."""
    from specbench.config import DEBUG_INVARIANTS_ENV

    saved_env = os.environ.pop(DEBUG_INVARIANTS_ENV, None)
    try:
        return _build()
    finally:
        if saved_env is not None:
            os.environ[DEBUG_INVARIANTS_ENV] = saved_env


def _build() -> dict[str, Any]:
    import typer.main

    import specbench.bench.sweep as bench_sweep
    from specbench.bench import lossless
    from specbench.cli.app import app
    from specbench.runs.sweep_config import SweepConfig

    library = _value(SweepConfig().to_dict())

    def flat(config) -> dict[str, Any]:
        """The fields that differ from the library's SweepConfig() (stored once, under "library_defaults")."""
        return {k: v for k, v in _value(config.to_dict()).items() if library.get(k, flat) != v}

    def fake_run_sweep(config, explicit=None, confirm=None, **_):
        raise _Captured({"config": flat(config),
                         "explicit": None if explicit is None else sorted(explicit)})

    def fake_check(spec, ref, margin, progress=None):  # progress: stderr lines, no part of what runs
        raise _Captured({"configs": [flat(spec), flat(ref)], "margin": _value(margin)})

    def fake_launched(config, logs, margin, progress=None):
        raise _Captured({"configs": [flat(config)], "logs": str(logs), "margin": _value(margin)})

    saved = bench_sweep.run_sweep, lossless.check_lossless, lossless.check_lossless_launched
    bench_sweep.run_sweep = fake_run_sweep
    lossless.check_lossless, lossless.check_lossless_launched = fake_check, fake_launched
    try:
        root = typer.main.get_command(app)
        out: dict[str, Any] = {"library_defaults": library, "params": {}, "help": {}, "runs": {}, "validate": {}}
        for name in sorted(root.commands):
            # one line per option: a diff names the option that changed
            out["params"][name] = [json.dumps(row, sort_keys=True) for row in _params(root.commands[name])]
        for name in HELP_COMMANDS:
            out["help"][name] = _help(name).splitlines()
        for name in RUN_COMMANDS:
            for argv in SWEEP_ARGVS:
                out["runs"][" ".join((name, *argv))] = _outcome(root, (name, *argv))
        for argv in DEMO_ARGVS:
            out["runs"][" ".join(("demo", *argv))] = _outcome(root, ("demo", *argv))
        for argv in LOSSLESS_ARGVS:
            out["runs"][" ".join(("check-lossless", *argv))] = _outcome(root, ("check-lossless", *argv))
        for changes in VALIDATE_CHANGES:
            out["validate"][json.dumps(_value(changes), sort_keys=True)] = _validate(changes)
        return out
    finally:
        bench_sweep.run_sweep, lossless.check_lossless, lossless.check_lossless_launched = saved


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.cli.cli_snapshot --write")
    SNAPSHOT.parent.mkdir(exist_ok=True)
    SNAPSHOT.write_text(encoding="utf-8", data=json.dumps(build(), indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"wrote {SNAPSHOT}")

"""`specbench generate` end to end through the console entry point (subprocess), plus user errors."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _specbench(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "specbench", *args], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.mark.slow  # ~4-9 s on 2 busy cores: the -m 'not slow' subset stays under 5 min
def test_generate_prints_text_and_acceptance(tiny_model_dir, tiny_draft_dir):
    target, draft = str(tiny_model_dir), str(tiny_draft_dir)
    res = _specbench("generate", "--target", target, "--method", "draft", "--draft", draft, "-k", "3",
                     "--max-tokens", "12", "--ignore-eos", "--device", "cpu",
                     "-p", "Question: how many apples are left?", "-p", "Answer:")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert out.count("--- [") == 2
    assert "method=draft num_steps=3 requests=2 output_tokens=24" in out
    assert "acceptance_rate=" in out and "per-position acceptance:" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--target", "/nonexistent/model"], "/nonexistent/model"),
        (["--method", "bogus", "-k", "2"], "unknown speculative method 'bogus'"),
        (["--prompts-file", "/nonexistent/prompts.txt"], "cannot read prompts file"),
        (["--temperature", "-1"], "temperature must be >= 0"),
    ],
)
def test_user_errors_are_one_line_and_exit_2(tiny_model_dir, args, message, monkeypatch, capsys):
    from specbench.cli.app import main

    argv = ["specbench", "generate", "--device", "cpu", "-p", "hi"]
    if "--target" not in args:
        argv += ["--target", str(tiny_model_dir)]
    monkeypatch.setattr(sys, "argv", argv + args)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SystemExit) as exc:
        main()
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    assert message in err
    assert "Traceback" not in err
    assert err.strip().count("\n") == 0, err

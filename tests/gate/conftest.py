"""The positional-head tiny pair (draft-side faults cost acceptance on it) with the tiny BPE tokenizer, once per
session, and a helper running `specbench gate` as a user runs it."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.tiny_models import data_dir


@dataclass(frozen=True)
class TinyPair:
    target: Path
    draft: Path


@pytest.fixture(scope="session")
def gate_pair(tmp_path_factory) -> TinyPair:
    from tests.support.tiny_models import VOCAB_SIZE, load_tiny_tokenizer

    from specbench.selftest.tiny import build_tiny_pair

    target, draft = build_tiny_pair(tmp_path_factory.mktemp("gate_pair"), seed=0, vocab_size=VOCAB_SIZE)
    tok = load_tiny_tokenizer()
    for path in (target, draft):
        tok.save_pretrained(path)
    return TinyPair(Path(target), Path(draft))


def engine_args(pair: TinyPair, k: int = 3) -> list[str]:
    return ["--target", str(pair.target), "--method", "draft", "--draft", str(pair.draft), "-k", str(k),
            "--device", "cpu", "--kv-cache-gb", "0.05", "--data-dir", str(data_dir()), "--num-prompts", "6",
            "--shots", "1", "--max-tokens", "16"]


def run_gate_cli(args: list[str], monkeypatch, capsys) -> tuple[int, str, str]:
    """`specbench gate ...` through the console entry point (user errors exit 2 there)."""
    from specbench.cli.app import main

    monkeypatch.setattr(sys, "argv", ["specbench", "gate", *args])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def stage_rows(out: str) -> dict[str, str]:
    """A gate report's stage table: stage name -> status."""
    return {line.split(" | ")[0].removeprefix("| "): line.split(" | ")[1] for line in out.splitlines()
            if line.startswith("| ") and not line.startswith("| stage")}

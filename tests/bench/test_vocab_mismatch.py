"""A draft or tokenizer whose vocabulary does not fit the target is refused at load: one line naming both sizes,
exit 2, and no result file (item: vocabularies meet in the draft LM, the EAGLE d2t map and the tokenizer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.tiny_models import VOCAB_SIZE, data_dir
from tests.support.cli_run import main_exit

SMALL_VOCAB = VOCAB_SIZE - 24


@pytest.fixture(scope="module")
def small_vocab_draft(tiny_model_dir, tmp_path_factory) -> Path:
    """The target's weights and tokenizer with its embedding and head cut to SMALL_VOCAB rows."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path_factory.mktemp("small_vocab_draft")
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    model.resize_token_embeddings(SMALL_VOCAB)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def large_tokenizer(tiny_model_dir, tmp_path_factory) -> Path:
    """The target's tokenizer with 40 added tokens: ids past the model's embedding."""
    from transformers import AutoTokenizer

    out = tmp_path_factory.mktemp("large_tokenizer")
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.add_tokens([f"<extra_{i}>" for i in range(40)])
    tokenizer.save_pretrained(out)
    return out


def _main(args: list[str], monkeypatch, capsys) -> tuple[int, str]:
    code, _, err = main_exit(args, monkeypatch, capsys)
    return code, err


def _bench(command: str, results: Path, workload: list[str]) -> list[str]:
    return [command, *workload, "--device", "cpu", "--data-dir", str(data_dir()), "--limit", "2", "--max-tokens",
            "4", "--kv-cache-gb", "0.02", "--results-dir", str(results), "--quiet"]


COMMANDS = {
    "sweep": lambda results: _bench("sweep", results, ["--shots", "1", "-k", "2"]),
    "gsm8k": lambda results: _bench("gsm8k", results, ["--shots", "1", "-k", "2"]),
    "mtbench": lambda results: _bench("mtbench", results, ["-k", "2"]),
    "generate": lambda results: ["generate", "--device", "cpu", "-k", "2", "-p", "hello", "--max-tokens", "4"],
    "check": lambda results: ["check", "--device", "cpu", "-k", "2", "--checks", "greedy", "--max-tokens", "4"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_smaller_draft_vocabulary_is_refused_before_any_file(command, tiny_model_dir, small_vocab_draft, tmp_path,
                                                             monkeypatch, capsys):
    results = tmp_path / "results"
    args = [*COMMANDS[command](results), "--target", str(tiny_model_dir), "--method", "draft",
            "--draft", str(small_vocab_draft)]
    monkeypatch.chdir(tmp_path)
    code, err = _main(args, monkeypatch, capsys)
    assert code == 2, err
    # one error line, the last; before it at most the progress line of the phase that loaded the models
    lines = err.strip().splitlines()
    assert lines[-1].startswith("error: ") and sum(line.startswith("error:") for line in lines) == 1, err
    assert all(not line.startswith("Traceback") for line in lines) and len(lines) <= 2, err
    assert f"draft vocabulary ({SMALL_VOCAB} ids)" in err and f"target's ({VOCAB_SIZE} ids)" in err
    assert list(tmp_path.iterdir()) == []  # no results dir, no run dir, no parts


def test_tokenizer_larger_than_the_model_is_refused(tiny_model_dir, large_tokenizer, tmp_path, monkeypatch, capsys):
    results = tmp_path / "results"
    args = [*COMMANDS["sweep"](results), "--target", str(tiny_model_dir), "--method", "ngram",
            "--tokenizer", str(large_tokenizer)]
    code, err = _main(args, monkeypatch, capsys)
    assert code == 2, err
    assert f"tokenizer has {VOCAB_SIZE + 40} ids" in err and f"vocabulary has {VOCAB_SIZE}" in err
    assert not results.exists()


def test_larger_draft_vocabulary_is_refused():
    """Swapped roles: the draft would propose ids the target lacks."""
    from specbench.errors import SpecbenchError
    from specbench.models.vocab import check_draft_vocab

    with pytest.raises(SpecbenchError, match=rf"draft vocabulary \({VOCAB_SIZE} ids\).*\({SMALL_VOCAB} ids\)"):
        check_draft_vocab(VOCAB_SIZE, SMALL_VOCAB)

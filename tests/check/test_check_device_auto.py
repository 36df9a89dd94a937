"""`specbench check` with its default `--device auto` on a CPU machine, through the paths `--budget fast` skips
(the sampled check's teacher-forced laws, greedy's near-tie probe): `auto` reached torch.device there and every
such check crashed after minutes of work."""

from __future__ import annotations

import pytest

from specbench.errors import ExitStatus
from tests.support.cli_run import run_main
from tests.support.tiny_models import data_dir


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory):
    from specbench.selftest.tiny import build_tiny_pair
    from tests.support.tiny_models import VOCAB_SIZE, load_tiny_tokenizer

    target, draft = build_tiny_pair(tmp_path_factory.mktemp("pair"), seed=0, vocab_size=VOCAB_SIZE)
    for path in (target, draft):
        load_tiny_tokenizer().save_pretrained(path)
    return target, draft


@pytest.mark.slow
def test_sampled_and_greedy_run_with_device_auto(tiny_pair):
    target, draft = tiny_pair
    result = run_main("check", "--target", target, "--draft", draft, "--device", "auto", "--checks",
                      "greedy,sampled", "--max-tokens", "6", "-k", "2", "--data-dir", str(data_dir()))
    assert "crashed" not in result.stdout, result.stdout
    assert result.exit_code == ExitStatus.PASSED, result.stdout + result.stderr


def test_a_crashing_check_exits_crashed_not_failed(tiny_pair, monkeypatch):
    import specbench.check.battery as battery

    def explode(*args, **kwargs):
        raise RuntimeError("a bug inside the check")

    monkeypatch.setattr(battery, "check_greedy", explode)
    target, draft = tiny_pair
    result = run_main("check", "--target", target, "--draft", draft, "--device", "cpu", "--checks", "greedy",
                      "--max-tokens", "4", "-k", "2", "--data-dir", str(data_dir()))
    assert "crashed: RuntimeError: a bug inside the check" in result.stdout
    assert result.exit_code == ExitStatus.CRASHED

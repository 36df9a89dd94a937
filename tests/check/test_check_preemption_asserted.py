"""Issue 40: `specbench check` printed "with forced preemption (0 preemptions)" and passed. Its prompts are text, and
the forced-preemption pool was sized by their characters, so it held every request with room to grow. The pool is
now sized in tokens, and a run meant to force preemption that preempted nothing says so in its row and in a warning
under the table (not a failure: the engine did nothing wrong; the harness could not create the condition)."""

from __future__ import annotations

from specbench.check.engine_defaults import check_engine
from specbench.check.greedy import check_greedy
from specbench.check.prompts import check_prompts
from specbench.check.setup import CheckSetup
from tests.support.tiny_models import data_dir


def _text_setup(pair, prompts=None) -> CheckSetup:
    engine = check_engine(target=str(pair.target), method="draft", draft=str(pair.draft), device="cpu",
                          max_num_steps=3)
    return CheckSetup(engine, tuple(prompts or check_prompts(str(data_dir()))), 32)


def test_text_prompts_are_sized_in_tokens_so_the_pool_preempts(sensitive_pairs):
    setup = _text_setup(sensitive_pairs(0))  # `specbench check`'s own prompts: GSM8K and MT-Bench text
    assert all(isinstance(p, str) for p in setup.prompts)
    result = check_greedy(setup)
    num = int(result.detail.split("with forced preemption (")[1].split()[0])
    assert result.passed and num > 0, result.detail


def test_a_forced_preemption_run_without_a_preemption_says_it_is_not_covered(sensitive_pairs):
    from specbench.check.result import format_table

    one = _text_setup(sensitive_pairs(0), prompts=("Natalia sold clips to 48 of her friends.",))
    result = check_greedy(one)  # one request alone: no pool it can finish in can preempt it
    assert result.passed, result.detail  # the outputs are fine
    assert "with forced preemption (0 preemptions)" in result.detail and "preemption NOT covered" in result.detail
    assert "1/1 requests identical" in result.detail
    assert format_table([result]).splitlines()[-1].startswith("WARNING: preemption NOT covered in greedy")


def test_a_windowed_plain_engine_says_preemption_is_not_covered_without_failing(tmp_path):
    """Every layer windowed and no draft KV: blocks are released as requests grow, so no pool forces preemption (the
    selftest's window+MoE plain row); the row says so instead of claiming the coverage."""
    from specbench.selftest.setups import WINDOW_MOE, plain_setup, selftest_setups

    setup = plain_setup(selftest_setups(str(tmp_path), 0, ("draft",), 3, target_name=WINDOW_MOE)["draft"])
    result = check_greedy(setup)
    assert result.passed, result.detail
    assert "(0 preemptions)" in result.detail and "every layer windowed" in result.detail
    assert "preemption NOT covered" in result.detail

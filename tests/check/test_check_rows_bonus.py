"""Issue 25 item 7: the rows check's bonus batch drafts the bonus row's likeliest token last, so a verifier that
leaves the last draft row's law in the bonus residual is detected, with its power stated; drafting random tokens
(the old batch) it went unseen."""

from __future__ import annotations

import math

import numpy as np
import torch

from specbench.check.row_batches import bonus_batch
from specbench.check.rows import (
    BONUS_NUM_DRAFT, ROWS_ALPHA, WARPING, _run, check_rows, fit_test, power_vs_law, rows_needed,
)
from specbench.check.setup import CheckSetup
from specbench.config import EngineConfig
from specbench.faults import wrap_verifier
from specbench.speculation.verify.chain import verify


def _bonus_p_and_power(is_last_draft_likeliest: bool) -> tuple[float, float]:
    batch = bonus_batch(math.ceil(1.05 * rows_needed()), BONUS_NUM_DRAFT, WARPING, np.random.default_rng(0),
                        is_last_draft_likeliest)
    buggy = wrap_verifier("bonus-residual-keeps-last-draft", verify)
    torch.manual_seed(0)
    out, accepted = _run(buggy, batch, WARPING, torch.device("cpu"))
    assert (accepted == BONUS_NUM_DRAFT).all()
    p = fit_test("bonus", batch.bonus_dist, out[:, BONUS_NUM_DRAFT]).p_value
    return p, power_vs_law(batch.bonus_dist, batch.residual_bonus_dist)


def test_random_last_drafts_hide_the_residual_bug_and_likeliest_ones_show_it():
    old_p, old_power = _bonus_p_and_power(False)
    assert old_power < 0.05 and old_p > ROWS_ALPHA, (old_p, old_power)  # the old batch: no power, passes
    new_p, new_power = _bonus_p_and_power(True)
    assert new_power > 0.99 and new_p < ROWS_ALPHA, (new_p, new_power)


def test_rows_check_detects_the_residual_bug_and_states_its_power():
    setup = CheckSetup(EngineConfig(target="unused", method="draft", draft="unused", max_num_steps=3), ())
    clean = check_rows(setup)
    assert clean.passed and "power 1.00 vs the last draft row's law left in the bonus residual" in clean.detail, \
        clean.detail
    mutant = check_rows(setup.with_inject("bonus-residual-keeps-last-draft"))
    assert not mutant.passed and "bonus" in mutant.detail, mutant.detail

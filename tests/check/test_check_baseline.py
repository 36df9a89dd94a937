"""`specbench check --save-baseline FILE`, then `--baseline FILE`: the clean engine passes, and every draft-side
(acceptance-only) fault fails, naming the positions whose acceptance dropped, for the draft LM and EAGLE."""

from __future__ import annotations

import re

import pytest
from tests.support.tiny_models import data_dir
from typer.testing import CliRunner

from specbench.check.baseline import load_baseline
from specbench.faults import FAULTS
from specbench.faults.catalog import needs_chunked_prefill, needs_tree_shape

PREEMPTION_ONLY = {"draft-state-kept-on-preemption"}  # the baseline run never preempts: test_check_preemption.py
# Phase-hook mutants only: the fast-path mutants (f.path) are for the new sentinel (docs/path-mutants.md); the
# tree mutants are inert on these chain runs (tests/check/test_tree_oracle.py), the chunk mutants on whole-prompt
# prefill (tests/faults/test_chunk_mutants.py).
DRAFT_FAULTS = [name for name, f in FAULTS.items()
                if f.layer == "draft" and name not in PREEMPTION_ONLY and not f.path and not needs_tree_shape(name)
                and not needs_chunked_prefill(name)]


def _baseline_line(pair, method: str, *args: str) -> tuple[int, str]:
    from specbench.cli.app import app

    draft = pair.draft if method == "draft" else pair.eagle3
    result = CliRunner().invoke(app, ["check", "--target", str(pair.target), "--method", method, "--draft", str(draft),
                                      "--data-dir", str(data_dir()), "--checks", "baseline", "--kv-cache-gb", "0.05",
                                      *args], catch_exceptions=False)
    return result.exit_code, next(line for line in result.output.splitlines() if line.startswith("baseline"))


@pytest.mark.slow  # every acceptance-only fault, 3 setups: ~15 s
@pytest.mark.parametrize("method, seed", [("draft", 0), ("draft", 1), ("eagle3", 0)])
def test_baseline_fails_every_acceptance_only_fault_with_the_positions_that_dropped(sensitive_pairs, tmp_path,
                                                                                   method, seed):
    pair = sensitive_pairs(seed)
    path = tmp_path / "baseline.json"
    code, _ = _baseline_line(pair, method, "--save-baseline", str(path))
    saved = load_baseline(path)
    assert code == 0 and (saved.method, saved.num_steps) == (method, 3)
    # Every position accepts often enough to drop measurably (EAGLE-3's later steps, fed its own hidden instead of
    # a feature, accept least: ~10 of 116 drafts, so a drop to ~0 still has p < 0.005).
    assert min(saved.acceptance_per_pos) > (0.1 if method == "draft" else 0.05), saved

    code, line = _baseline_line(pair, method, "--baseline", str(path), "--seed", "7")
    assert code == 0 and " PASS " in line, line

    num_failed = 0
    for name in (n for n in DRAFT_FAULTS if method in FAULTS[n].methods):
        code, line = _baseline_line(pair, method, "--baseline", str(path), "--inject", name)
        now = [float(x) for x in re.search(r"acceptance per position ([\d. ]+) vs", line).group(1).split()]
        detectable = [float(x) for x in re.search(r"detectable drop ([\d. ]+)\)", line).group(1).split()]
        dropped = {int(p): (float(b), float(n)) for p, b, n in re.findall(r"pos (\d+): ([\d.]+) -> ([\d.]+)", line)}
        lower = {i + 1 for i, (b, n) in enumerate(zip(saved.acceptance_per_pos, now)) if n < b}
        assert set(dropped) <= lower, f"{name}: {line}"  # flagged positions did drop
        assert (code == 1) == bool(dropped), f"{name}: {line}"
        # A drop larger than the stated detectable one is flagged (power 0.8 is a statement about chance, so the
        # margin keeps this from being a coin flip); smaller drops on this many drafts may be noise.
        big = [i for i, (b, n, d) in enumerate(zip(saved.acceptance_per_pos, now, detectable)) if b - n > 1.3 * d]
        assert not big or code == 1, f"{name}: {line}"
        num_failed += code == 1
    assert num_failed >= 2, "acceptance-only faults on this pair cost enough acceptance to be flagged"

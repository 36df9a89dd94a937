"""The sweep summary's "is speculation working?" warnings, on hand-made cells."""

from __future__ import annotations

from specbench.bench.speculation_notes import speculation_lines


def _cell(cell_id: str, k: int = 3, **values):
    row = {"cell_id": cell_id, "num_steps": k, "num_draft_tokens": 30, "num_accepted_tokens": 12, "speedup": 1.4,
           "temperature": 0.0, "agreement_text": 1.0, "is_drift_suspect": False}
    row.update(values)
    return row


def test_a_healthy_sweep_says_nothing():
    assert speculation_lines([_cell("k0", k=0, num_draft_tokens=0, speedup=None), _cell("k3")]) == []


def test_each_way_speculation_fails_to_work_is_named():
    cells = [_cell("k0", k=0, num_draft_tokens=0), _cell("off", num_draft_tokens=0, num_accepted_tokens=0),
             _cell("none", num_accepted_tokens=0), _cell("slow", speedup=0.8),
             _cell("counts", is_acceptance_consistent=False, acceptance_length=2.5,
                   acceptance_length_from_positions=1.5)]
    text = "\n".join(speculation_lines(cells))
    assert "speculation silently off: 1 of 4 speculative cells drafted nothing (off)" in text
    assert "nothing accepted: 1 speculative cells drafted tokens and accepted none (none 30 drafted)" in text
    assert "slower than k = 0 at equal quality in 1 of 4 speculative cells (slow speedup 0.800)" in text
    assert "counter bug" in text and "counts AL 2.500 vs 1.500" in text


def test_slower_is_not_claimed_on_drift_or_broken_outputs_or_within_jitter():
    cells = [_cell("drift", speedup=0.8, is_drift_suspect=True), _cell("jitter", speedup=0.98),
             _cell("broken", speedup=0.8, agreement_text=0.5),  # outputs differ: correctness leads, not speed
             _cell("unknown", speedup=None)]
    assert speculation_lines(cells) == []

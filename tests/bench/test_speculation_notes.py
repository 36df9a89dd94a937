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


def test_acceptance_definitions_side_by_side_and_a_warning_when_they_part():
    from specbench.bench.acceptance_notes import acceptance_definition_lines

    def cell(pooled, per_request, repeat=0):
        return {"cell_id": f"r{repeat}", "num_steps": 2, "temperature": 0.0, "concurrency": 4,
                "acceptance_length": pooled, "acceptance_length_per_request": per_request, "acceptance_rate": 0.4,
                "cond_accept_rate_pos_1": 0.6, "cond_accept_rate_pos_2": None}
    lines = acceptance_definition_lines([cell(1.8, 1.82), cell(1.8, 1.78, 1), {"num_steps": 0}])
    assert lines[-1] == ("  t=0 c=4 k=2: AL pooled 1.800, per-request mean 1.800, rate A/T_d 40.0%, conditional per "
                         "position 60% -")
    assert not any(line.startswith("WARNING") for line in lines)
    apart = acceptance_definition_lines([cell(1.8, 2.2)])
    assert apart[0].startswith("WARNING: pooled and per-request acceptance lengths differ by > 5% (t=0 c=4 k=2 "
                               "pooled 1.800 vs per-request 2.200)")


def test_rounds_by_drafted_length_and_a_warning_across_k():
    """An n-gram drafter drafts fewer than k where it finds a short match (and servers with adaptive k do): the
    rounds by drafted length come from the per-position counts (D_L - D_(L+1)); several k: their rates differ in
    kind."""
    from specbench.bench.acceptance_notes import acceptance_definition_lines
    from specbench.bench.cell_summary import rounds_by_drafted_length

    requests = [{"num_drafted_per_pos": [10, 8, 5]}, {"num_drafted_per_pos": [4, 4, 4]}, {"num_drafted_per_pos": None}]
    assert rounds_by_drafted_length(requests, 3) == [2, 3, 9]
    assert rounds_by_drafted_length(requests, 0) is None and rounds_by_drafted_length(requests[2:], 3) is None

    def cell(k, lengths):
        return {"num_steps": k, "temperature": 0.0, "concurrency": 1, "acceptance_length": 1.5,
                "num_rounds_by_drafted_length": lengths}

    variable = acceptance_definition_lines([cell(3, [2, 3, 9]), cell(3, [0, 1, 9])])
    assert variable[-1].endswith("rounds by drafted length 1: 8%, 2: 17%, 3: 75%"), variable
    assert not any(line.startswith("WARNING") for line in variable)
    fixed = acceptance_definition_lines([cell(2, [0, 7]), cell(4, None)])
    assert not any("drafted length" in line for line in fixed)
    assert fixed[0] == ("WARNING: acceptance rates of k = 2, 4 are not comparable across k (a longer draft lowers "
                        "A / T_d at equal drafting quality): compare per position, or speedup")

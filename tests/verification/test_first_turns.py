"""One planner of the first turns every verification asks (verification/first_turns.py): the prompts the sweep's own
cells ask, greedy, in sample order, whatever k."""

from __future__ import annotations

from specbench.runs.cell_key import CellKey
from specbench.runs.sweep_config import SweepConfig
from specbench.runs.turns import TurnPlanner, turn_settings
from specbench.verification.first_turns import first_turns, load_samples


def test_first_turns_are_the_sweep_cells_first_turns_greedy():
    config = SweepConfig(workload="gsm8k", limit=3, max_tokens=16)
    planned = first_turns(config, None, tokenize=False)
    loaded = load_samples(config)
    assert [t.sample.sample_id for t in planned.turns] == [s.sample_id for s in loaded.samples]
    assert all(t.turn_index == 0 and t.params.temperature == 0.0 and t.params.max_tokens == 16 for t in planned.turns)
    # a cell at any k plans the same prompts (turn settings depend on temperature and repeat only)
    cell = turn_settings(config, CellKey(0, 0.0, 1, 5), loaded.workload.is_chat)
    planner = TurnPlanner(loaded.workload, None, tokenize=False)
    assert [planner.first_turn(s, cell).prompt for s in loaded.samples] == [t.prompt for t in planned.turns]
    assert first_turns(config, None, tokenize=False, loaded=loaded).turns == planned.turns

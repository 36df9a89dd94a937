"""The sweep's first warning: greedy speculative cells whose outputs differ from k = 0 (runs/greedy_divergence.py).
Speculative decoding is lossless at temperature 0, so such a cell measures a broken engine; its speedup and
acceptance are printed below but are not a result."""

from __future__ import annotations

from collections.abc import Sequence

from specbench.runs.greedy_divergence import diverges, same_text
from specbench.runs.records import Row

MAX_NAMED = 4


def correctness_lines(cells: Sequence[Row]) -> list[str]:
    broken = [r for r in cells if diverges(r)]
    if not broken:
        return []
    greedy = [r for r in cells if same_text(r) is not None]
    named = ", ".join(f"{r['cell_id']} same text {same_text(r):.3f}" for r in broken[:MAX_NAMED])
    more = f", +{len(broken) - MAX_NAMED} more" if len(broken) > MAX_NAMED else ""
    return [f"WARNING: CORRECTNESS: in {len(broken)} of {len(greedy)} greedy speculative cells the outputs differ "
            f"from k=0 ({named}{more}): speculative decoding must be lossless at temperature 0; the speed and "
            "acceptance of these cells are not a result"]

"""Lines the sweep summary adds about the load pattern, the prefix cache and goodput of its cells."""

from __future__ import annotations

from collections.abc import Sequence

from specbench.runs.records import Row, is_null


def load_notes(cells: Sequence[Row]) -> list[str]:
    notes = []
    durations = sorted({c["duration_limit_s"] for c in cells if not is_null(c.get("duration_limit_s"))})
    if durations:
        notes.append(f"duration-bounded cells: {', '.join(f'{d:g}' for d in durations)} s of arrivals each, "
                     "samples cycled (a sample may run several times per cell)")
    ramps = sorted({(c["ramp_up_start_rps"], c["ramp_up_end_rps"]) for c in cells
                    if not is_null(c.get("ramp_up_strategy"))})
    notes += [f"arrival rate ramped linearly from {a:g} to {b:g} req/s in every cell" for a, b in ramps]
    reset = sorted({c["cache_reset_note"] for c in cells if c.get("is_cache_reset")})
    not_reset = sorted({c["cache_reset_note"] for c in cells if c.get("is_cache_reset") is False})
    notes += [f"prefix cache reset before each cell ({note})" for note in reset]
    notes += [f"prefix cache not reset: {note}" for note in not_reset]
    slos = sorted({c["goodput_slo"] for c in cells if not is_null(c.get("goodput_slo"))})
    notes += [f"goodput: requests meeting every bound of {slo} (ms)" for slo in slos]
    return notes

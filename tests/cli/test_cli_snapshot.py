"""The command line is unchanged by how it is declared: every command's options (flags, short forms, --x/--no-x,
defaults, help, panels), the rendered --help of the sweep family, the SweepConfig (or error line) a set of command
lines turns into, and validate_config's verdicts all equal the snapshot taken before the sweep options were
generated from SweepConfig (tests/cli/cli_snapshot.py says how to regenerate it)."""

from __future__ import annotations

import json

import pytest

from tests.cli.cli_snapshot import SNAPSHOT, build

# Deliberate differences from the snapshot. Bounds are now checked in SweepConfig's field order, so with two
# options out of bounds at once, --top-p/--top-k are reported before --request-rate, --burstiness, --warmup and
# --repeats (each message is unchanged; only which of two errors comes first).
DELIBERATE = {"validate": {
    '{"burstiness": "0.0", "top_k": 0}': "error: --top-k must be -1 (off) or >= 1, got 0",
    '{"repeats": 0, "top_p": "1.5"}': "error: --top-p must be in (0, 1], got 1.5",
    '{"request_rate": "-1.0", "top_p": "0.0"}': "error: --top-p must be in (0, 1], got 0.0",
    '{"top_k": 0, "warmup": 2000}': "error: --top-k must be -1 (off) or >= 1, got 0",
}}


@pytest.fixture(scope="module")
def pair() -> tuple[dict, dict]:
    return json.loads(SNAPSHOT.read_text(encoding="utf-8")), json.loads(json.dumps(build(), ensure_ascii=False))


@pytest.mark.parametrize("part", ["library_defaults", "params", "help", "runs", "validate"])
def test_matches_the_snapshot(pair, part):
    stored, now = pair
    expected = {**stored[part], **DELIBERATE.get(part, {})}
    assert set(now[part]) == set(expected)
    for key, value in expected.items():
        if part == "params":  # the set of options; their order is what --help shows, compared under "help"
            assert sorted(now[part][key]) == sorted(value), key
        else:
            assert now[part][key] == value, key

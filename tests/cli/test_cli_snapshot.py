"""The command line is unchanged by how it is declared: every command's options (flags, short forms, --x/--no-x,
defaults, help, panels), the rendered --help of the sweep family, and the SweepConfig (or error line) a set of
command lines turns into all equal the snapshot (tests/cli/cli_snapshot.py says how to regenerate it)."""

from __future__ import annotations

import json

import pytest

from tests.cli.cli_snapshot import SNAPSHOT, build


@pytest.fixture(scope="module")
def pair() -> tuple[dict, dict]:
    return json.loads(SNAPSHOT.read_text(encoding="utf-8")), json.loads(json.dumps(build(), ensure_ascii=False))


@pytest.mark.parametrize("part", ["library_defaults", "params", "help", "runs", "validate"])
def test_matches_the_snapshot(pair, part):
    stored, now = pair
    assert set(now[part]) == set(stored[part])
    for key in stored[part]:
        if part == "params":  # the set of options; their order is what --help shows, compared under "help"
            assert sorted(now[part][key]) == sorted(stored[part][key]), key
        else:
            assert now[part][key] == stored[part][key], key

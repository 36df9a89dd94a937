"""`specbench selftest`: the check battery against every injected fault on a tiny random pair (mutation table)."""

from __future__ import annotations

from typing import Annotated

import typer

from specbench.cli.app import app


@app.command()
def selftest(
    seeds: Annotated[str, typer.Option("--seeds", help="comma list: one clean row per seed (false-alarm check)")]
    = "0,1",
    num_steps: Annotated[int, typer.Option("--num-steps", "-k")] = 3,
) -> None:
    """Mutation table (fault x check -> detected, seconds); exit 1 if a fault is missed or the clean engine fails."""
    from specbench.selftest.runner import format_mutation_table, selftest_ok, timed_selftest

    rows, seconds = timed_selftest(seeds=tuple(int(s) for s in seeds.split(",")), num_steps=num_steps)
    print(format_mutation_table(rows))
    ok = selftest_ok(rows)
    print(f"selftest {'passed' if ok else 'FAILED'} in {seconds:.0f} s")
    raise typer.Exit(0 if ok else 1)

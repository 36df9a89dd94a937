"""`specbench selftest`: the check battery against every injected fault on tiny random models (mutation table)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from typer.core import TyperCommand

from specbench.check.names import CHECKS
from specbench.cli.sweep_options import sweep_option


class FaultListHelp(TyperCommand):
    """Help that ends with every fault, one line each: what it breaks and which check should catch it (declared
    beside each fault: faults/fault.py; the catalog imports torch, so only when help is shown)."""

    def format_help(self, ctx, formatter) -> None:
        if "Faults (--faults" not in (self.help or ""):
            self.help = f"{self.help}\n\nFaults (--faults here, --inject elsewhere):\n" + "\n".join(
                escape(line) for line in fault_help_lines())
        super().format_help(ctx, formatter)


def fault_help_lines() -> list[str]:
    from specbench.faults import FAULTS

    return [fault.help_line for fault in FAULTS.values()]


def _list_faults(value: bool) -> None:
    """--list-faults: the faults, one line each, and exit (before any option is checked)."""
    if value:
        print("\n".join(fault_help_lines()))
        raise typer.Exit(0)


def selftest(
    seeds: Annotated[str, typer.Option("--seeds", help="comma list of seeds and ranges (0-29, 0-3,7): one clean row "
                                       "per seed and method (false-alarm check); default 0,1 on CPU, 0-2 on CUDA "
                                       "(one seed per tiny-model variant: each reaches a CUDA fast path)")] = "",
    methods: Annotated[str, typer.Option("--methods", help="comma list of speculative methods (default: every "
                                         "registered one: draft LM, EAGLE-1 and EAGLE-3 heads built from the tiny "
                                         "target, MTP shipped in a copy of it, n-gram on prompts that repeat)")] = "",
    faults: Annotated[str, typer.Option("--faults", help="comma list of faults to run (default: every fault "
                                        "the method's proposer hosts); none: clean rows only (false alarms over "
                                        "many seeds)")] = "",
    checks: Annotated[str, typer.Option("--checks", help=f"comma list of {','.join(CHECKS)}")] = ",".join(CHECKS),
    num_steps: Annotated[int, typer.Option("--num-steps", "-k")] = 3,
    device: Annotated[str, typer.Option("--device", help="cpu | cuda | auto: on CUDA the engine replays CUDA "
                                        "graphs and the invariant sweep runs with graphs on and off")] = "cpu",
    jobs: Annotated[str, typer.Option("--jobs", "-j", help="worker processes running rows side by side | auto: "
                                      "on CUDA min(8, CPU cores / 2), on CPU min(8, CPU cores); 1: in-process, one "
                                      "row after another; the rows are the same for any value")] = "auto",
    window_moe: Annotated[bool, typer.Option("--window-moe/--no-window-moe", help="also run the first seed on the "
                                             "sliding-window + MoE tiny target (Qwen3-MoE, every layer windowed), "
                                             "where the window and MoE faults run")] = True,
    hybrid: Annotated[bool, typer.Option("--hybrid/--no-hybrid", help="also run the first seed on the hybrid tiny "
                                         "target (Qwen3-Next: Gated DeltaNet + gated attention; plain, draft LM, "
                                         "n-gram, EAGLE-3, its own MTP module), where the recurrent-state faults "
                                         "run, and on the Mamba-2 hybrid tiny target (Bamba; plain and n-gram, "
                                         "the greedy check)")] = True,
    trees: Annotated[bool, typer.Option("--trees/--no-trees", help="also run each method that drafts trees with "
                                        "tree drafts (eagle_topk 2, 6 draft tokens), where the tree faults run")] = True,
    chunked: Annotated[bool, typer.Option("--chunked/--no-chunked", help="also run each method with chunked prefill "
                                          "(8-token steps; greedy check against whole-prompt prefill, metrics check), where the "
                                          "chunked-prefill faults run")] = True,
    constrained: Annotated[bool, typer.Option("--constrained/--no-constrained", help="also run each method with "
                                              "every request under a grammar (JSON schema, regex; greedy check: "
                                              "validity and identity with plain constrained decoding), where the "
                                              "grammar faults run; skipped without the grammar extra")] = True,
    record: Annotated[str, typer.Option("--record", help="append each finished row to this JSON-lines file; the "
                                        "rows it holds from a run with the same options are taken, not run again "
                                        "(a selftest longer than a machine's time limit finishes over several "
                                        "runs)")] = "",
    quiet: sweep_option("quiet") = False,
    list_faults: Annotated[bool, typer.Option("--list-faults", help="list every fault (what it breaks, which check "
                                              "should catch it) and exit", callback=_list_faults,
                                              is_eager=True)] = False,
) -> None:
    """Mutation table (fault x check -> detected, seconds) and coverage table (execution path x check); exit 1 if a
    fault is missed, the clean engine fails, or a production path of the device went unexercised."""
    from specbench.runs.comma_lists import parse_int_ranges
    from specbench.selftest.coverage import coverage_verdict, format_coverage
    from specbench.selftest.parallel import default_jobs, default_seeds
    from specbench.selftest.runner import (
        METHODS,
        false_alarms,
        format_mutation_table,
        method_label,
        row_progress,
        selftest_coverage,
        selftest_ok,
        timed_selftest,
    )

    seed_list = parse_int_ranges(seeds, "--seeds") if seeds else default_seeds(device)
    rows, seconds = timed_selftest(seeds=seed_list, methods=_names(methods) or METHODS,
                                   faults=_names(faults) or None, checks=_names(checks), num_steps=num_steps,
                                   device=device, on_row=row_progress(quiet), jobs=_jobs(jobs) or default_jobs(device),
                                   window_moe=window_moe, trees=trees, chunked=chunked, hybrid=hybrid,
                                   constrained=constrained, record_path=record or None)
    print(format_mutation_table(rows, _names(checks)))
    for row in rows:
        for crashed in (r for r in row.results if r.is_crashed):
            print(f"{method_label(row)} seed {row.seed}{' ' + row.target if row.target else ''} {row.inject or 'clean'} "
                  f"{crashed.name}: {crashed.detail}")
        if row.inject is None:
            greedy = next((r for r in row.results if r.name == "greedy"), None)
            if greedy is not None and row.method == rows[0].method:  # the reference is the same for every method
                print(f"greedy, {method_label(row)} seed {row.seed}{' ' + row.target if row.target else ''} clean: "
                      f"{greedy.detail}")
            sampled = next((r for r in row.results if r.name == "sampled" and not r.skipped), None)
            if sampled is not None:
                print(f"sampled, {method_label(row)} seed {row.seed} clean: {sampled.detail}")
            rows_check = next((r for r in row.results if r.name == "rows" and not r.skipped), None)
            if rows_check is not None and row.seed == rows[0].seed and not row.shape.is_tree:  # a tree row's: the same
                print(f"rows, {method_label(row)} seed {row.seed} clean: {rows_check.detail}")
    coverage = selftest_coverage(rows, device, _names(checks))
    print()
    print(format_coverage(coverage))
    print(coverage_verdict(coverage))
    num_clean = sum(row.inject is None for row in rows)
    print(f"false alarms: {len(false_alarms(rows))} of {num_clean} clean rows")
    ok = selftest_ok(rows) and coverage.is_complete
    print(f"selftest {'passed' if ok else 'FAILED'} in {seconds:.0f} s")
    raise typer.Exit(0 if ok else 1)


def _jobs(text: str) -> int | None:
    """--jobs: auto (None: the library picks by device) or a positive integer."""
    from specbench.errors import SpecbenchError

    if text.strip().lower() == "auto":
        return None
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise SpecbenchError(f"--jobs: {text!r} is not auto or a positive integer")
    return jobs


def _names(text: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip())

"""The greedy check on a constrained setup (CheckSetup.grammars, issue 46): every output is one its grammar allows
(check/grammar_validity.py, judged apart from the engine's grammar code), and token for token the plain constrained
reference's (check/reference.py: one masked row per step, so none of the drafts' mask walk, draft cut, rejection
rollback or bonus masking under test). With forced preemption once more: a preempted request's grammar state is
rebuilt from its committed tokens (grammar.rebuild). The shared-prefix scenario is not rerun: its prompts are not
the setup's, so they carry no grammars (the unconstrained rows run it)."""

from __future__ import annotations

import time

from specbench.check.greedy import lossless_verdict, reference_outputs, request_params
from specbench.check.grammar_validity import output_problem
from specbench.check.result import CheckResult
from specbench.check.setup import (CheckSetup, build_llm, forced_preemption_overrides, num_preemptions,
                                   preemption_coverage, prompt_list)


def _validity(llm, setup: CheckSetup, outs) -> tuple[bool, str]:
    """Every output against its grammar, with a library of its own (a fresh matcher per output)."""
    from specbench.grammar.library import GrammarLibrary

    engine = llm.engine
    eos = frozenset(engine.stop_checker.eos_token_ids)
    library = GrammarLibrary(llm.tokenizer, engine.vocab_size, eos)
    problems = [(i, p) for i, (spec, o) in enumerate(zip(setup.grammars, outs))
                if (p := output_problem(library, llm.tokenizer, spec, o.output_token_ids, o.finish_reason, eos))]
    finished = sum(o.finish_reason == "stop" for o in outs)
    detail = f"{len(outs) - len(problems)}/{len(outs)} valid under their grammars ({finished} finished)"
    if problems:
        detail += "; invalid: " + ", ".join(f"req {i}: {p}" for i, p in problems[:3])
    return not problems, detail


def _run(setup: CheckSetup, reference: list[tuple[int, ...]], **overrides) -> tuple[bool, str, object]:
    llm = build_llm(setup, **overrides)
    outs = llm.generate(prompt_list(setup), request_params(setup))
    same, same_detail = lossless_verdict(setup, outs, reference)
    valid, valid_detail = _validity(llm, setup, outs)
    return same and valid, f"{valid_detail}; {same_detail} (vs the plain constrained reference)", llm


def check_greedy_constrained(setup: CheckSetup, reference: list[tuple[int, ...]] | None = None,
                             preemption: bool = True) -> CheckResult:
    start = time.perf_counter()
    reference = reference if reference is not None else reference_outputs(setup)
    passed, detail, llm = _run(setup, reference)
    tokenizer = llm.tokenizer
    del llm  # one engine at a time
    detail = f"constrained ({len(setup.grammars)} grammars): {detail}"
    if preemption and not passed:  # caught already: a second witness would only double a mutant row's cost
        detail += "; forced-preemption run skipped (failed without it)"
    elif preemption:
        p_passed, p_detail, preempting = _run(setup, reference, **forced_preemption_overrides(setup, tokenizer))
        coverage = preemption_coverage(preempting)
        passed = passed and p_passed
        detail += (f"; with forced preemption ({num_preemptions(preempting)} preemptions): {p_detail}"
                   + (f"; {coverage.note}" if coverage.note else ""))
    return CheckResult("greedy", passed, detail, time.perf_counter() - start)

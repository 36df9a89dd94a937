"""How much of the battery `check` runs: `full` (the GPU default) or `fast` (a CPU sanity pass on a real model).

fast trims the prompt set and output length, runs the invariant sweep on its two real-verification cases only,
skips the greedy / oracle re-runs with forced preemption (every engine build reloads the models, which dominates on
CPU) and the sampled check's engine runs (each draws hundreds of sequences); the verifier row-type test needs no
model and always runs. Every check run under fast says what it skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from specbench.check.setup import CheckSetup
from specbench.errors import SpecbenchError


@dataclass(frozen=True)
class Budget:
    name: str
    max_prompts: int | None  # prompts the greedy / oracle / baseline checks use; None = every check prompt
    max_tokens: int | None  # cap on generated tokens per prompt; None = the setup's
    full_invariant_sweep: bool  # False: real verification at concurrency 4 and forced preemption only
    sampled_engine_runs: bool  # False: the sampled check's engine runs are skipped
    preemption_reruns: bool  # greedy and oracle run once more with a KV pool that forces preemption
    skipped: str  # what this budget leaves out, one phrase ("" = nothing)

    def apply(self, setup: CheckSetup) -> CheckSetup:
        prompts = setup.prompts if self.max_prompts is None else setup.prompts[: self.max_prompts]
        tokens = setup.max_tokens if self.max_tokens is None else min(setup.max_tokens, self.max_tokens)
        return replace(setup, prompts=prompts, max_tokens=tokens, grammars=setup.grammars[: len(prompts)])


BUDGETS = {
    b.name: b
    for b in (
        Budget("full", None, None, True, True, True, ""),
        Budget("fast", 2, 12, False, False, False,
               "fast budget skipped: prompts beyond 2, tokens beyond 12, the sampled check's engine runs, "
               "the greedy and oracle re-runs with forced preemption (the invariant sweep still preempts), "
               "the invariant sweep's forced-acceptance cases"),
    )
}


def resolve_budget(name: str) -> Budget:
    try:
        return BUDGETS[name]
    except KeyError:
        raise SpecbenchError(f"unknown budget {name!r}; supported: {', '.join(BUDGETS)}") from None

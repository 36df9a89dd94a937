"""Check 4, invariant sweep: debug invariants (INV-0, INV-SLOT; INV-STATE on hybrid targets: check/state_oracle.py)
on across batch shapes and forced acceptance.

Concurrency 1 and 4, k in {1, 3, 5}, forced full / zero / mixed acceptance rounds (synthetic acceptance:
the drafts are accepted by fiat, so every round shape is reached), real verification, and preemption
(a KV pool too small for the batch). On CUDA every case runs with CUDA graphs on (the engine built for the
largest k, so every k replays graphs: each replay checks the real metadata before loading it into the graph's
buffers) and with --enforce-eager.

On a hybrid target the forced-acceptance cases run without the prefix cache, so each k's rerun of the same prompts
re-prefills from position 0 in slots other requests held (a slot not reset shows there); the real-verification case
keeps it, so those reruns hit and resume from state snapshots (a wrong snapshot shows there), INV-STATE after every
step in both.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from specbench.attention.invariant_violation import InvariantViolation
from specbench.check.result import CheckResult
from specbench.check.setup import CheckSetup, build_llm, forced_preemption_overrides, prompt_list
from specbench.check.state_oracle import generate_checking_states
from specbench.models.loader import read_config
from specbench.sampling_params import SamplingParams

FORCED_ACCEPTANCE = {"full": (1.0,) * 5, "zero": (0.0,) * 5, "mixed": (0.9, 0.6, 0.4, 0.2, 0.1)}
NUM_STEPS = (1, 3, 5)
NUM_PROMPTS = 3
MAX_TOKENS = 10


def _sweep_cases(setup: CheckSetup, full_sweep: bool = True):
    """(label, engine overrides, ks, prompts) per engine; built lazily so a violation stops the sweep early.
    full_sweep=False (the fast budget) keeps real verification and preemption only, as do tree drafts (synthetic
    acceptance has no tree form: the engine refuses it). Concurrency 1 runs one prompt: more would repeat its batch
    shape prompt after prompt, one request at a time."""
    prompts = prompt_list(setup)[:NUM_PROMPTS]
    swept = replace(setup, prompts=setup.prompts[:NUM_PROMPTS],
                    max_tokens=min(setup.max_tokens, MAX_TOKENS))  # what the sweep runs
    recompute = {"enable_prefix_caching": False} if _is_hybrid(setup) else {}  # the module docstring
    for mode, rates in FORCED_ACCEPTANCE.items() if full_sweep and not setup.draft_shape.is_tree else ():
        for concurrency in (1, 4):
            yield (f"{mode} acceptance, concurrency {concurrency}",
                   {"synthetic_acceptance": rates, "max_concurrency": concurrency, **recompute}, NUM_STEPS,
                   prompts[:concurrency])
    yield "real verification, concurrency 4", {}, NUM_STEPS, prompts
    # sized once a tokenizer is at hand (text prompts are measured in tokens): the engine of the case before it
    yield ("preemption, real verification", lambda tokenizer: forced_preemption_overrides(swept, tokenizer,
                                                                                         max(NUM_STEPS)), (3,), prompts)


def _is_hybrid(setup: CheckSetup) -> bool:
    """Whether the setup's target is a model directory of a hybrid (recurrent-state) model."""
    config = Path(setup.engine.target) / "config.json"
    return config.is_file() and read_config(config).is_hybrid


def _graph_modes(setup: CheckSetup) -> tuple[bool, ...]:
    """(enforce_eager, ...) to run: both on CUDA, eager only elsewhere (graphs need CUDA)."""
    from specbench.engine.builder import resolve_device

    return (False, True) if resolve_device(setup.engine.device).type == "cuda" else (True,)


def check_invariants(setup: CheckSetup, full_sweep: bool = True) -> CheckResult:
    start = time.perf_counter()
    params = SamplingParams(max_tokens=min(setup.max_tokens, MAX_TOKENS), ignore_eos=True)
    num_runs = 0
    preempted = 0
    tokenizer = None  # the engines' (every case builds on the same target)
    modes = _graph_modes(setup)
    is_hybrid = False
    cases = [(eager, case) for case in _sweep_cases(setup, full_sweep) for eager in modes]
    for enforce_eager, (label, overrides, ks, prompts) in cases:
        label += ", eager" if enforce_eager else ", CUDA graphs"
        run_setup = setup
        if not enforce_eager:  # built for the largest k so that every k has captured graphs
            run_setup = setup.with_engine(max_num_steps=max(ks))
        if callable(overrides):
            overrides = overrides(tokenizer)
        llm = build_llm(run_setup, invariants=True, enforce_eager=enforce_eager, **overrides)
        tokenizer = llm.tokenizer
        is_hybrid = llm.engine.runner.model.config.is_hybrid
        for k in ks:
            llm.engine.set_num_steps(k)
            try:
                if is_hybrid:  # INV-STATE too: every slot against a recomputation, after every step
                    generate_checking_states(llm, prompts, params)
                else:
                    llm.generate(prompts, params)
            except InvariantViolation as exc:
                return CheckResult("invariants", False, f"{label}, k={k}: {exc}", time.perf_counter() - start)
            num_runs += 1
        preempted += sum(s.num_preempted for s in llm.engine.step_stats)
    graphs = "CUDA graphs on and off" if len(modes) == 2 else "eager (CUDA graphs need a GPU)"
    shapes = ("concurrency 1/4, k 1/3/5, full/zero/mixed acceptance" if full_sweep and not setup.draft_shape.is_tree
              else "real verification only")
    tree = f" / INV-TREE ({setup.draft_shape.label()})" if setup.draft_shape.is_tree else ""
    state = " / INV-STATE" if is_hybrid else ""
    detail = f"INV-0 / INV-SLOT{tree}{state} held over {num_runs} runs ({shapes}, {preempted} preemptions; {graphs})"
    return CheckResult("invariants", True, detail, time.perf_counter() - start)

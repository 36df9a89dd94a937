"""The mutants of the fast production paths (issue 25): each bends the built engine from outside (no hook in
production code, drafting left as production runs it) and really changes what the engine does on its path,
against an independent reference: the eager, synchronous, unfused plain loop.

Engines here are built to reach each path (no-bias target for the fused projections, the Triton verifier, graphs
captured for whole-round and drafted-ahead EAGLE rounds); the old selftest engines reach few of them, which is why
the old battery misses these bugs (docs/path-mutants.md)."""

from __future__ import annotations

import pytest

from specbench import LLM, SamplingParams
from specbench.check.reference import REFERENCE_SETTINGS
from specbench.faults import FAULTS, build_hooks, fault_names, injection
from specbench.faults.catalog import PATH_MUTANTS, selftest_faults
from specbench.faults.path_mutant import PathMutant
from specbench.runtime.hooks import PATH_HOOKS, PhaseHooks
from specbench.speculation.registry import execution_path
from specbench.selftest.tiny import build_tiny_pair, random_prompts
from tests.support.no_bias_tiny import build_cycling_target, build_no_bias_target

PATHS = ("decode.overlap", "eagle.ahead", "eagle.round_graph", "proj.fused", "proj.rope_store", "eagle.fused_head",
         "verify.triton", "proposer.ngram", "preemption")
ENGINE = {"dtype": "fp32", "device": "cpu", "block_size": 4, "num_kv_blocks": 128, "max_concurrency": 4}
REFERENCE = {**REFERENCE_SETTINGS, "method": "none"}  # the independent reference (check/reference.py)


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[str, str]:
    return build_tiny_pair(tmp_path_factory.mktemp("pair"), seed=0)


@pytest.fixture(autouse=True)
def production_invariants(monkeypatch):
    # As users run it: the debug invariants off (what they catch is the new sentinel's business, not the bug's).
    monkeypatch.setenv("SPECBENCH_DEBUG_INVARIANTS", "0")


def generate(target: str, prompts, max_tokens: int = 12, inject: str | None = None, **config):
    """(output tokens per prompt, accepted drafts in all, the engine); `inject`: the fault applied to the engine."""
    llm = LLM(target, fault=injection(inject), **{**ENGINE, **config})
    outs = llm.generate(prompts, SamplingParams(max_tokens=max_tokens, ignore_eos=True))
    accepted = sum(sum(o.stats.num_accepted_per_pos) for o in outs)
    return [list(o.output_token_ids) for o in outs], accepted, llm.engine


def triton_runnable() -> bool:
    pytest.importorskip("triton")
    from tests.support.kernel_testing import kernels_runnable_here

    return kernels_runnable_here()


def needs_kernels():
    from tests.support.kernel_testing import RERUN_REASON

    if not triton_runnable():
        pytest.skip(RERUN_REASON)


# ---- registration -------------------------------------------------------------------------------

def test_one_mutant_per_path_registered_and_listed():
    assert sorted(m.fault.path for m in PATH_MUTANTS) == sorted(PATHS)
    for mutant in PATH_MUTANTS:
        assert mutant.fault.name in fault_names() and FAULTS[mutant.fault.name] is mutant.fault
        # the selftest runs it where its path is production: every one on CUDA, the CPU's own paths on CPU
        assert mutant.fault.name in selftest_faults("cuda")
        assert (mutant.fault.name in selftest_faults("cpu")) == ("cpu" in execution_path(mutant.fault.path).production_on)


@pytest.mark.parametrize("mutant", PATH_MUTANTS, ids=lambda m: m.fault.name)
def test_path_mutants_bend_only_path_hooks_and_leave_drafting_as_production_runs_it(mutant):
    overridden = [name for name, value in vars(mutant).items() if callable(value) and not name.startswith("__")
                  and hasattr(PhaseHooks, name) and name != "install"]  # install: once, on the built engine
    assert set(overridden) <= PATH_HOOKS, f"{mutant.fault.name} bends a phase hook: {overridden}"
    a, b = build_hooks(mutant.fault.name), build_hooks(mutant.fault.name)
    assert isinstance(a, PathMutant) and type(a) is mutant and a is not b and not a.eager_drafting


def test_a_clean_engine_is_not_bent(pair):
    _, _, engine = generate(pair[0], random_prompts(1), max_tokens=2, method="draft", draft=pair[1],
                            max_num_steps=2)
    from specbench.engine.builder import select_verifier

    bent = [name for obj, names in ((engine.loop, ("_launch_plain_decode",)), (engine.committer, ("_commit",)),
                                    (engine.step_runner, ("prefill", "read_verify")), (engine.scheduler, ("_preempt",)),
                                    (engine.proposer, ("propose", "propose_ahead")))
            for name in names if name in vars(obj)]
    bent += [f"layer {i}" for i, layer in enumerate(engine.runner.model.layers) if "forward" in vars(layer)]
    assert not bent and engine.step_runner.verify_fn is select_verifier(engine.parts.verifier)


# ---- each mutant changes its path's behaviour ---------------------------------------------------

def test_overlap_stale_input_corrupts_the_overlapped_plain_loop(pair):
    prompts = random_prompts(3)
    reference, _, _ = generate(pair[0], prompts, **REFERENCE)
    clean, _, _ = generate(pair[0], prompts, method="none", async_scheduling=True)
    bent, _, _ = generate(pair[0], prompts, method="none", async_scheduling=True, inject="overlap-stale-input")
    assert clean == reference and bent != reference
    # The synchronous loop is untouched: the bug lives only where steps overlap.
    sync, _, _ = generate(pair[0], prompts, method="none", async_scheduling=False, inject="overlap-stale-input")
    assert sync == reference


def test_preempt_stale_computed_corrupts_requests_resumed_by_the_overlapped_loop(pair):
    prompts = random_prompts(3)
    reference, _, _ = generate(pair[0], prompts, **REFERENCE)
    clean, _, engine = generate(pair[0], prompts, num_kv_blocks=14)
    assert sum(s.num_preempted for s in engine.step_stats) > 0 and clean == reference
    bent, _, engine = generate(pair[0], prompts, num_kv_blocks=14, inject="preempt-stale-computed")
    assert sum(s.num_preempted for s in engine.step_stats) > 0 and bent != reference
    # No preemption, or the synchronous loop: no bug.
    roomy, _, _ = generate(pair[0], prompts, inject="preempt-stale-computed")
    sync, _, _ = generate(pair[0], prompts, num_kv_blocks=14, async_scheduling=False, inject="preempt-stale-computed")
    assert roomy == reference and sync == reference


def test_ngram_continuation_late_costs_acceptance_only(tmp_path):
    target = build_cycling_target(tmp_path)
    prompts = random_prompts(4)
    reference, _, _ = generate(target, prompts, max_tokens=24, **REFERENCE)
    clean, clean_accepted, _ = generate(target, prompts, max_tokens=24, method="ngram", max_num_steps=3)
    bent, bent_accepted, _ = generate(target, prompts, max_tokens=24, method="ngram", max_num_steps=3,
                                      inject="ngram-continuation-late")
    assert clean == reference and bent == reference  # lossless: the verifier rejects what it drafts wrong
    assert bent_accepted < 0.8 * clean_accepted, (bent_accepted, clean_accepted)


def test_triton_bonus_neighbour_corrupts_the_triton_verifier_only(pair):
    needs_kernels()
    prompts = random_prompts(3)
    reference, _, _ = generate(pair[0], prompts, **REFERENCE)
    spec = {"method": "draft", "draft": pair[1], "max_num_steps": 3}
    clean, _, _ = generate(pair[0], prompts, verifier="triton", **spec)
    bent, _, _ = generate(pair[0], prompts, verifier="triton", inject="triton-bonus-neighbour", **spec)
    torch_verifier, _, _ = generate(pair[0], prompts, verifier="torch", inject="triton-bonus-neighbour", **spec)
    assert clean == reference and bent != reference and torch_verifier == reference


@pytest.mark.parametrize("inject", ["fused-residual-twice", "rope-store-slot-shift"])
def test_fused_projection_mutants_corrupt_the_fused_path_only(tmp_path, inject):
    needs_kernels()
    target = build_no_bias_target(tmp_path)
    prompts = random_prompts(3)
    reference, _, _ = generate(target, prompts, max_tokens=6, **REFERENCE)
    unfused, _, _ = generate(target, prompts, max_tokens=6, method="none", inject=inject, fused_kernels="off")
    bent, _, _ = generate(target, prompts, max_tokens=6, method="none", inject=inject, fused_kernels="on")
    assert unfused == reference and bent != reference


# ---- EAGLE rounds: whole-round graphs and rounds drafted ahead (graphs "replay" by rerunning off CUDA) -------

def eagle_run(target: str, head: str, prompts, inject: str | None, async_scheduling: bool):
    from specbench.engine.builder import capture_graphs, graph_plan

    llm = LLM(target, fault=injection(inject), **{**ENGINE, "method": "eagle3", "draft": head, "max_num_steps": 3,
                                                  "async_scheduling": async_scheduling, "attention_backend": "triton", "enforce_eager": True})
    engine = llm.engine  # graphs captured by hand: off CUDA they "replay" by rerunning on their static buffers
    capture_graphs(graph_plan(llm.config, engine.device, engine.stop_checker.max_model_len), engine.runner,
                   engine.proposer, 3)
    outs = llm.generate(prompts, SamplingParams(max_tokens=14, ignore_eos=True))
    graphs = engine.proposer.round_graphs[3]
    return ([list(o.output_token_ids) for o in outs], sum(sum(o.stats.num_accepted_per_pos) for o in outs),
            graphs.num_replays, graphs.num_ahead)


@pytest.fixture(scope="module")
def eagle_pair(pair, tmp_path_factory) -> tuple[str, str]:
    from specbench.selftest.tiny_eagle import build_tiny_eagle_head

    return pair[0], build_tiny_eagle_head(pair[0], tmp_path_factory.mktemp("eagle3"))


@pytest.mark.slow  # ~4 min under the Triton interpreter on 2 busy cores
def test_ahead_positions_stale_costs_acceptance_of_rounds_drafted_ahead(eagle_pair, monkeypatch):
    needs_kernels()
    target, head = eagle_pair
    prompts = random_prompts(2)
    reference, _, _ = generate(target, prompts, max_tokens=14, **REFERENCE)
    clean, clean_accepted, _, clean_ahead = eagle_run(target, head, prompts, None, async_scheduling=True)
    bent, bent_accepted, _, bent_ahead = eagle_run(target, head, prompts, "ahead-positions-stale", True)
    assert clean == reference and bent == reference and clean_ahead > 0 and bent_ahead > 0
    assert bent_accepted < clean_accepted, (bent_accepted, clean_accepted)
    # The device-vs-host comparison of rounds drafted ahead sees it, once the debug invariants are on for the run.
    from specbench.attention.invariant_violation import InvariantViolation

    monkeypatch.setenv("SPECBENCH_DEBUG_INVARIANTS", "1")
    with pytest.raises(InvariantViolation, match=r"\(ahead\)"):
        eagle_run(target, head, prompts, "ahead-positions-stale", True)


@pytest.mark.slow  # ~2.5 min under the Triton interpreter on 2 busy cores
def test_round_graph_stale_features_costs_acceptance_of_graphed_rounds(eagle_pair):
    needs_kernels()
    target, head = eagle_pair
    prompts = random_prompts(2)
    reference, _, _ = generate(target, prompts, max_tokens=14, **REFERENCE)
    clean, clean_accepted, clean_replays, _ = eagle_run(target, head, prompts, None, async_scheduling=False)
    bent, bent_accepted, bent_replays, _ = eagle_run(target, head, prompts, "round-graph-stale-features", False)
    assert clean == reference and bent == reference and clean_replays > 1 and bent_replays > 1
    assert bent_accepted < clean_accepted, (bent_accepted, clean_accepted)


# ---- the draft head on the fused projections ------------------------------------------------------------------

@pytest.mark.slow  # the Triton interpreter: ~20 s alone
def test_fused_head_rope_shift_passes_greedy_and_is_caught_by_the_oracle(tmp_path):
    """On the no-bias "llama" variant's EAGLE-3 head (the fused first layer applies), the bent fused head leaves
    greedy output exact (the old check passes) while the draft oracle, which recomputes each step with the reference
    head, sees the steps' logits move; the clean fused engine has no oracle mismatch, the unfused one is untouched."""
    needs_kernels()
    from specbench.check.oracle import FP32_RTOL, record_and_compare
    from specbench.check.reference import build_reference_drafting_llm
    from specbench.selftest.tiny_eagle import build_tiny_eagle_head

    target, _ = build_tiny_pair(tmp_path / "pair", seed=1, variant="llama")
    head = build_tiny_eagle_head(target, tmp_path / "eagle3")
    prompts = random_prompts(3)
    params = SamplingParams(max_tokens=10, ignore_eos=True)
    reference, _, _ = generate(target, prompts, max_tokens=10, **REFERENCE)
    spec = {"method": "eagle3", "draft": head, "max_num_steps": 3}
    results = {}
    for name, inject, fused in (("clean", None, "on"), ("bent", "fused-head-rope-shift", "on"),
                                ("unfused", "fused-head-rope-shift", "off")):
        llm = LLM(target, fault=injection(inject), **{**ENGINE, **spec, "fused_kernels": fused})
        oracle = build_reference_drafting_llm(llm.engine.config)
        outs = []  # the oracle's recorded run is the greedy run too: one interpreted run per engine, not two
        results[name] = record_and_compare(llm, oracle, prompts, params, FP32_RTOL,
                                           run=lambda generate, outs=outs: outs.extend(generate(prompts, params)))
        assert [list(o.output_token_ids) for o in outs] == reference, name  # lossless: greedy passes
        taken = llm.engine.paths.taken()
        assert ("eagle.fused_head" in taken) == (fused == "on"), name
    assert results["clean"][0] > 0 and results["clean"][1] == []
    assert results["unfused"][1] == []
    num, bad = results["bent"]
    assert len(bad) > num // 4, (num, bad[:3])

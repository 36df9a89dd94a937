"""Execution-path coverage (execution_paths.py): the engine records the paths it takes, the selftest reaches every
registered path on CPU (torch, and the Triton interpreter for the fused and Triton paths) except those listed as
CUDA-only, and a registered path that nothing records fails the coverage.

One selftest run serves the file (seed0_rows): seed 0's clean rows, every method, and the hybrid targets' rows with
every hybrid-state mutant (selftest/tiny_hybrid.py, issue 45: each caught by the battery, greedy identity or
INV-STATE, and the state paths production and taken there), so that seed 0's rows run once for both."""

from __future__ import annotations

import pytest

from specbench import LLM, SamplingParams
from specbench.check.budget import Budget
from specbench.errors import SpecbenchError
from specbench.faults import FAULTS
from specbench.faults.catalog import needs_tree_shape
from specbench.speculation.registry import path_names
from specbench.execution_paths import ExecutionPath, PathRecorder, production_paths
from specbench.selftest.coverage import coverage_verdict, format_coverage, path_coverage
from specbench.selftest.runner import (METHODS, PLAIN, false_alarms, format_mutation_table, run_selftest,
                                       selftest_coverage)
from specbench.selftest.setups import HYBRID, HYBRID_METHODS, HYBRID_NOT_EXERCISED, MAMBA2
from specbench.speculation.registry import execution_paths
from tests.check.test_selftest_hybrid import HYBRID_FAULTS, STATE_PATHS

# What only a CUDA device reaches (graph capture; flashinfer runs on CUDA only): the CPU selftest cannot.
CUDA_ONLY = frozenset({"eagle.ahead", "eagle.round_graph", "eagle.step_graph", "eagle.tree_graph",
                       "eagle.tree_round_graph", "draft.step_graph", "draft.tree_graph", "graph.decode",
                       "graph.verify", "graph.verify_tree", "attention.flashinfer",
                       # hybrid targets' graphs (recurrent/graph_rows.py): the CUDA selftest's hybrid rows
                       "graph.hybrid_decode", "graph.hybrid_verify",
                       # fla-core's kernels (--recurrent-kernels fla, opt-in): CUDA only, hybrid targets only;
                       # tests/recurrent/test_hybrid_fla_cuda.py reaches them
                       "hybrid.fla_chunk", "hybrid.fla_recurrent"})
# Taken by the selftest's reference loop (one step at a time), which is the yardstick, not coverage.
REFERENCE_ONLY = frozenset({"decode.sync"})
# Hybrid targets' paths (their state, their MTP module's block): production where the selftest's hybrid target runs
# (run_selftest's `hybrid`; torch_rows and the Triton runs leave its rows out); seed0_rows' hybrid rows reach them.
HYBRID_ONLY = frozenset({"hybrid.state_write", "hybrid.state_commit", "mtp.qwen3_next_block", "hybrid.snapshot_take",
                         "hybrid.snapshot_restore", "hybrid.tree_verify",
                         # the Mamba-2 target's (tests/check/test_selftest_mamba2.py)
                         "hybrid.mamba2_verify", "hybrid.mamba2_chunked"})
# Taken only by an engine that broke its invariant (a grammar mutant's): never by a clean one.
MUTANT_ONLY = frozenset({"grammar.violation"})
# The opt-in grouped MoE kernel set's (--moe-kernels grouped, not the default until measured on a GPU): no engine
# the selftest builds takes them; tests/kernels/test_kernel_moe_grouped_set.py and
# tests/models/test_moe_grouped_engine.py reach them and catch their mutants.
# The fusions pending a GPU run (SPECBENCH_PENDING_FUSIONS=on, models/pending_fusions.py):
# tests/kernels/test_moe_route_norm_layer.py and tests/models/test_gated_attention_fused.py reach them under the
# interpreter and catch their mutants.
OPT_IN = frozenset({"moe.few_token_combine", "moe.route_norm", "hybrid.gated_attention_fused"})
# The default on CUDA only (--recurrent-kernels auto: triton there, torch on CPU), though it runs under the CPU
# interpreter: tests/recurrent/test_triton_verify_engine.py reaches it and catches its mutant; the CUDA selftest's
# hybrid rows take it.
CUDA_DEFAULT = frozenset({"hybrid.triton_verify"})
# The default MoE kernel set's prefill GEMM: production on CUDA where a MoE target ran (the selftest's window + MoE
# target, not in these runs); tests/models/test_moe_grouped_engine.py reaches it under the interpreter.
MOE_ONLY = frozenset({"moe.prefill_grouped"})
# Checks whose engines reach the CPU paths: the greedy check (also with forced preemption), the invariant sweep
# (forced acceptance) and the rows check (the verifier).
TORCH_CHECKS = ("greedy", "rows", "invariants")
# What catches the hybrid mutants (greedy, INV-STATE) and reaches every CPU production path; the sampled check and
# the draft oracle (a third of a hybrid row's time) run on the clean hybrid rows of test_selftest_hybrid.py
# (test_clean_hybrid_rows_pass_on_other_seeds).
MUTANT_CHECKS = TORCH_CHECKS + ("baseline", "metrics")
# production where the hybrid target runs (its MTP tree row takes hybrid.tree_verify)
HYBRID_PATHS = STATE_PATHS | {"mtp.qwen3_next_block", "hybrid.tree_verify"}
MAMBA2_PATHS = {"hybrid.mamba2_verify", "hybrid.mamba2_chunked"}  # production where the Mamba-2 target runs


def _not_selftest_methods() -> frozenset[str]:
    """Paths only methods outside the selftest's METHODS take (e.g. proposer.eagle: no tiny EAGLE-1 head)."""
    run = set(METHODS) | {PLAIN}
    return frozenset(p.name for p in execution_paths() if p.methods and not set(p.methods) & run)


def _result(row, name: str):
    return next(r for r in row.results if r.name == name)


@pytest.fixture(scope="module")
def seed0_rows():
    """Seed 0, every method, clean (the seed targets host no hybrid-state fault), then the hybrid and Mamba-2 targets'
    rows (HYBRID_METHODS, and n-gram's on the Mamba-2 one) with every hybrid-state fault: ~2 min alone."""
    return run_selftest(seeds=(0,), faults=HYBRID_FAULTS, checks=MUTANT_CHECKS, hybrid=True)


@pytest.fixture(scope="module")
def torch_rows(seed0_rows):
    """The CPU production configuration (torch attention, verifier and layers), seed 0 (the biased pair): its rows on
    the seed target."""
    return [row for row in seed0_rows if row.target not in (HYBRID, MAMBA2)]


def test_cuda_only_paths_are_the_declared_ones():
    assert {p.name for p in execution_paths() if p.needs_cuda} == CUDA_ONLY


@pytest.mark.slow  # the module's selftest run
def test_cpu_selftest_exercises_every_cpu_production_path(torch_rows):
    coverage = selftest_coverage(torch_rows, "cpu", TORCH_CHECKS)
    assert coverage.is_complete, format_coverage(coverage)
    assert {p.name for p in coverage.required} >= {"decode.overlap", "spec.sync_round", "preemption",
                                                   "attention.torch", "verify.torch", "layers.torch"}
    # the constrained rows' (selftest/constrained.py), production wherever the grammar extra is installed
    grammar = {"grammar.mask", "grammar.draft_cut", "grammar.rebuild", "grammar.reasoning_end_in_drafts"}
    assert grammar <= {p.name for p in coverage.required} and grammar <= coverage.taken, format_coverage(coverage)
    assert "grammar.violation" not in coverage.taken
    assert "coverage: all" in coverage_verdict(coverage)
    plain = next(r for r in torch_rows if r.method == PLAIN)
    assert "decode.overlap" in plain.results[0].paths and plain.results[0].passed
    # every method's clean chain row ran the whole invariant sweep, forced acceptance too (the mutant rows of
    # test_selftest_methods.py leave those cases out)
    sweeps = {row.method: r.detail for row in torch_rows if row.method != PLAIN and not row.shape.is_tree
              and not row.chunked and not row.constrained for r in row.results if r.name == "invariants"}
    assert set(sweeps) == set(METHODS) and all("full/zero/mixed acceptance" in d for d in sweeps.values()), sweeps


@pytest.mark.slow  # the module's selftest run
def test_a_registered_path_nothing_records_fails_the_coverage(torch_rows):
    """The failure mode: a new production path the engines never record (no sentinel reaches it)."""
    unrecorded = ExecutionPath("decode.unguarded", "a fast path added without a sentinel", ("cpu",))
    clean = [(row.method, row.results) for row in torch_rows if row.inject is None]
    coverage = path_coverage(clean, "cpu", TORCH_CHECKS, execution_paths() + (unrecorded,))
    assert coverage.unexercised == ("decode.unguarded",)
    assert not coverage.is_complete
    assert "coverage FAILED" in coverage_verdict(coverage) and "decode.unguarded" in coverage_verdict(coverage)
    assert "decode.unguarded" in format_coverage(coverage) and "UNEXERCISED" in format_coverage(coverage)
    # A method the selftest did not run does not make its paths required; a CUDA production path is not on CPU.
    without_ngram = path_coverage([(m, r) for m, r in clean if m != "ngram"], "cpu", TORCH_CHECKS)
    assert "proposer.ngram" not in {p.name for p in without_ngram.required}
    assert "proposer.ngram" in {p.name for p in coverage.required}
    assert "graph.decode" not in {p.name for p in coverage.required}
    assert "proj.fused" not in {p.name for p in coverage.required}


@pytest.mark.slow  # the Triton interpreter runs every kernel launch in Python: ~40 s alone, ~1.5 min on 2 busy cores
def test_every_registered_path_but_the_cuda_only_ones_is_reachable_on_cpu(torch_rows):
    """The CUDA production configuration as far as CPU can run it: the Triton attention and verifier and the fused
    layer kernels, under the interpreter, on the biased pair (eager layers with the fused norm/RoPE/SiLU kernels),
    the no-bias tied pair (fused projections with the RoPE/K-V store) and the Qwen3 pair (fused projections without
    it). One prompt, four tokens, the plain engine and the draft LM (one draft step a round on the fused pairs), and
    EAGLE-3 on the tied pair (its head's fused first layer)."""
    from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here

    if not kernels_runnable_here():
        pytest.skip(RERUN_REASON)
    slice_ = Budget("paths", 1, 4, False, False, False, "")
    # chunked=False, constrained=False: those rows' paths are the torch rows' (the same engine code under either
    # backend); under the Triton interpreter each such row costs as much as a seed's clean row
    # the tree row (attention.tree_triton) on the first seed only: one interpreted tree row reaches its paths
    triton = {"attention_backend": "triton", "verifier": "triton", "fused_kernels": "on"}
    # the draft head's own fused first layer (eagle.fused_head): EAGLE-3 on the no-bias tied pair (seed 1), in the
    # draft LM's run of that seed, so that the seed's models, reference and plain row are built and run once.
    # Seeds 1 and 2 draft one token a round: what they add is the fused projections (proj.rope_store, proj.fused) and
    # the fused head, which every forward takes; the multi-step draft loop (draft.eager_step) is seed 0's, and each
    # interpreted draft step of a fused-projection model costs seconds (~40 s of the ~78 s this test took at 3)
    fused_rows = (run_selftest(seeds=(0,), methods=("draft",), faults=(), checks=("greedy",), budget=slice_,
                               chunked=False, constrained=False, engine_options=triton)
                  + run_selftest(seeds=(1,), methods=("draft", "eagle3"), faults=(), checks=("greedy",),
                                 budget=slice_, trees=False, chunked=False, constrained=False, engine_options=triton,
                                 num_steps=1)
                  + run_selftest(seeds=(2,), methods=("draft",), faults=(), checks=("greedy",), budget=slice_,
                                 trees=False, chunked=False, constrained=False, engine_options=triton, num_steps=1))
    assert [(r.seed, r.method, r.shape.is_tree) for r in fused_rows] == [
        (0, PLAIN, False), (0, "draft", False), (0, "draft", True), (1, PLAIN, False), (1, "draft", False),
        (1, "eagle3", False), (2, PLAIN, False), (2, "draft", False)]
    assert not any(row.detected for row in fused_rows)
    reached = (selftest_coverage(torch_rows, "cpu", TORCH_CHECKS).taken
               | selftest_coverage(fused_rows, "cpu", ("greedy",)).taken)
    unreached = {p.name for p in execution_paths()} - reached
    assert unreached == (CUDA_ONLY | REFERENCE_ONLY | HYBRID_ONLY | MUTANT_ONLY | OPT_IN | MOE_ONLY | CUDA_DEFAULT
                         | _not_selftest_methods()), sorted(unreached)
    # Every CUDA production path of the selftest's methods is reached, CUDA-only ones aside.
    cuda = {p.name for p in production_paths("cuda", METHODS + (PLAIN,), execution_paths())}
    assert cuda - reached == cuda & CUDA_ONLY


@pytest.mark.slow  # the module's selftest run
def test_each_hybrid_mutant_is_caught_and_the_state_paths_are_covered(seed0_rows):
    rows = seed0_rows
    table = format_mutation_table(rows)
    assert not false_alarms(rows), table
    on_target = [r for r in rows if r.target == HYBRID]
    assert not any(r.chunked for r in on_target), table
    assert [r.method for r in on_target if r.shape.is_tree and not r.inject] == ["mtp"], table  # the first
    # the chain faults on the chain rows, the tree verify's on the tree row
    expected = {(m, False, n) for m in (PLAIN, *HYBRID_METHODS) for n in HYBRID_FAULTS if not needs_tree_shape(n)
                and m in FAULTS[n].methods and n not in HYBRID_NOT_EXERCISED.get(m, ())}
    expected |= {("mtp", True, n) for n in HYBRID_FAULTS if needs_tree_shape(n)}
    assert {(r.method, r.shape.is_tree, r.inject) for r in on_target if r.inject} == expected, table
    assert {r.inject for r in rows if r.inject} == set(HYBRID_FAULTS), table  # each runs somewhere...
    assert all(r.target == HYBRID for r in rows if r.inject), table  # ...and on the hybrid target only
    for row in (r for r in on_target if r.inject is not None):
        assert row.detected, f"{row.inject} missed on {row.method}:\n{table}"
    for row in (r for r in on_target if r.inject is None):
        greedy = _result(row, "greedy")
        assert "Qwen3NextForCausalLM" in greedy.detail and "6/6 prompts identical" in greedy.detail, greedy.detail
        if row.method != PLAIN:
            assert "INV-STATE held" in _result(row, "invariants").detail, table
            assert not _result(row, "baseline").skipped, _result(row, "baseline").detail  # a shipped baseline
            assert STATE_PATHS <= _result(row, "greedy").paths, table
    # the rows that accept drafts (EAGLE-3 over the target's aux states, its own MTP module) make rolling back one
    # too far visible in the tokens: greedy catches it there (the draft LM's row, accepting almost nothing, needs
    # INV-STATE's forced acceptance)
    too_far = {r.method: r for r in on_target if r.inject == "state-rolled-back-too-far"}
    assert not _result(too_far["mtp"], "greedy").passed and not _result(too_far["eagle3"], "greedy").passed, table
    coverage = selftest_coverage(rows, "cpu", MUTANT_CHECKS)
    assert coverage.is_complete, format_coverage(coverage)
    assert HYBRID_PATHS <= {p.name for p in coverage.required} and HYBRID_PATHS <= coverage.taken
    # the Mamba-2 target's rows ran too (n-gram is a hybrid method): its mixer's paths required and taken
    assert MAMBA2_PATHS <= {p.name for p in coverage.required} and MAMBA2_PATHS <= coverage.taken
    # without the hybrid rows its paths are not required (no hybrid target ran)
    dense = selftest_coverage([r for r in rows if r.target not in (HYBRID, MAMBA2)], "cpu", MUTANT_CHECKS)
    assert not HYBRID_PATHS & {p.name for p in dense.required}


def test_engine_records_its_paths_and_resets(tmp_path):
    from specbench.selftest.tiny import build_tiny_pair, random_prompts

    target, _ = build_tiny_pair(tmp_path, seed=0)
    llm = LLM(target, dtype="fp32", device="cpu", block_size=4, kv_cache_gb=0.01)
    assert llm.engine.paths_taken() == frozenset()
    llm.generate(random_prompts(2), SamplingParams(max_tokens=4, ignore_eos=True))
    assert {"decode.overlap", "target.eager", "attention.torch", "verify.torch", "layers.torch"} <= \
        llm.engine.paths_taken()
    llm.engine.reset_paths()
    assert llm.engine.paths_taken() == frozenset()


@pytest.mark.slow  # Triton interpreter: ~30 s
def test_graph_replays_record_the_graph_and_its_forward(tmp_path):
    """Graphs captured by hand on CPU replay by rerunning their forward (runtime/cuda_graph.py): the runner records
    graph.decode / graph.verify, the rerun forward its own layer and attention paths."""
    from specbench.engine.builder import capture_graphs, graph_plan
    from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here
    from specbench.selftest.tiny import build_tiny_pair, random_prompts

    if not kernels_runnable_here():
        pytest.skip(RERUN_REASON)
    target, draft = build_tiny_pair(tmp_path, seed=0)
    llm = LLM(target, dtype="fp32", device="cpu", block_size=4, max_concurrency=2, num_kv_blocks=32,
              attention_backend="triton", enforce_eager=True, method="draft", draft=draft, max_num_steps=2)
    engine = llm.engine
    capture_graphs(graph_plan(llm.config, engine.device, engine.stop_checker.max_model_len), engine.runner,
                   engine.proposer, 2)
    llm.generate(random_prompts(1), SamplingParams(max_tokens=4, ignore_eos=True))
    assert {"graph.verify", "draft.step_graph", "attention.triton", "layers.torch"} <= engine.paths_taken()
    engine.reset_paths()
    engine.set_num_steps(0)
    llm.generate(random_prompts(1), SamplingParams(max_tokens=3, ignore_eos=True))
    assert "graph.decode" in engine.paths_taken() and "graph.verify" not in engine.paths_taken()


def test_recorder_refuses_unregistered_names_and_collects_captures():
    recorder = PathRecorder(path_names())  # as the engine builder makes it
    with pytest.raises(SpecbenchError, match="unregistered execution path 'proj.typo'"):
        recorder.record("proj.typo")
    with recorder.collecting() as captured:  # a CUDA-graph capture: its replays record what it took
        recorder.record("proj.fused")
    assert captured == {"proj.fused"} and recorder.taken() == frozenset()
    recorder.record_all(frozenset(captured))
    assert recorder.taken() == {"proj.fused"}

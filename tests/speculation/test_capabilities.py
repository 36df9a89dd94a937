"""Speculators: a core interface plus capabilities a class declares (speculation/capabilities.py), and the registry
answering which methods have a capability from the classes. Faults, check and selftest ask it, so a new proposer
class is picked up by them as registered, with no list of method names to edit."""

from __future__ import annotations

import pytest
import torch

from specbench.check.engine_defaults import check_engine
from specbench.check.oracle import check_oracle
from specbench.check.result import CheckResult
from specbench.check.setup import CheckSetup
from specbench.errors import SpecbenchError
from specbench.execution_paths import ExecutionPath
from specbench.faults import FAULTS
from specbench.faults.catalog import (needs_chunked_prefill, needs_constrained_decoding, needs_hybrid_target,
                                      needs_window_moe_target)
from specbench.kv.kv_cache import KVCache, KVCacheSpec
from specbench.selftest.drafters import selftest_methods
from specbench.selftest.row_tasks import SelftestRow, due_faults
from specbench.speculation import registry
from specbench.speculation.capabilities import (
    CapturesDraftGraphs,
    ConsumesTargetFeatures,
    DraftsAhead,
    DraftsTrees,
    HasDraftKV,
    Proposer,
    RecordsDraftLogits,
)
from specbench.speculation.proposer import DraftProposal, ProposeInput


class _Core(Proposer):
    """A proposer with the core only; it never drafts."""

    name = "throwaway"

    def propose(self, inp: ProposeInput) -> DraftProposal:
        return DraftProposal(torch.full((len(inp.request_ids), 0), -1), (0,) * len(inp.request_ids), None)

    def on_verified(self, request_ids: tuple[str, ...], num_accepted: tuple[int, ...]) -> None:
        pass

    def free(self, request_id: str) -> None:
        pass

    def describe(self) -> dict[str, object]:
        return {"method": self.name}


class _KvDrafter(_Core, HasDraftKV, RecordsDraftLogits):
    """A throwaway drafter with its own draft KV whose draft logits the oracle can record."""

    def kv_cache_spec(self) -> KVCacheSpec:
        raise NotImplementedError("never built: the tests ask the class")

    def bind_kv_cache(self, kv_cache: KVCache) -> None:
        pass

    def attach_recorder(self, recorder) -> None:
        pass


@pytest.fixture
def with_throwaway(monkeypatch):
    """Registers `cls` as method "throwaway" in a copy of the proposer registry that replaces the real one."""

    def register(cls: type[Proposer]) -> None:
        copy = registry.PROPOSERS.copy()
        copy.register_class("throwaway", cls)(lambda ctx: cls())
        monkeypatch.setattr(registry, "PROPOSERS", copy)

    return register


def test_each_registered_class_declares_exactly_its_capabilities():
    assert registry.speculative_methods() == ("draft", "eagle", "eagle3", "mtp", "ngram")
    assert registry.methods_with(HasDraftKV) == ("draft", "eagle", "eagle3", "mtp")
    assert registry.methods_with(CapturesDraftGraphs) == ("draft", "eagle", "eagle3", "mtp")
    assert registry.methods_with(RecordsDraftLogits) == ("draft", "eagle", "eagle3", "mtp")
    assert registry.methods_with(ConsumesTargetFeatures) == ("eagle", "eagle3", "mtp")
    assert registry.methods_with(DraftsAhead) == ("eagle", "eagle3", "mtp")
    assert registry.methods_with(DraftsTrees) == ("draft", "eagle", "eagle3", "mtp")
    assert registry.PROPOSERS.proposer_class("none") is None


def test_a_capability_has_no_default_a_class_declaring_it_must_implement_it():
    class HalfDrafter(_Core, HasDraftKV):  # declares draft KV, implements none of it
        pass

    with pytest.raises(TypeError, match="kv_cache_spec"):
        HalfDrafter()
    with pytest.raises(TypeError, match="register_class"):
        registry.PROPOSERS.register("plain-register")


def test_a_new_proposer_class_is_picked_up_by_faults_and_selftest(with_throwaway):
    with_throwaway(_KvDrafter)
    assert "throwaway" in registry.methods_with(HasDraftKV)
    assert "throwaway" not in registry.methods_with(ConsumesTargetFeatures)
    assert "throwaway" in selftest_methods()
    hosted = {name for name, f in FAULTS.items() if "throwaway" in f.methods}
    # Every fault hosted by a capability it declares (or by every proposer); none hosted by another class's code.
    assert {"draft-kv-slice", "draft-positions-off-by-one", "stale-draft-metadata", "bonus-from-wrong-row"} <= hosted
    assert not hosted & {"feature-rows-off-by-one", "draft-state-kept-on-preemption", "mtp-hidden-wrong-position",
                         "ngram-continuation-late", "ahead-positions-stale", "overlap-stale-input"}
    assert FAULTS["window-off-by-one"].methods[0] == "none" and "throwaway" in FAULTS["window-off-by-one"].methods
    # The selftest runs on it the phase-hook faults it hosts (paths: where its clean row took them).
    clean = SelftestRow("throwaway", 0, None, (CheckResult("greedy", True, "", 0.0),))
    due = {f.name for f in due_faults(list(FAULTS.values()), "throwaway", 0, clean, {})}
    # (the window and MoE faults wait for the selftest's window + MoE target: a seed target's row never runs them;
    # the chunked-prefill faults its chunked rows, the grammar faults its constrained rows)
    assert due == {name for name in hosted if not FAULTS[name].path and not needs_window_moe_target(name)
                   and not needs_chunked_prefill(name) and not needs_hybrid_target(name)
                   and not needs_constrained_decoding(name)}


def test_the_draft_oracle_asks_the_class(with_throwaway, tmp_path):
    with_throwaway(_Core)  # nothing to record: skipped before any engine is built
    setup = CheckSetup(check_engine(target=str(tmp_path), method="throwaway", max_num_steps=2), ((1, 2, 3),))
    result = check_oracle(setup)
    assert result.skipped and "throwaway" in result.detail


def test_execution_paths_take_their_methods_from_the_classes():
    """execution_paths.py sits below the proposers (a leaf: attention and the graph runner record paths); its paths
    name method groups and the proposer classes declare their own paths, and the registry resolves both."""
    from specbench.speculation.drafters.eagle.proposer import EagleProposer

    by_name = {p.name: p for p in registry.execution_paths()}
    for method in registry.speculative_methods():  # the engine records proposer.<method> every drafted round
        assert by_name[f"proposer.{method}"].methods == (method,), method
    assert by_name["spec.sync_round"].methods == registry.speculative_methods()
    assert by_name["eagle.ahead"].methods == registry.methods_with(DraftsAhead)
    assert by_name["spec.tree_round"].methods == registry.methods_with(DraftsTrees)
    eagle = registry.methods_with(EagleProposer)
    assert all(p.methods == eagle for name, p in by_name.items() if name.startswith("eagle."))
    assert {p.name for p in EagleProposer.execution_paths} == {  # eagle.ahead: the engine's (DRAFTS_AHEAD)
        "eagle.eager", "eagle.step_graph", "eagle.fused_head", "eagle.round_graph", "eagle.tree_graph",
        "eagle.tree_round_graph"}
    assert all(p.methods == ("draft",) for name, p in by_name.items() if name.startswith("draft."))
    assert {m for p in by_name.values() for m in p.methods} <= {"none", *registry.speculative_methods()}


class _PathDrafter(_Core, DraftsTrees):
    """A throwaway drafter with a path of its own code (its fast draft step) and tree drafting."""

    execution_paths = (ExecutionPath("throwaway.fast_step", "a throwaway drafter's fast draft step", ("cpu",)),)

    def propose_tree(self, inp, plan) -> DraftProposal:
        raise NotImplementedError("never built: the tests ask the class")

    def on_tree_verified(self, request_ids, accepted_nodes) -> None:
        pass


def test_a_new_proposer_class_brings_its_paths_to_the_coverage(with_throwaway):
    """A new drafter's paths reach the selftest's coverage table and the engine's recorder from its class alone:
    execution_paths.py is not edited."""
    from specbench.execution_paths import PATHS, PathRecorder
    from specbench.selftest.coverage import format_coverage, path_coverage

    assert "proposer.throwaway" not in registry.path_names()
    with_throwaway(_PathDrafter)
    by_name = {p.name: p for p in registry.execution_paths()}
    assert by_name["proposer.throwaway"].methods == ("throwaway",)
    assert by_name["throwaway.fast_step"].methods == ("throwaway",)
    assert "throwaway" in by_name["spec.sync_round"].methods and "throwaway" in by_name["spec.tree_round"].methods
    assert "throwaway" not in by_name["eagle.ahead"].methods
    assert not {"proposer.throwaway", "throwaway.fast_step"} & {p.name for p in PATHS}
    # The coverage of a selftest that ran it requires both (production on CPU) and finds them unexercised.
    clean = [("throwaway", (CheckResult("greedy", True, "", 0.0, paths=frozenset({"proposer.throwaway"})),))]
    coverage = path_coverage(clean, "cpu", ("greedy",))
    assert {"proposer.throwaway", "throwaway.fast_step"} <= {p.name for p in coverage.required}
    assert "throwaway.fast_step" in coverage.unexercised and "proposer.throwaway" not in coverage.unexercised
    assert "throwaway.fast_step" in format_coverage(coverage)
    PathRecorder(registry.path_names()).record("throwaway.fast_step")  # an engine built now accepts it


def test_a_class_path_names_no_methods(with_throwaway):
    """A class's path takes the methods of its class; naming some would be a second declaration."""

    class Wrong(_Core):
        execution_paths = (ExecutionPath("throwaway.step", "names its methods", ("cpu",), ("ngram",)),)

    with_throwaway(Wrong)
    with pytest.raises(SpecbenchError, match="leave them"):
        registry.execution_paths()

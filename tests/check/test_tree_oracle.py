"""The tree draft oracle (check/tree_oracle.py): tree rounds recorded whole (speculation/tree/records.py), every law
recomputed cache-free along its branch, the tree's shape and top-k choice checked from first principles.

- the structural checks (check/tree_choice.py) on a round grown by the device path (grow_tree_on_device) over known
  laws: clean, then with each kind of bug written into the record;
- clean tree runs of every method that drafts trees pass it on seeds 0-2 (one per tiny variant; no false alarm;
  wider sweeps are measurements, not CI: 0/120 clean tree rows, seeds 0-29 x draft/eagle/eagle3/mtp, on the host
  path before the device port and on the device path after it);
- which tree mutants it catches on CPU (seed 0, the selftest's tree shape): the draft-side one on every method; the
  verify-side mask and KV ones where the drafter reads target features that the bug corrupts (EAGLE-1, MTP: the
  target's final hidden state; the tiny EAGLE-3 head reads the embeddings, which no verify bug touches; a draft LM
  sees only committed tokens); the wrong bonus node on none (the committed tokens are wrong, but every law given
  them is right: greedy catches it).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from specbench.check.engine_defaults import check_engine
from specbench.check.greedy import greedy_params
from specbench.check.oracle import check_oracle
from specbench.check.setup import CheckSetup, build_llm, prompt_list
from specbench.check.tree_choice import choice_errors, node_branches, shape_errors
from specbench.faults.catalog import TREE_MUTANTS
from specbench.selftest.setups import TREE_SHAPE, selftest_setups, tree_methods
from specbench.selftest.tiny import build_tiny_pair, random_prompts
from specbench.selftest.tiny_mtp import LAYER_INDEX, build_mtp_target
from specbench.speculation.draft_records import DraftRecorder
from specbench.speculation.tree.device import block_table_tensor, grow_tree_on_device
from specbench.speculation.tree.step import StepLayout
from specbench.speculation.tree.plan import TreePlan
from specbench.speculation.tree.records import TreeRoundTrace

VOCAB = 7
METHODS = tree_methods(("draft", "eagle", "eagle3", "mtp"))
CLEAN_SEEDS = (0, 1, 2)  # one seed per tiny variant: biased, llama, qwen3 (tiny.variant_for_seed)
# tree mutant -> the methods whose tree rows the oracle catches it on (seed 0, CPU)
CAUGHT_ON = {
    "tree-draft-sees-sibling": {"draft", "eagle", "eagle3", "mtp"},
    "tree-mask-sees-sibling": {"eagle", "mtp"},
    "tree-parent-off-by-one": {"eagle", "mtp"},
    "tree-kv-not-moved": {"eagle", "mtp"},
    "tree-bonus-wrong-node": set(),
}


def law(branch: tuple[int, ...]) -> torch.Tensor:
    """[VOCAB] log-probs, a fixed function of the branch."""
    gen = torch.Generator().manual_seed(hash(branch) % (2**31))
    return torch.log_softmax(3 * torch.randn(VOCAB, generator=gen), dim=-1)


def grown(topk: int = 2, depth: int = 3, budget: int = 6):
    """(record, laws) of one request's round grown over `law` by the production device path, traced."""
    recorder = DraftRecorder()
    plan = TreePlan(topk, depth, budget)
    trace = TreeRoundTrace(recorder, ("r",), ((5, 1, 2),), plan.topk, plan.depth, plan.num_draft_tokens)
    layout = StepLayout(torch.tensor([3]), block_table_tensor(((0, 1),), torch.device("cpu")), 16, 32,
                        prefix_lens=(3,))
    branch_of_node: dict[int, tuple[int, ...]] = {-1: ()}  # builder creation index -> branch (the test's own map)

    def run_step(step):
        frontier = step.frontier
        for token, node, parent in zip(frontier.token_ids[0].tolist(), frontier.node_index[0].tolist(),
                                       frontier.parent[0].tolist()):
            branch_of_node[node] = branch_of_node[parent] + (token,)
        return torch.stack([law(branch_of_node[n]) for n in frontier.node_index[0].tolist()])[None]

    grow_tree_on_device(plan, law(())[None], layout, run_step, trace)
    (record,) = recorder.trees
    return record, {(): law(()), **{b: law(b) for b in record.fed_branches}}


def test_a_round_grown_by_the_builder_passes_and_records_every_fed_law():
    for topk, depth, budget in ((2, 3, 6), (3, 3, 9), (2, 4, 10), (3, 1, 2)):
        record, laws = grown(topk, depth, budget)
        assert len(record.fed_branches) == (depth - 1) * topk and len(record.node_token_ids) == budget
        assert torch.equal(record.root_log_probs, laws[()])
        for i, branch in enumerate(record.fed_branches):
            assert torch.equal(record.fed_log_probs[i], laws[branch])
        assert shape_errors(record) == [] and choice_errors(record, laws, 1e-6) == []


def test_shape_errors_name_each_kind_of_bug():
    record, _ = grown()
    sees = list(record.fed_sees)
    sees[1] = (0, 1)  # row 1 (the root's second child) sees row 0, its sibling
    assert "mask sees rows [0, 1]" in shape_errors(dataclasses.replace(record, fed_sees=tuple(sees)))[0]
    parent_rows = list(record.fed_parent_rows)
    parent_rows[2] = 1 - parent_rows[2]  # a depth-1 node handed the other root child's row
    assert "handed parent row" in shape_errors(dataclasses.replace(record, fed_parent_rows=tuple(parent_rows)))[0]
    parents = list(record.parents)
    parents[0] = 1
    assert "must precede" in shape_errors(dataclasses.replace(record, parents=tuple(parents)))[0]
    tokens = list(record.node_token_ids)
    tokens[1] = tokens[0]  # the root's two children the same token
    assert "same token" in shape_errors(dataclasses.replace(record, node_token_ids=tuple(tokens)))[0]


def test_choice_errors_find_a_child_outside_the_top_k_a_worse_frontier_and_a_wrong_budget():
    record, laws = grown()
    leaf = max(i for i in range(len(record.parents)) if i not in record.parents)  # a kept node without children
    parent_branch = node_branches(record)[leaf][:-1]
    tokens = list(record.node_token_ids)
    tokens[leaf] = int(laws[parent_branch].argmin())  # its parent's least likely token
    errors = choice_errors(dataclasses.replace(record, node_token_ids=tuple(tokens)), laws, 1e-6)
    assert any("not among its parent's top-2" in e for e in errors), errors
    # laws under which another root child is far better than those the builder chose: frontier and tree are wrong
    other = next(t for t in range(VOCAB) if (t,) not in record.fed_branches)
    boosted = laws[()].clone()
    boosted[other] = 0.0
    errors = choice_errors(record, {**laws, (): torch.log_softmax(boosted, dim=-1)}, 1e-6)
    assert any("frontier of step 0" in e for e in errors) and any("kept tree" in e for e in errors), errors
    short = dataclasses.replace(record, node_token_ids=record.node_token_ids[:-1], parents=record.parents[:-1])
    assert any("the budget keeps 6" in e for e in choice_errors(short, laws, 1e-6))


@pytest.fixture(scope="module")
def setups(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("tree-oracle"))
    return {seed: selftest_setups(root, seed, METHODS, 3) for seed in CLEAN_SEEDS}


def tree_row(setup, inject=None):
    return dataclasses.replace(setup, draft_shape=TREE_SHAPE).with_inject(inject)


@pytest.mark.parametrize("method", ("draft", "eagle3"))
def test_recording_leaves_tree_rounds_unchanged_and_records_every_round(setups, method):
    setup = tree_row(setups[0][method])
    runs, recorder = [], DraftRecorder()
    for is_recording in (False, True):
        llm = build_llm(setup)
        if is_recording:
            llm.engine.proposer.attach_recorder(recorder)
        outputs = llm.generate(prompt_list(setup), greedy_params(setup))
        runs.append([(tuple(o.output_token_ids), o.stats.num_accepted_tokens) for o in outputs])
        num_rounds = sum(o.stats.num_draft_rounds for o in outputs)  # every draft round of a tree run is a tree
    assert runs[0] == runs[1] and not recorder.steps
    assert len(recorder.trees) == num_rounds > 0


@pytest.mark.parametrize("seed", CLEAN_SEEDS)
@pytest.mark.parametrize("method", METHODS)
def test_clean_tree_rounds_pass_the_tree_oracle(setups, method, seed):
    result = check_oracle(tree_row(setups[seed][method]), preemption=seed == 0)
    assert result.passed and not result.skipped, result.detail
    assert "tree-round laws" in result.detail


@pytest.mark.slow
def test_eagle1_seed16_chained_rounding_is_no_false_alarm(tmp_path):
    """The sharp tiny EAGLE-1 head amplifies fp32 rounding along its chain: seed 16's preempting run has a depth-1
    node 3.8 x rtol x max |logit| off, a false alarm under the chain oracle's (1 + step) growth (tree_oracle.py)."""
    setup = selftest_setups(str(tmp_path), 16, ("eagle",), 3)["eagle"]
    result = check_oracle(tree_row(setup), preemption=True)
    assert result.passed, result.detail


@pytest.mark.parametrize("name", [m.fault.name for m in TREE_MUTANTS])
@pytest.mark.parametrize("method", METHODS)
def test_which_tree_mutants_the_tree_oracle_catches(setups, method, name):
    result = check_oracle(tree_row(setups[0][method], name), preemption=False)
    assert not result.skipped
    assert result.passed == (method not in CAUGHT_ON[name]), result.detail


def test_several_mtp_modules_are_skipped_saying_why(tmp_path):
    """Their tree steps reuse module 0 (EagleProposer.propose_tree) where their chains run module j at step j: no
    rule to recompute until that is settled; the skip says so instead of checking either silently."""
    base, _ = build_tiny_pair(tmp_path / "pair", seed=0)
    target = build_mtp_target(base, tmp_path / "mtp2", LAYER_INDEX, num_modules=2)
    setup = CheckSetup(check_engine(target=target, method="mtp", max_num_steps=3),
                       tuple(random_prompts(2, seed=0, vocab_size=500, max_len=20)), draft_shape=TREE_SHAPE)
    result = check_oracle(setup)
    assert result.skipped and "several MTP modules" in result.detail


def test_the_table_covers_every_tree_mutant():
    assert set(CAUGHT_ON) == {m.fault.name for m in TREE_MUTANTS}

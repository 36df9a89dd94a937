"""Tree verification: greedy longest matching path and its bonus; sampled recursive rejection is lossless.

Losslessness is checked two ways on a depth-2 tree with 2 children per node over V = 4:
- exactly: `path_distribution` (the law of the walk, built from the same `sibling_step` the sampler uses)
  summed over every draft the drafter can produce, completed by the target to three tokens, equals the
  target's own three-token law to 1e-9;
- by Monte Carlo: `verify_tree` sampled end to end, chi-square on the first two tokens, with the power
  against a named wrong rule computed from the exact law and asserted.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
import torch
from scipy import stats

from specbench.sampling_params import SamplingParams
from specbench.speculation.verify import tree as tree_verifier
from specbench.speculation.sampling import build_sampling_tensors
from specbench.speculation.tree.draft_tree import DraftTree, tree_from_chain, tree_from_parents
from specbench.speculation.verify.tree import (
    SiblingStep,
    path_distribution,
    sibling_step,
    verify_tree,
)
from specbench.speculation.verify.chain import verify

VOCAB = 4
ALPHA = 1e-3


def _st(num_reqs: int, temperature: float, generator: torch.Generator | None = None):
    params = [SamplingParams(temperature=temperature)] * num_reqs
    return build_sampling_tensors(params, [generator] * num_reqs, VOCAB, "cpu")


def _one_hot_rows(argmax_rows: list[int], vocab: int = 8) -> torch.Tensor:  # [rows, vocab] logits
    return torch.nn.functional.one_hot(torch.tensor(argmax_rows), vocab).float() * 5.0


# ---------------------------------------------------------------- greedy

# root -> 0, 1; 0 -> 2, 3; 1 -> 4; 4 -> 5
GREEDY_PARENTS = [-1, -1, 0, 0, 1, 4]


def _greedy(tokens: list[int], argmax_rows: list[int]):
    tree = tree_from_parents([tokens], [GREEDY_PARENTS])
    st = build_sampling_tensors([SamplingParams(temperature=0.0)], [None], 8, "cpu")
    return verify_tree(_one_hot_rows(argmax_rows), tree, None, st)


def test_greedy_takes_the_deepest_matching_path_and_the_bonus_at_its_end():
    # rows: root, n0..n5. Root argmax 2 matches node 1 (rank 1); node 1's row says 5 -> node 4; node 4's row says
    # 6 -> node 5; node 5's row (the bonus row) says 7. Node 0 would match the root too if it were 2: it is 3.
    result = _greedy(tokens=[3, 2, 1, 1, 5, 6], argmax_rows=[2, 1, 5, 0, 0, 6, 7])
    assert result.accepted_nodes.tolist() == [[1, 4, 5]]
    assert result.num_accepted.tolist() == [3]
    assert result.output_token_ids.tolist() == [[2, 5, 6, 7]]


def test_bonus_comes_from_the_deepest_accepted_node_not_its_parent():
    # Node 0 accepted (root argmax 3), node 2 accepted (node 0's row says 1); node 2's row says 4, node 0's says 1:
    # a bonus read at the parent's row would emit 1.
    result = _greedy(tokens=[3, 2, 1, 0, 5, 6], argmax_rows=[3, 1, 0, 4, 0, 0, 0])
    assert result.output_token_ids.tolist() == [[3, 1, 4, -1]]


def test_a_sibling_of_a_rejected_node_is_never_on_the_path():
    # Node 4 matches its parent's row, but its parent (node 1) was rejected at the root.
    result = _greedy(tokens=[3, 2, 1, 0, 5, 6], argmax_rows=[7, 5, 0, 0, 0, 6, 0])
    assert result.num_accepted.tolist() == [0]
    assert result.output_token_ids.tolist() == [[7, -1, -1, -1]]


def test_greedy_on_chains_matches_the_chain_verifier():
    gen = torch.Generator().manual_seed(3)
    counts = torch.tensor([3, 0, 1, 4, 2])
    drafts = torch.randint(0, 3, (5, 4), generator=gen)
    logits = torch.randn(int(counts.sum()) + 5, 3, generator=gen)
    st = build_sampling_tensors([SamplingParams(temperature=0.0)] * 5, [None] * 5, 3, "cpu")
    chain = verify(logits, drafts, counts, None, st)
    tree = verify_tree(logits, tree_from_chain(drafts, counts), None, st)
    assert torch.equal(tree.num_accepted, chain.num_accepted)
    assert torch.equal(tree.output_token_ids, chain.output_token_ids[:, : tree.output_token_ids.shape[1]])
    assert (chain.num_accepted > 0).any() and (chain.num_accepted == 0).any()  # both branches exercised


# ---------------------------------------------------------------- one node of rejection sampling


def test_sibling_step_by_hand():
    p = torch.tensor([0.5, 0.3, 0.2, 0.0], dtype=torch.float64)
    step = sibling_step(p, [1, 0], None)  # deterministic: ask "1?" then "0, given not 1?"
    assert step.accept_probs.tolist() == pytest.approx([0.3, 0.5 / 0.7])
    assert step.residual.tolist() == pytest.approx([0.0, 0.0, 1.0, 0.0])
    p = torch.tensor([0.4, 0.3, 0.2, 0.1], dtype=torch.float64)
    q = torch.tensor([0.1, 0.6, 0.1, 0.2], dtype=torch.float64)
    step = sibling_step(p, [1, 3], q)  # i.i.d.: min(1, r/q), r <- norm(max(r - q, 0))
    # a1 = .3/.6; r1 = [.3, 0, .1, 0] / .4 = [.75, 0, .25, 0]; a2 = 0/.2; r2 = [.65, 0, .15, 0] / .8
    assert step.accept_probs.tolist() == pytest.approx([0.5, 0.0])
    assert step.residual.tolist() == pytest.approx([0.8125, 0.0, 0.1875, 0.0])


# ---------------------------------------------------------------- exact enumeration


@dataclass(frozen=True)
class Model:
    """Conditional tables over prefixes of length <= 2: what the target and the draft would say after them."""

    target: dict[tuple[int, ...], torch.Tensor]  # prefix -> [V] float64 probs
    draft: dict[tuple[int, ...], torch.Tensor]

    @staticmethod
    def make(seed: int) -> Model:
        gen = torch.Generator().manual_seed(seed)
        prefixes = [p for n in range(3) for p in itertools.product(range(VOCAB), repeat=n)]

        def table() -> dict[tuple[int, ...], torch.Tensor]:
            return {p: (torch.randn(VOCAB, generator=gen, dtype=torch.float64) * 0.9).softmax(0) for p in prefixes}

        return Model(target=table(), draft=table())

    def target_law(self) -> torch.Tensor:  # [V, V, V], the target's own three-token law
        law = torch.zeros(VOCAB, VOCAB, VOCAB, dtype=torch.float64)
        for a, b, c in itertools.product(range(VOCAB), repeat=3):
            law[a, b, c] = self.target[()][a] * self.target[(a,)][b] * self.target[(a, b)][c]
        return law

    def complete(self, emitted: tuple[int, ...], prob: float, law: torch.Tensor) -> None:
        """Add `prob` of having emitted `emitted` (1 to 3 tokens), continued by the target up to three tokens."""
        if len(emitted) == 3:
            law[emitted] += prob
            return
        for x, px in enumerate(self.target[emitted].tolist()):
            self.complete(emitted + (x,), prob * px, law)


# Nodes 0, 1: the root's children; 2, 3: node 0's; 4, 5: node 1's.
PARENTS = [-1, -1, 0, 0, 1, 1]


def _tree_and_rows(model: Model, root_kids: list[int], kids: list[list[int]]) -> tuple[DraftTree, list, list]:
    tokens = root_kids + kids[0] + kids[1]
    tree = tree_from_parents([tokens], [PARENTS])
    prefixes = [(), (root_kids[0],), (root_kids[1],)] + [(root_kids[n // 2], tokens[2 + n]) for n in range(4)]
    return tree, [model.target[p] for p in prefixes], [model.draft[p] for p in prefixes]


def emitted_law(model: Model, iid_children: bool, iid_rule: bool) -> torch.Tensor:  # [V, V, V]
    """The exact law of the first three tokens when rounds verify this tree shape.

    iid_children: the drafter samples each node's 2 children i.i.d. from its draft row (enumerated with their
    probabilities), else takes the top-2 of the draft row. iid_rule: verify with the i.i.d. rule (draft rows
    passed), else with the deterministic rule.
    """
    law = torch.zeros(VOCAB, VOCAB, VOCAB, dtype=torch.float64)

    def kid_choices(prefix: tuple[int, ...]) -> list[tuple[list[int], float]]:
        q = model.draft[prefix]
        if iid_children:
            return [([a, b], float(q[a] * q[b])) for a, b in itertools.product(range(VOCAB), repeat=2)]
        return [(q.topk(2).indices.tolist(), 1.0)]

    for root_kids, p_root in kid_choices(()):
        for kids0, p0 in kid_choices((root_kids[0],)):
            for kids1, p1 in kid_choices((root_kids[1],)):
                tree, target_rows, draft_rows = _tree_and_rows(model, root_kids, [kids0, kids1])
                tokens = tree.tokens_of(0)
                draft_probs = torch.stack(draft_rows) if iid_rule else None
                for outcome in path_distribution(tree, 0, torch.stack(target_rows), draft_probs):
                    path = tuple(tokens[n] for n in outcome.accepted_nodes)
                    for x, px in enumerate(outcome.final_probs.tolist()):
                        if px > 0:
                            model.complete(path + (x,), p_root * p0 * p1 * outcome.probability * px, law)
    return law


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("iid", [False, True], ids=["topk_children", "iid_children"])
def test_exact_law_of_emitted_tokens_is_the_target(seed, iid):
    model = Model.make(seed)
    law, target = emitted_law(model, iid_children=iid, iid_rule=iid), model.target_law()
    assert abs(float(law.sum()) - 1.0) < 1e-12
    error = float((law - target).abs().max())
    print(f"seed {seed} {'iid' if iid else 'topk'}: max |P_out - P_target| over 64 three-token cells = {error:.2e}")
    assert error < 1e-9


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_iid_rule_on_topk_children_is_not_lossless(seed):
    """The condition matters: SpecInfer's rule assumes independent draws; top-k children are not."""
    model = Model.make(seed)
    error = float((emitted_law(model, iid_children=False, iid_rule=True) - model.target_law()).abs().max())
    assert error > 1e-2, error


# ---------------------------------------------------------------- Monte Carlo through verify_tree

NUM_TRIALS = 6000


def _first_two_counts(model: Model, iid_rule: bool, seed: int, iid_children: bool = False) -> torch.Tensor:
    """verify_tree sampled NUM_TRIALS times (one request each), top-2 children or 2 i.i.d. draft samples per node;
    a round emitting one token gets its second from the target (what the next round's first row would sample).
    Returns the counts of the first two tokens: [V * V]."""
    gen = torch.Generator().manual_seed(seed)

    def kids(prefix: tuple[int, ...]) -> list[int]:
        q = model.draft[prefix]
        return torch.multinomial(q, 2, replacement=True, generator=gen).tolist() if iid_children else q.topk(2).indices.tolist()

    tokens, target_rows, draft_rows = [], [], []
    for _ in range(NUM_TRIALS):
        root_kids = kids(())
        tree, t_rows, d_rows = _tree_and_rows(model, root_kids, [kids((k,)) for k in root_kids])
        tokens.append(tree.tokens_of(0))
        target_rows += t_rows
        draft_rows += d_rows
    batch = tree_from_parents(tokens, [PARENTS] * NUM_TRIALS)
    logits = torch.stack(target_rows).float().log()
    draft_probs = torch.stack(draft_rows).float() if iid_rule else None
    result = verify_tree(logits, batch, draft_probs, _st(NUM_TRIALS, 1.0, gen))
    first, second = result.output_token_ids[:, 0], result.output_token_ids[:, 1].clone()
    for x in range(VOCAB):
        rows = (result.num_accepted == 0) & (first == x)
        if rows.any():
            second[rows] = torch.multinomial(
                model.target[(x,)].float(), int(rows.sum()), replacement=True, generator=gen
            )
    return torch.bincount(first * VOCAB + second, minlength=VOCAB * VOCAB)


def _first_two_target(model: Model) -> torch.Tensor:  # [V * V]
    return model.target_law().sum(-1).flatten()


def _chi2_p_value(counts: torch.Tensor, probs: torch.Tensor) -> float:
    expected = probs * counts.sum()
    assert float(expected.min()) >= 5, "test design: too few expected samples per cell"
    return float(stats.chisquare(counts.double().numpy(), expected.numpy()).pvalue)


def _stale_residual_step(target_probs, child_tokens, draft_probs):
    """Mutant: each deterministic child is tested against p itself, not against p without the rejected siblings."""
    accept = target_probs[child_tokens].clone()
    residual = target_probs.clone()
    residual[child_tokens] = 0.0
    return SiblingStep(accept_probs=accept, residual=residual / residual.sum())


def _power(target: torch.Tensor, wrong: torch.Tensor) -> tuple[float, float]:
    """(power, noncentrality) of the Pearson test at ALPHA with NUM_TRIALS samples against the law `wrong`."""
    dof = target.numel() - 1
    noncentrality = NUM_TRIALS * float(((wrong - target) ** 2 / target).sum())
    return float(stats.ncx2.sf(stats.chi2.isf(ALPHA, dof), dof, noncentrality)), noncentrality


WRONG_RULES = {  # name -> (verify with the i.i.d. rule, replacement sibling_step or None)
    # SpecInfer's rule applied to top-k children, which are not independent draws.
    "iid_rule_on_topk": (True, None),
    # Rejected siblings' mass kept in the residual a later sibling is tested against.
    "stale_residual": (False, _stale_residual_step),
}


@pytest.mark.parametrize("iid", [False, True], ids=["topk_children", "iid_children"])
def test_monte_carlo_draws_pass_chi_square(iid):
    model = Model.make(0)
    counts = _first_two_counts(model, iid_rule=iid, seed=0, iid_children=iid)
    assert _chi2_p_value(counts, _first_two_target(model)) > ALPHA


@pytest.mark.parametrize("wrong_rule", list(WRONG_RULES))
def test_monte_carlo_chi_square_catches_wrong_rules_with_stated_power(monkeypatch, wrong_rule):
    """Each named wrong rule fails the test above; its power (> 0.99) is computed from the exact law and stated."""
    model = Model.make(0)
    target = _first_two_target(model)
    iid_rule, step = WRONG_RULES[wrong_rule]
    if step is not None:
        monkeypatch.setattr(tree_verifier, "sibling_step", step)
    wrong = emitted_law(model, iid_children=False, iid_rule=iid_rule).sum(-1).flatten()
    power, noncentrality = _power(target, wrong)
    print(f"{wrong_rule}: chi-square over {target.numel()} cells, {NUM_TRIALS} trials, alpha {ALPHA}: "
          f"power {power:.4f} (noncentrality {noncentrality:.1f}, max cell error {float((wrong - target).abs().max()):.3f})")
    assert power > 0.99, "test design: too few trials to catch the named wrong rule"
    assert _chi2_p_value(_first_two_counts(model, iid_rule=iid_rule, seed=1), target) < ALPHA  # the power, observed

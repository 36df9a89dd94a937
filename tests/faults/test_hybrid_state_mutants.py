"""The hybrid-state rollback mutants (faults/state_*.py), each caught by an independent check: the state oracle
(INV-STATE: the slot against a recomputation from the committed tokens alone) under forced acceptance, and greedy
identity with the clean engine (itself identical to HF transformers: tests/models/test_hybrid_vs_hf.py) under
lossless n-gram speculation. Each is inert on the clean path it bends (a target without recurrent state has no
commit to bend)."""

from __future__ import annotations

import pytest

from tests.support.hf_greedy import tiny_prompt_ids
from tests.support.hybrid_runs import MAX_TOKENS, NGRAM, PROMPT_LENGTHS, hybrid_llm, run_with_oracle
from tests.support.scripted_drafts import install_scripted
from tests.support.tiny_hybrid import build_tiny_hybrid
from tests.support.tiny_models import build_tiny_model

from specbench import SamplingParams
from specbench.faults import injection
from specbench.faults.catalog import HYBRID_MUTANTS, HYBRID_TREE_MUTANTS

# the chain rounds' mutants (the tree verify's bend tree rounds only: tests/models/test_hybrid_trees.py)
NAMES = [m.fault.name for m in HYBRID_MUTANTS if m not in HYBRID_TREE_MUTANTS]
# a prefix hit's snapshot is bent only where a hit happens: tests/faults/test_state_snapshot_mutant.py
CAUGHT_HERE = [n for n in NAMES if n != "state-snapshot-wrong-block"]
FORCED = (0.8, 0.6, 0.5)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen3_next_mutants")
    build_tiny_hybrid(root / "target", seed=0)
    build_tiny_model(root / "draft", "qwen3", num_layers=1, seed=5)
    return root


@pytest.fixture(scope="module")
def prompts():
    return tiny_prompt_ids(PROMPT_LENGTHS)


@pytest.fixture(scope="module")
def clean(dirs, prompts):
    """The clean engine's greedy output under plain decoding (== HF's: tests/models/test_hybrid_vs_hf.py)."""
    outs = hybrid_llm(dirs / "target").generate(prompts, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    return [list(o.output_token_ids) for o in outs]


def _forced(dirs, fault=None, **kwargs):
    """Draft-LM rounds whose drafts are accepted at forced rates (lossy, but the state oracle needs no reference
    output: it recomputes from whatever was committed)."""
    return hybrid_llm(dirs / "target", fault=fault, method="draft", draft=str(dirs / "draft"), max_num_steps=3,
                      synthetic_acceptance=FORCED, **kwargs)


def _scripted(dirs, prompts, clean, fault=None, **kwargs):
    """Lossless rounds rejecting at every position, accepting all, or drafting nothing
    (tests/support/scripted_drafts.py)."""
    llm = hybrid_llm(dirs / "target", fault=fault, **{**NGRAM, **kwargs})
    install_scripted(llm, prompts, clean)
    return llm


# The slot mutants need slots handed from one request to the next: fewer slots (concurrency) than requests; the
# preemption one a KV pool too small for three requests' growth too (requests preempted while others wait for slots).
PREEMPTING = {"max_concurrency": 3, "num_kv_blocks": 18}
REUSING_SLOTS = {"state-slot-not-reset": {"max_concurrency": 3}, "state-slot-reused-after-preemption": PREEMPTING}


def _oracle_engine(dirs, prompts, clean, name: str, fault=None):
    """The engine the state oracle watches for mutant `name` (bent by `fault`, or clean)."""
    # the zero-draft mutant needs zero-draft rows, which a draft LM never has: the script drafts none at times
    if name == "state-zero-draft-stale":
        return _scripted(dirs, prompts, clean, fault)
    return _forced(dirs, fault, **REUSING_SLOTS.get(name, {}))


@pytest.fixture(scope="module")
def clean_worst(dirs, prompts, clean):
    """mutant name -> the worst INV-STATE difference of the clean engine built as for it: one oracle run per engine
    configuration (most mutants share the default one), not one per mutant."""
    by_config: dict[str, float] = {}

    def get(name: str) -> float:
        config = "scripted" if name == "state-zero-draft-stale" else repr(REUSING_SLOTS.get(name, {}))
        if config not in by_config:
            by_config[config] = run_with_oracle(_oracle_engine(dirs, prompts, clean, name), prompts[:6],
                                                max_tokens=6)[1]
        return by_config[config]

    return get


@pytest.mark.parametrize("name", CAUGHT_HERE)
def test_the_state_oracle_catches_each_mutant(dirs, prompts, clean, clean_worst, name):
    assert clean_worst(name) < 1e-4
    _, worst, num_checked = run_with_oracle(_oracle_engine(dirs, prompts, clean, name, injection(name)), prompts[:6],
                                            max_tokens=6)
    assert num_checked > 0 and worst > 1e-2, (name, worst)


@pytest.mark.parametrize("name", CAUGHT_HERE)
def test_greedy_identity_catches_each_mutant(dirs, prompts, clean, name):
    llm = _scripted(dirs, prompts, clean, injection(name), **REUSING_SLOTS.get(name, {}))
    outs = llm.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    assert [list(o.output_token_ids) for o in outs] != clean, name


def _num_preempted(llm) -> int:
    return sum(s.num_preempted for s in llm.engine.step_stats)


@pytest.mark.parametrize("name", ["state-slot-reused-after-preemption", "state-slot-not-reset"])
def test_the_slot_mutants_are_caught_where_requests_are_preempted(dirs, prompts, clean, name):
    """Both slot bugs under preemption (a preempted request's slot given back and handed out while it waits):
    greedy identity with every request run, and the clean engine identical under the same preemptions."""
    params = SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True)
    clean_llm = _scripted(dirs, prompts, clean, **PREEMPTING)
    assert [list(o.output_token_ids) for o in clean_llm.generate(prompts, params)] == clean
    bent = _scripted(dirs, prompts, clean, injection(name), **PREEMPTING)
    outs = bent.generate(prompts, params)
    assert _num_preempted(clean_llm) > 0 and _num_preempted(bent) > 0
    assert [list(o.output_token_ids) for o in outs] != clean, name


INERT_PROMPT_LENGTHS = (6, 13)
INERT_PARAMS = SamplingParams(max_tokens=6, ignore_eos=True)


@pytest.fixture(scope="module")
def dense_clean(tiny_model_dir) -> list[list[int]]:
    """The clean n-gram engine's output on the target without recurrent state (once for every mutant)."""
    outs = hybrid_llm(tiny_model_dir, **NGRAM).generate(tiny_prompt_ids(INERT_PROMPT_LENGTHS), INERT_PARAMS)
    return [list(o.output_token_ids) for o in outs]


@pytest.mark.parametrize("name", NAMES)
def test_each_mutant_is_inert_on_a_target_without_recurrent_state(tiny_model_dir, dense_clean, name):
    bent = hybrid_llm(tiny_model_dir, fault=injection(name), **NGRAM).generate(tiny_prompt_ids(INERT_PROMPT_LENGTHS),
                                                                               INERT_PARAMS)
    assert [list(o.output_token_ids) for o in bent] == dense_clean


def test_the_invariant_sweep_helper_raises_inv_state_for_a_mutant(dirs, prompts):
    """`specbench check`'s invariant sweep runs hybrid targets through generate_checking_states: a clean engine
    passes, a mutant fails with one INV-STATE line (on the CLI: tests are too slow for the whole sweep)."""
    from specbench.attention.invariant_violation import InvariantViolation
    from specbench.check.state_oracle import generate_checking_states

    params = SamplingParams(max_tokens=6, ignore_eos=True)
    generate_checking_states(_forced(dirs), prompts[:2], params)
    with pytest.raises(InvariantViolation, match="INV-STATE violated after step"):
        generate_checking_states(_forced(dirs, injection("state-rolled-back-too-far")), prompts[:2], params)

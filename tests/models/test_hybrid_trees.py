"""Tree drafts on a hybrid target (Qwen3-Next: Gated DeltaNet layers beside gated full attention), through the
engine: each tree node's recurrent state continues its parent's (recurrent/tree_verify.py) and the slot takes the
accepted path's last node's (engine/state_attach.py commit_tree_states). Greedy output == HF transformers'
Qwen3NextForCausalLM (fp32, CPU) for every method that drafts trees (the target's MTP module, EAGLE-3, a draft LM) at
concurrency 10, under preemption and with prefix-cache hits; INV-STATE (check/state_oracle.py) after every step,
under forced acceptance of siblings and deep nodes too; the state-tree-sibling mutant caught by both; trees on the fla
kernels one clean error."""

from __future__ import annotations

import json

import pytest
import torch

from specbench import SamplingParams
from specbench.errors import SpecbenchError
from specbench.faults import injection
from specbench.models.config import ModelConfig
from specbench.recurrent.kernel_choice import FLA
from specbench.selftest.tiny_mtp import MTP_PREFIX, build_mtp_target
from specbench.speculation.draft_shape import DraftShape
from specbench.speculation.drafters.eagle.dummy import write_dummy_eagle3_head
from tests.support.hf_greedy import hf_greedy_of, hf_greedy_outputs, tiny_prompt_ids
from tests.support.hybrid_prefix import MAX_TOKENS as PREFIX_MAX_TOKENS
from tests.support.hybrid_prefix import run_waves
from tests.support.hybrid_runs import MAX_TOKENS, PROMPT_LENGTHS, hybrid_llm, run_with_oracle
from tests.support.tiny_hybrid import build_tiny_hybrid
from tests.support.tiny_models import build_tiny_model

TREE = DraftShape(eagle_topk=2, num_draft_tokens=6)  # the selftest's tree: siblings, cousins, depth 3 at k = 3
FORCED = (0.8, 0.6, 0.5)  # synthetic acceptance per depth (a tree's: by depth and sibling rank)
TREE_PATHS = {"spec.tree_round", "hybrid.tree_verify", "hybrid.state_commit"}


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen3_next_trees")
    build_tiny_hybrid(root / "target", seed=0)
    build_mtp_target(root / "target", root / "mtp", MTP_PREFIX)
    build_tiny_model(root / "draft", "qwen3", num_layers=1, seed=5)
    config = ModelConfig.from_hf(json.loads((root / "target" / "config.json").read_text()))
    write_dummy_eagle3_head(config, root / "eagle3", draft_vocab_size=config.vocab_size)
    return root


@pytest.fixture(scope="module")
def prompts():
    return tiny_prompt_ids(PROMPT_LENGTHS)


@pytest.fixture(scope="module")
def hf_greedy(dirs, prompts):
    return hf_greedy_of(dirs / "target", prompts, MAX_TOKENS)


def _tree_llm(dirs, method: str, fault=None, shape: DraftShape = TREE, **options):
    target, draft = {"mtp": (dirs / "mtp", None), "eagle3": (dirs / "target", str(dirs / "eagle3")),
                     "draft": (dirs / "target", str(dirs / "draft"))}[method]
    llm = hybrid_llm(target, fault=fault, method=method, draft=draft, max_num_steps=3, **options)
    llm.engine.set_draft_shape(shape)
    return llm


def _tokens(outs):
    return [list(o.output_token_ids) for o in outs]


def test_a_few_tree_rounds_match_plain_decoding_and_the_state_oracle(dirs, prompts):
    """Light: 4 requests, 6 tokens, the MTP module's trees against the plain engine (== HF: test_hybrid_vs_hf.py)."""
    few = prompts[:4]
    plain = hybrid_llm(dirs / "mtp").generate(few, SamplingParams(max_tokens=6, ignore_eos=True))
    llm = _tree_llm(dirs, "mtp")
    outs, worst, num_checked = run_with_oracle(llm, few, max_tokens=6)
    assert _tokens(outs) == _tokens(plain)
    assert num_checked > 0 and worst < 1e-4, worst
    assert sum(o.stats.num_accepted_tokens for o in outs) > 0
    assert TREE_PATHS <= llm.engine.paths_taken()


@pytest.mark.parametrize("case", ["mtp", "mtp-preempting", "eagle3", "draft"])
def test_tree_rounds_match_hf_and_the_state_oracle(dirs, prompts, hf_greedy, case):
    """Concurrency 10; the MTP module accepts paths of every length (rejections at every depth), EAGLE-3's random
    head and the random draft LM mostly none (rejections at the root); a tight KV pool preempts."""
    method = case.split("-")[0]
    options = {"num_kv_blocks": 40} if case.endswith("preempting") else {}
    llm = _tree_llm(dirs, method, **options)
    outs, worst, num_checked = run_with_oracle(llm, prompts)
    assert _tokens(outs) == hf_greedy
    assert num_checked > 0 and worst < 1e-4, worst
    assert (sum(o.stats.num_preemptions for o in outs) > 0) == case.endswith("preempting")
    assert TREE_PATHS <= llm.engine.paths_taken()
    lengths = {n for o in outs for n in o.stats.accepted_per_round}
    if method == "mtp":
        assert {0, 1, 2, 3} <= lengths, lengths  # paths end at every depth
    else:
        assert 0 in lengths


def test_forced_acceptance_of_siblings_and_deep_nodes_keeps_the_state_oracle(dirs, prompts):
    """Synthetic tree acceptance accepts by (depth, sibling rank): paths through second children and to depth 3,
    whatever the draft LM proposes; the oracle needs no reference output."""
    llm = _tree_llm(dirs, "draft", synthetic_acceptance=FORCED)
    outs, worst, num_checked = run_with_oracle(llm, prompts[:8], max_tokens=10)
    assert num_checked > 0 and worst < 1e-4, worst
    assert {1, 2, 3} <= {n for o in outs for n in o.stats.accepted_per_round}
    ranks = [o.stats.tree_counts.accepted_per_rank for o in outs]
    assert sum(r[1] for r in ranks if len(r) > 1) > 0, ranks  # second children accepted


@pytest.mark.slow  # ~4-9 s on 2 busy cores: the -m 'not slow' subset stays under 5 min
def test_the_tree_sibling_mutant_is_caught_by_greedy_identity_and_the_state_oracle(dirs, prompts, hf_greedy):
    bent = _tree_llm(dirs, "mtp", injection("state-tree-sibling"))
    outs, worst, _ = run_with_oracle(bent, prompts)
    assert _tokens(outs) != hf_greedy
    assert worst > 1e-2, worst
    chains = _tree_llm(dirs, "mtp", injection("state-tree-sibling"), shape=DraftShape(eagle_topk=1))
    assert _tokens(chains.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))) == hf_greedy


def test_prefix_hits_resume_tree_rounds(dirs, prompts):
    """Waves on one engine (tests/support/hybrid_prefix.py): first turns hit a shared system prompt, follow-ups their
    first turn and its output, whose block snapshots a tree round's commit took from its accepted path; greedy ==
    HF on every prompt, INV-STATE after every step."""
    from transformers import AutoModelForCausalLM

    llm = _tree_llm(dirs, "mtp", max_concurrency=8, enable_prefix_caching=True)
    outs, worst, num_checked = run_waves(llm, prompts)
    hf = AutoModelForCausalLM.from_pretrained(dirs / "target", dtype=torch.float32).eval()
    assert _tokens(outs) == hf_greedy_outputs(hf, [list(o.prompt_token_ids) for o in outs], PREFIX_MAX_TOKENS)
    assert num_checked > 0 and worst < 1e-4, worst
    turns, follow_ups = outs[1 : 1 + len(prompts)], outs[1 + len(prompts):]
    # a follow-up hit past its first turn's prompt: into the output blocks the tree rounds committed
    assert any(f.stats.num_prefix_hit_tokens > len(t.prompt_token_ids) for t, f in zip(turns, follow_ups))
    assert {"prefix.hit", "hybrid.snapshot_restore"} | TREE_PATHS <= llm.engine.paths_taken()


def test_trees_on_the_fla_kernels_are_one_clean_error(dirs):
    """fla's recurrent kernel chains one state per sequence: an engine on it refuses trees (CPU cannot build one:
    its resolved choice is set here, as a CUDA engine's would be)."""
    llm = hybrid_llm(dirs / "mtp", method="mtp", max_num_steps=3)
    llm.engine.parts.recurrent_kernels = FLA
    with pytest.raises(SpecbenchError, match="tree drafts on a hybrid target cannot run on --recurrent-kernels fla"):
        llm.engine.set_draft_shape(TREE)

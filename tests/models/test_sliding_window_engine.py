"""Greedy output of the engine on sliding-window targets == HF transformers' own generate (fp32), plain and for
every speculative method, with and without preemption; the window is shorter than the prompts and than prompt + k
(Mistral, every layer), or between the shortest prompt and it plus k (Qwen2, alternating local / global layers).
Debug invariants are on (tests/conftest.py): INV-KIND checks every forward's window metadata as it runs."""

from __future__ import annotations

import pytest
import torch
from tests.support.eagle_heads import HeadVariant, unfitted_tensors, write_head
from tests.support.hf_greedy import hf_greedy_outputs, tiny_prompt_ids
from tests.support.window_models import WindowTarget, build_window_target

from specbench import LLM, SamplingParams
from specbench.attention.kinds import SlidingWindowAttention
from specbench.models.loader import load_model
from specbench.speculation.drafters.eagle.config import EAGLE1
from specbench.speculation.drafters.eagle.writer import HeadFormat

MAX_TOKENS = 20
# Too few 4-token blocks for 4 concurrent requests of up to 33 + 20 + k + 1 tokens: forces preemption.
PREEMPTING_KV_BLOCKS = 20


@pytest.fixture(scope="module", params=["mistral-w5", "qwen2-alternating-w7"])
def window_case(request, tmp_path_factory):
    """(name, WindowTarget, HF greedy outputs of the windowed target)."""
    from transformers import AutoModelForCausalLM

    built = build_window_target(tmp_path_factory.mktemp("window"), request.param)
    hf = AutoModelForCausalLM.from_pretrained(built.target, dtype=torch.float32).eval()
    return request.param, built, hf_greedy_outputs(hf, tiny_prompt_ids(), MAX_TOKENS)


def _generate(target: WindowTarget, **kwargs) -> tuple[list[list[int]], list]:
    if "num_kv_blocks" not in kwargs:
        kwargs["kv_cache_gb"] = 0.25
    llm = LLM(str(target.target), dtype="fp32", device="cpu", block_size=4, max_concurrency=4, allow_pickle=True,
              debug_invariants=True, **kwargs)
    outs = llm.generate(tiny_prompt_ids(), SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    return [list(o.output_token_ids) for o in outs], outs


def test_the_window_changes_hf_greedy_output(window_case):
    """Guard: without its window the same weights decode differently, so the identities below test the window."""
    from transformers import AutoModelForCausalLM

    _, built, expected = window_case
    hf = AutoModelForCausalLM.from_pretrained(built.unwindowed, dtype=torch.float32).eval()
    assert hf_greedy_outputs(hf, tiny_prompt_ids(), MAX_TOKENS) != expected


def test_loader_declares_the_layer_kinds(window_case):
    name, built, _ = window_case
    kinds = load_model(str(built.target), dtype=torch.float32, device="cpu", attn_backend="torch").model.config \
        .attention_kinds
    if name == "mistral-w5":
        assert kinds == (SlidingWindowAttention(5),) * 2
    else:
        assert [k.name for k in kinds] == ["sliding_window", "full", "sliding_window"]
        assert kinds[0] == SlidingWindowAttention(7)


def test_plain_matches_hf(window_case):
    _, built, expected = window_case
    assert _generate(built)[0] == expected


@pytest.mark.parametrize("num_steps, is_preempting", [(2, False), (4, True)])
def test_draft_model_matches_hf(window_case, num_steps, is_preempting):
    _, built, expected = window_case
    extra = {"num_kv_blocks": PREEMPTING_KV_BLOCKS} if is_preempting else {}
    got, outs = _generate(built, method="draft", draft=str(built.draft), max_num_steps=num_steps, **extra)
    assert got == expected
    assert (sum(o.stats.num_preemptions for o in outs) > 0) == is_preempting
    # The draft is windowed too (a perturbed copy): a stale or missing window in its steps lowers this.
    assert sum(o.stats.num_accepted_tokens for o in outs) > 0.2 * sum(o.stats.num_draft_tokens for o in outs)


def test_ngram_matches_hf_under_preemption(window_case):
    name, built, expected = window_case
    got, outs = _generate(built, method="ngram", max_num_steps=3, ngram_min=1, ngram_max=3,
                          num_kv_blocks=PREEMPTING_KV_BLOCKS)
    assert got == expected
    # Mistral's layers are all windowed and n-gram keeps no KV of its own: the blocks outside the window are released
    # as the requests advance (engine/scheduler.py), so the same pool no longer preempts; Qwen2's global layer keeps
    # every block (tests/kv/test_kv_release_outside_window.py).
    assert (sum(o.stats.num_preemptions for o in outs) > 0) == (name != "mistral-w5")


def test_eagle_matches_hf_under_preemption(window_case, tmp_path):
    """An unfitted EAGLE-1 head (full attention itself) drafting for the windowed target: verify and the head's
    catch-up run on every round; greedy output stays the target's whatever the head proposes."""
    _, built, expected = window_case
    head = write_head(tmp_path / "head", unfitted_tensors(built.target, "e1-bias"),
                      HeadVariant("t2", "e1-bias", "eagle", HeadFormat(EAGLE1)), built.target)
    got, outs = _generate(built, method="eagle", draft=str(head), max_num_steps=3,
                          num_kv_blocks=PREEMPTING_KV_BLOCKS)
    assert got == expected
    assert sum(o.stats.num_preemptions for o in outs) > 0

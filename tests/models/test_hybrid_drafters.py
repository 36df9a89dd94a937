"""EAGLE-3 and the checkpoint's own MTP module on a hybrid target (Qwen3-Next: Gated DeltaNet layers beside gated full
attention), through the engine: greedy output == HF transformers' Qwen3NextForCausalLM (fp32, CPU) at k = 1..3 with 10
concurrent requests, MTP also under preemption and on a MoE target; INV-STATE after every step, with the MTP
module's own accepted drafts and under forced acceptance; every draft step against the cache-free oracle.

The MTP module itself against a reference built from transformers' Qwen3-Next modules (its decoder layer class with a
full-attention layer type, its (1 + w) RMSNorm, a plain fc, as vLLM's qwen3_next_mtp lays the module out), and the
hidden states EAGLE-3 reads against transformers' output_hidden_states.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from specbench import SamplingParams
from specbench.check.eagle_oracle import recompute_eagle_logits
from specbench.check.oracle import FP32_RTOL, record_and_compare
from specbench.check.reference import build_reference_drafting_llm
from specbench.check.target_features import recompute_target_features
from specbench.models.config import ModelConfig
from specbench.selftest.tiny_mtp import MTP_PREFIX, build_mtp_target
from specbench.speculation.drafters.eagle.dummy import write_dummy_eagle3_head
from tests.support.hf_greedy import hf_greedy_of, hf_greedy_outputs, tiny_prompt_ids
from tests.support.hybrid_runs import MAX_TOKENS, PROMPT_LENGTHS, hybrid_llm, run_with_oracle
from tests.support.tiny_hybrid import build_tiny_hybrid

TOKENS = (5, 17, 99, 3, 42, 250, 7, 8, 123, 77, 31)
FORCED = (0.8, 0.6, 0.5)  # synthetic acceptance per draft position


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen3_next_drafters")
    build_tiny_hybrid(root / "target", seed=0)
    build_mtp_target(root / "target", root / "mtp", MTP_PREFIX)
    build_tiny_hybrid(root / "moe", seed=3, moe=True)
    build_mtp_target(root / "moe", root / "moe-mtp", MTP_PREFIX)
    config = ModelConfig.from_hf(json.loads((root / "target" / "config.json").read_text()))
    write_dummy_eagle3_head(config, root / "eagle3", draft_vocab_size=config.vocab_size)
    return root


@pytest.fixture(scope="module")
def prompts():
    return tiny_prompt_ids(PROMPT_LENGTHS)


@pytest.fixture(scope="module")
def hf_greedy(dirs, prompts):
    return hf_greedy_of(dirs / "target", prompts, MAX_TOKENS)


def _tokens(outs):
    return [list(o.output_token_ids) for o in outs]


@pytest.mark.parametrize("case", ["k1", "k2", "k3", "k3-preempting"])
def test_mtp_matches_hf_and_the_state_oracle(dirs, prompts, hf_greedy, case):
    """The MTP module (a copy of the target's first attention layer over the next token's embedding) accepts most
    of its drafts here, so rounds commit every accepted length, and each slot equals the recomputation."""
    options = {"num_kv_blocks": 40} if case.endswith("preempting") else {}
    llm = hybrid_llm(dirs / "mtp", method="mtp", max_num_steps=int(case[1]), **options)
    outs, worst, num_checked = run_with_oracle(llm, prompts)
    assert _tokens(outs) == hf_greedy
    drafted = sum(o.stats.num_draft_tokens for o in outs)
    accepted = sum(o.stats.num_accepted_tokens for o in outs)
    assert 0 < accepted < drafted, (accepted, drafted)
    assert num_checked > 0 and worst < 1e-4, worst
    assert (sum(o.stats.num_preemptions for o in outs) > 0) == case.endswith("preempting")
    assert {"proposer.mtp", "hybrid.state_write", "hybrid.state_commit"} <= llm.engine.paths_taken()


def test_mtp_on_a_moe_hybrid_matches_hf(dirs, prompts):
    from transformers import AutoModelForCausalLM

    few = prompts[:4]
    model = AutoModelForCausalLM.from_pretrained(dirs / "moe", dtype=torch.float32).eval()
    expected = hf_greedy_outputs(model, few, 8)
    llm = hybrid_llm(dirs / "moe-mtp", method="mtp", max_num_steps=3)
    outs = llm.generate(few, SamplingParams(max_tokens=8, ignore_eos=True))
    assert _tokens(outs) == expected
    assert llm.engine.proposer.describe()["moe_layer"] is True
    assert sum(o.stats.num_draft_tokens for o in outs) > 0


def test_eagle3_matches_hf(dirs, prompts, hf_greedy):
    llm = hybrid_llm(dirs / "target", method="eagle3", draft=str(dirs / "eagle3"), max_num_steps=3)
    outs = llm.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    assert _tokens(outs) == hf_greedy
    assert sum(o.stats.num_draft_tokens for o in outs) > 0
    assert {"proposer.eagle3", "hybrid.state_commit"} <= llm.engine.paths_taken()


@pytest.mark.parametrize("method", ["eagle3", "mtp"])
def test_forced_acceptance_keeps_the_state_oracle(dirs, prompts, method):
    """Synthetic acceptance accepts drafts at every position (the random EAGLE-3 head alone accepts none)."""
    target, draft = (dirs / "target", str(dirs / "eagle3")) if method == "eagle3" else (dirs / "mtp", None)
    llm = hybrid_llm(target, method=method, draft=draft, max_num_steps=3, synthetic_acceptance=FORCED)
    outs, worst, num_checked = run_with_oracle(llm, prompts[:8], every=2)
    assert sum(o.stats.num_accepted_tokens for o in outs) > 10
    assert num_checked > 0 and worst < 1e-4, worst


@pytest.mark.parametrize("method", ["eagle3", "mtp"])
def test_every_draft_step_matches_the_cache_free_oracle(dirs, prompts, method):
    target, draft = (dirs / "target", str(dirs / "eagle3")) if method == "eagle3" else (dirs / "mtp", None)
    llm = hybrid_llm(target, method=method, draft=draft, max_num_steps=3)
    reference = build_reference_drafting_llm(llm.engine.config)
    num, bad = record_and_compare(llm, reference, prompts[:4], SamplingParams(max_tokens=6, ignore_eos=True),
                                  FP32_RTOL)
    assert num > 0 and bad == [], bad[:3]


def _device_of(model) -> torch.device:
    """The engine's device (SPECBENCH_TEST_DEVICE=cuda in the GPU scripts): a recomputation runs where the model is."""
    return next(model.parameters()).device


@torch.no_grad()
def test_aux_hidden_states_are_transformers_hidden_states(dirs):
    """EAGLE-3's features on a hybrid: HF hidden_states[i] (the input of layer i; index L the last layer's output
    before the final norm, which HF reports after it), as on the dense targets."""
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(dirs / "target", dtype=torch.float32).eval()
    expected = hf(torch.tensor([TOKENS]), output_hidden_states=True).hidden_states  # [L + 1] of [1, n, H]
    llm = hybrid_llm(dirs / "target")
    model, num_layers = llm.engine.runner.model, llm.engine.runner.model.config.num_hidden_layers
    ours = recompute_target_features(model, tuple(range(num_layers + 1)), TOKENS, 4, _device_of(model))
    per_layer = ours.view(len(TOKENS), num_layers + 1, -1)
    for i in range(num_layers):
        assert torch.allclose(per_layer[:, i], expected[i][0], atol=1e-5), i
    assert torch.allclose(hf.model.norm(per_layer[:, num_layers]), expected[num_layers][0], atol=1e-5)


def _perturbed_mtp_target(dirs, out):
    """The MTP target with its three norms and fc drawn at random (the tiny builder's are the identity and a near
    pass-through): the (1 + w) norms and the concatenation order then show."""
    gen = torch.Generator().manual_seed(11)
    build_mtp_target(dirs / "target", out, MTP_PREFIX)
    weights = load_file(out / "model.safetensors")
    for name in ("mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight", "mtp.norm.weight"):
        weights[name] = 0.3 * torch.randn(weights[name].shape, generator=gen)
    fc = weights["mtp.fc.weight"]
    weights["mtp.fc.weight"] = torch.randn(fc.shape, generator=gen) / fc.shape[1] ** 0.5
    save_file(weights, out / "model.safetensors", metadata={"format": "pt"})
    return out, weights


class _HfMtpReference(torch.nn.Module):
    """Qwen3-Next's MTP module out of transformers' own classes: pre-fc norms of embedding and hidden, fc over
    [embedding; hidden], one decoder layer of full-attention type, the final norm; the target's lm_head."""

    def __init__(self, hf, weights: dict[str, torch.Tensor]) -> None:
        from transformers.models.qwen3_next import modeling_qwen3_next as q

        super().__init__()
        config = hf.config
        h, eps = config.hidden_size, config.rms_norm_eps
        attention_idx = config.layer_types.index("full_attention")
        self.layer = q.Qwen3NextDecoderLayer(config, attention_idx)
        self.norms = torch.nn.ModuleDict({n: q.Qwen3NextRMSNorm(h, eps) for n in ("emb", "hid", "out")})
        self.fc = torch.nn.Linear(2 * h, h, bias=False)
        self.rotary = q.Qwen3NextRotaryEmbedding(config)
        self.layer.load_state_dict({k.removeprefix("mtp.layers.0."): v for k, v in weights.items()
                                    if k.startswith("mtp.layers.0.")})
        for key, name in (("emb", "pre_fc_norm_embedding"), ("hid", "pre_fc_norm_hidden"), ("out", "norm")):
            self.norms[key].weight.copy_(weights[f"mtp.{name}.weight"])
        self.fc.weight.copy_(weights["mtp.fc.weight"])
        self.embed, self.lm_head = hf.model.embed_tokens, hf.lm_head
        self.eval()

    def forward(self, next_ids: torch.Tensor, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """next_ids [1, n] the tokens at p + 1, hidden [1, n, H] at p (positions 0..n-1): (normed out, logits)."""
        n = next_ids.shape[1]
        x = self.fc(torch.cat([self.norms["emb"](self.embed(next_ids)), self.norms["hid"](hidden)], dim=-1))
        positions = torch.arange(n)[None]
        mask = torch.full((n, n), float("-inf")).triu(1)[None, None]
        out = self.layer(x, position_embeddings=self.rotary(x, positions), attention_mask=mask,
                         position_ids=positions)
        normed = self.norms["out"](out)
        return normed, self.lm_head(normed)


@torch.no_grad()
def test_the_mtp_module_matches_a_transformers_reference(dirs, tmp_path):
    from transformers import AutoModelForCausalLM

    target, weights = _perturbed_mtp_target(dirs, tmp_path / "mtp")
    hf = AutoModelForCausalLM.from_pretrained(dirs / "target", dtype=torch.float32).eval()
    reference = _HfMtpReference(hf, weights)
    ids, n = torch.tensor([TOKENS]), len(TOKENS)
    target_hidden = hf(ids, output_hidden_states=True).hidden_states[-1]  # [1, n, H] after the final norm
    step1, step1_logits = reference(ids[:, 1:], target_hidden[:, :-1])  # row p predicts token p + 2
    draft = step1_logits[0, -1].argmax()
    chained = torch.cat([target_hidden[:, :-1], step1[:, -1:]], dim=1)  # step 2 is fed the module's own output
    _, step2_logits = reference(torch.cat([ids[:, 1:], draft.view(1, 1)], 1), chained)

    llm = hybrid_llm(target, method="mtp", max_num_steps=2)
    proposer = llm.engine.proposer
    model = llm.engine.runner.model
    features = recompute_target_features(model, proposer.target_feature_layers, TOKENS, 4, _device_of(model))
    assert torch.allclose(features, target_hidden[0], atol=1e-5)
    for m in range(3, n + 1):  # every prefix's step 1
        ours = recompute_eagle_logits(proposer, TOKENS[:m], 1, features)[0]
        assert torch.allclose(ours, step1_logits[0, m - 2], atol=1e-4), m
    ours = recompute_eagle_logits(proposer, (*TOKENS, int(draft)), 2, features)
    assert torch.allclose(ours[0], step1_logits[0, -1], atol=1e-4)
    assert torch.allclose(ours[1], step2_logits[0, -1], atol=1e-4)

"""Draft heads on the fused projections (speculation/drafters/eagle/fused_head.py) == the eager heads (fp32, interpreted
on CPU): EAGLE-3 (both residual conventions), EAGLE-1 (biased fc, identity first norm) and MTP, over a catch-up of
several queries then one-query draft steps, for one request and a batch of two; the outputs and the K/V the
heads leave in their caches agree, and the fused run records `eagle.fused_head` (the eager one never)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

pytest.importorskip("triton")

from tests.support.interpreted import assert_passes_interpreted  # noqa: E402
from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

runnable = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)

from specbench.attention import build_metadata, create_backend  # noqa: E402
from specbench.execution_paths import PathRecorder  # noqa: E402
from specbench.speculation.registry import path_names  # noqa: E402
from specbench.kv.kv_cache import KVCache  # noqa: E402
from specbench.models import get_preset  # noqa: E402
from specbench.models.fused_kernels import set_policy  # noqa: E402
from specbench.speculation.drafters.eagle.config import EAGLE1, EAGLE3_SPECULATORS, EagleHeadConfig  # noqa: E402
from specbench.speculation.drafters.eagle.head import EagleHead, HeadShape  # noqa: E402
from specbench.speculation.drafters.mtp.head import MtpHead, mtp_head_config  # noqa: E402

BLOCK_SIZE = 4
NUM_BLOCKS = 12
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # fp32 on either (CPU: the interpreter)


def _randomize(module: torch.nn.Module, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in module.named_parameters():
            if "norm" in name:  # non-unit gains: a kernel that dropped one would show
                param.copy_(1 + 0.3 * torch.randn(param.shape, generator=gen))
            else:
                param.copy_(0.15 * torch.randn(param.shape, generator=gen))


def _bind_random_target(head, vocab_size: int, hidden: int, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    head.bind_target(torch.randn(vocab_size, hidden, generator=gen).to(DEVICE),
                     torch.randn(vocab_size, hidden, generator=gen).to(DEVICE))


def _layer(head_dim: int):
    return replace(get_preset("tiny-llama"), num_hidden_layers=1, head_dim=head_dim)


def eagle_head(method: str, head_dim: int, norm_before_residual: bool = False) -> EagleHead:
    layer = _layer(head_dim)
    h = layer.hidden_size
    cfg = EagleHeadConfig(
        dialect=EAGLE1 if method == "eagle" else EAGLE3_SPECULATORS, dialect_reason="test", layer=layer,
        num_layers=1, vocab_size=layer.vocab_size, draft_vocab_size=layer.vocab_size, target_hidden_size=h,
        fc_bias=method == "eagle", norm_before_residual=norm_before_residual, norm_output=False, aux=None)
    shape = HeadShape(cfg, fc_in_features=3 * h if method == "eagle3" else 2 * h, has_own_embed=False,
                      has_own_lm_head=False)
    head = EagleHead(shape, create_backend("torch", PathRecorder(path_names())), torch.float32, DEVICE)
    _randomize(head, seed=head_dim)
    _bind_random_target(head, layer.vocab_size, h, seed=99)
    return head


def mtp_head(head_dim: int) -> MtpHead:
    layer = _layer(head_dim)
    head = MtpHead(mtp_head_config(replace(layer, num_mtp_modules=1)), create_backend("torch", PathRecorder(path_names())),
                   torch.float32, DEVICE)
    _randomize(head, seed=head_dim + 1)
    _bind_random_target(head, layer.vocab_size, layer.hidden_size, seed=98)
    return head


def run_round(head, policy: str, feature_dim: int) -> tuple[list[torch.Tensor], KVCache]:
    """A catch-up over 5 and 3 positions of two requests, then two one-query steps of both, then one of request 0
    alone; returns every forward's (hidden, logits_input) and the cache."""
    set_policy(head, policy)
    head.attn_backend.paths.reset()
    kv = KVCache(head.kv_cache_spec(), NUM_BLOCKS, BLOCK_SIZE, DEVICE)
    tables = [[5, 1, 7], [2, 9, 4]]
    gen = torch.Generator().manual_seed(5)
    features = torch.randn(8, feature_dim, generator=gen).to(DEVICE)
    ids = torch.randint(0, 1000, (8,), generator=gen).to(DEVICE)
    outs = []
    md = build_metadata(positions=[0, 1, 2, 3, 4, 0, 1, 2], num_query=[5, 3], seq_lens=[5, 3], block_tables=tables,
                        block_size=BLOCK_SIZE, device=DEVICE)
    out = head(ids, head.project_target_features(features), md, kv, phase="eagle_extend")
    outs += [out.hidden, out.logits_input]
    hidden = out.hidden[[4, 7]]
    for step, positions in enumerate(([5, 3], [6, 4])):
        md = build_metadata(positions=positions, num_query=[1, 1], seq_lens=[p + 1 for p in positions],
                            block_tables=tables, block_size=BLOCK_SIZE, device=DEVICE)
        out = head(ids[[step, step + 1]], hidden, md, kv, phase=f"eagle_step_{step + 1}")
        outs += [out.hidden, out.logits_input]
        hidden = out.hidden
    md = build_metadata(positions=[7], num_query=[1], seq_lens=[8], block_tables=tables[:1], block_size=BLOCK_SIZE,
                        device=DEVICE)
    out = head(ids[:1], hidden[:1], md, kv, phase="eagle_step_3")
    outs += [out.hidden, out.logits_input]
    return outs, kv


def assert_fused_equals_eager(head, feature_dim: int) -> None:
    eager, eager_kv = run_round(head, "off", feature_dim)
    assert "eagle.fused_head" not in head.attn_backend.paths.taken()
    fused, fused_kv = run_round(head, "on", feature_dim)
    assert "eagle.fused_head" in head.attn_backend.paths.taken()
    # fp32: the fused and eager chains differ only in the GEMMs' summation order (EAGLE-1's un-normed stream
    # grows to O(50) over the steps: the tolerance scales with each output)
    pairs = [*zip(fused, eager), *zip(fused_kv.k, eager_kv.k), *zip(fused_kv.v, eager_kv.v)]
    for i, (got, expected) in enumerate(pairs):
        scale = max(1.0, expected.abs().max().item())
        torch.testing.assert_close(got, expected, atol=1e-5 * scale, rtol=1e-5, msg=f"output {i}")


@runnable
@pytest.mark.parametrize("head_dim", [16, 32], ids=["qkv-then-rope", "rope-store"])
@pytest.mark.parametrize("norm_before_residual", [False, True])
def test_eagle3_fused_head_equals_eager(head_dim, norm_before_residual):
    head = eagle_head("eagle3", head_dim, norm_before_residual)
    assert_fused_equals_eager(head, 3 * head.config.hidden_size)


@runnable
def test_eagle1_fused_head_equals_eager():
    head = eagle_head("eagle", 32)
    assert head.fc.bias is not None  # the bias rides as a broadcast residual
    assert_fused_equals_eager(head, head.config.hidden_size)


@runnable
@pytest.mark.parametrize("head_dim", [16, 32], ids=["qkv-then-rope", "rope-store"])
def test_mtp_fused_head_equals_eager(head_dim):
    head = mtp_head(head_dim)
    assert_fused_equals_eager(head, head.config.layer.hidden_size)


@runnable
@pytest.mark.slow  # ~1.5 min a method under the Triton interpreter on 2 busy cores
@pytest.mark.parametrize("method", ["eagle", "eagle3", "mtp"])
def test_engines_with_the_fused_head_match_the_unfused_engine(tmp_path, method):
    """The no-bias "llama" tiny target's drafters with fused kernels on (the head takes eagle.fused_head) and off:
    the same greedy tokens, the plain engine's, and the same drafts (argmax drafts of fp32 heads that agree)."""
    from specbench import LLM, SamplingParams
    from specbench.selftest.tiny import build_tiny_pair, random_prompts
    from specbench.selftest.tiny_eagle import build_tiny_eagle_head
    from specbench.selftest.tiny_eagle1 import build_tiny_eagle1_head
    from specbench.selftest.tiny_mtp import MTP_PREFIX, build_mtp_target

    target, _ = build_tiny_pair(tmp_path / "pair", seed=1, variant="llama")
    if method == "mtp":
        target, spec = build_mtp_target(target, tmp_path / "mtp", MTP_PREFIX), {}
    elif method == "eagle":
        spec = {"draft": build_tiny_eagle1_head(target, tmp_path / "eagle", seed=1)}
    else:
        spec = {"draft": build_tiny_eagle_head(target, tmp_path / "eagle3")}
    engine = {"dtype": "fp32", "device": DEVICE, "block_size": 4, "num_kv_blocks": 128, "max_concurrency": 4}
    prompts = random_prompts(3)
    params = SamplingParams(max_tokens=10, ignore_eos=True)
    plain = [list(o.output_token_ids) for o in LLM(target, fused_kernels="off", **engine).generate(prompts, params)]
    runs = {}
    for fused in ("off", "on"):
        llm = LLM(target, method=method, max_num_steps=3, fused_kernels=fused, **engine, **spec)
        outs = llm.generate(prompts, params)
        runs[fused] = ([list(o.output_token_ids) for o in outs], [o.stats.num_accepted_per_pos for o in outs])
        assert ("eagle.fused_head" in llm.engine.paths.taken()) == (fused == "on")
    assert runs["on"][0] == runs["off"][0] == plain
    assert runs["on"][1] == runs["off"][1]  # same drafts accepted at every position


@pytest.mark.skipif(kernels_runnable_here(), reason="the interpreted tests run in this process")
def test_interpreted_tests_pass_in_a_fresh_process():
    assert_passes_interpreted(__file__, "-m", "not slow")

"""DecoderLM with the fused Triton RMSNorm / residual-add+norm / RoPE / SiLU-and-mul kernels == the torch path:
prefill and decode over the torch attention backend (CPU under TRITON_INTERPRET=1), greedy bf16 tokens and graph
capture on a GPU."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
import torch

pytest.importorskip("triton")

from tests.support.interpreted import assert_passes_interpreted  # noqa: E402

from tests.support.gpu_report import record_gpu_result  # noqa: E402

from specbench.attention import build_metadata, create_backend  # noqa: E402
from specbench.config import EngineConfig  # noqa: E402
from specbench.errors import SpecbenchError  # noqa: E402
from tests.support.kernel_testing import kernels_runnable_here  # noqa: E402
from specbench.kv.kv_cache import KVCache  # noqa: E402
from specbench.models import DecoderLM, decode_gemv, get_preset  # noqa: E402
from specbench.models import fused_kernels as fused  # noqa: E402
from specbench.models import layers  # noqa: E402
from specbench.models.layers import GatedMLP, RMSNorm, RotaryEmbedding  # noqa: E402

RERUN_REASON = "triton was imported before TRITON_INTERPRET=1; test_interpreted_fused_tests_pass_in_a_fresh_process"
runnable = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
BLOCK_SIZE = 4


@dataclass(frozen=True)
class Forward:
    logits: torch.Tensor  # [num_tokens, vocab] fp32
    aux_hidden_states: torch.Tensor  # [num_tokens, 2 * hidden]: embeddings and layer 2's input


def tiny_model(preset: str, dtype: torch.dtype, device: torch.device, num_layers: int = 3) -> DecoderLM:
    config = replace(get_preset(preset), num_hidden_layers=num_layers)
    model = DecoderLM(config, create_backend("torch"), dtype=dtype, device=device)
    model.init_random_weights(seed=0, std=0.1)
    gen = torch.Generator(device=device).manual_seed(1)
    for name, param in model.named_parameters():
        if name.endswith("norm.weight"):  # non-unit weights: a kernel that skipped them would show
            param.copy_(1 + 0.3 * torch.randn(param.shape, generator=gen, device=device))
    return model


def greedy(model: DecoderLM, prompts: list[list[int]], num_decode_steps: int,
           forced: list[list[int]] | None = None) -> tuple[list[list[int]], list[Forward], KVCache]:
    """Prefill all prompts in one forward, then decode them together; `forced` feeds these tokens instead."""
    device = model.embed_weight.device
    num_blocks_per_req = -(-(max(map(len, prompts)) + num_decode_steps + 1) // BLOCK_SIZE)
    num_blocks = len(prompts) * num_blocks_per_req + 1  # block 0 stays unused
    kv = KVCache(model.kv_cache_spec(), num_blocks, BLOCK_SIZE, device)
    # Descending, interleaved block ids: each request's blocks are non-contiguous.
    tables = [[num_blocks - 1 - r - len(prompts) * i for i in range(num_blocks_per_req)] for r in range(len(prompts))]
    seqs = [list(p) for p in prompts]
    outputs: list[list[int]] = [[] for _ in prompts]
    forwards = []
    num_query = [len(p) for p in prompts]
    for step in range(num_decode_steps + 1):
        ids = [t for seq, n in zip(seqs, num_query) for t in seq[-n:]]
        positions = [len(seq) - n + j for seq, n in zip(seqs, num_query) for j in range(n)]
        md = build_metadata(positions=positions, num_query=num_query, seq_lens=[len(s) for s in seqs],
                            block_tables=tables, block_size=BLOCK_SIZE, device=device)
        with torch.no_grad():
            out = model(torch.tensor(ids, device=device), md, kv, aux_layer_ids=(0, 2))
            logits = model.compute_logits(out.hidden_states)
        forwards.append(Forward(logits, out.aux_hidden_states))
        last = torch.tensor(num_query, device=device).cumsum(0) - 1
        picked = logits[last].argmax(-1).tolist()
        for r, token in enumerate(picked):
            outputs[r].append(token)
            seqs[r].append(forced[r][step] if forced else token)
        num_query = [1] * len(prompts)
    return outputs, forwards, kv


def prompts_for(vocab_size: int, lengths: tuple[int, ...] = (9, 5, 14)) -> list[list[int]]:
    gen = torch.Generator().manual_seed(7)
    return [torch.randint(3, vocab_size, (n,), generator=gen).tolist() for n in lengths]


@pytest.fixture
def kernel_calls(monkeypatch) -> dict[str, int]:
    """Counts fused-kernel launches and torch-reference calls during a test."""
    calls = {"rms_norm": 0, "rope": 0, "silu_and_mul": 0, "torch_norm": 0, "torch_rope": 0, "torch_silu": 0}
    modules = fused._kernel_modules()

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(modules.rms_norm, "rms_norm", counted("rms_norm", modules.rms_norm.rms_norm))
    monkeypatch.setattr(modules.rope, "apply_rope_", counted("rope", modules.rope.apply_rope_))
    monkeypatch.setattr(modules.activation, "silu_and_mul",
                        counted("silu_and_mul", modules.activation.silu_and_mul))
    monkeypatch.setattr(layers.F, "silu", counted("torch_silu", layers.F.silu))
    monkeypatch.setattr(RMSNorm, "reference", counted("torch_norm", RMSNorm.reference))
    monkeypatch.setattr(RotaryEmbedding, "apply", staticmethod(counted("torch_rope", RotaryEmbedding.apply)))
    return calls


@runnable
@pytest.mark.parametrize("preset", ["tiny-llama", "tiny-qwen2", "tiny-qwen3"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_fused_forward_matches_torch_path(preset, dtype, kernel_calls, monkeypatch):
    # The layers' own fused kernels: decode batches would otherwise take decode_gemv's projections, which fold
    # the norms, RoPE and SiLU-and-mul in (tests/models/test_decode_gemv.py).
    monkeypatch.setattr(decode_gemv, "applies", lambda layer, x: False)
    model = tiny_model(preset, dtype, DEVICE)
    prompts, num_decode_steps = prompts_for(model.config.vocab_size), 3
    fused.set_policy(model, "off")
    expected_tokens, expected, expected_kv = greedy(model, prompts, num_decode_steps)
    assert kernel_calls["rms_norm"] == kernel_calls["rope"] == kernel_calls["silu_and_mul"] == 0
    torch_calls = dict(kernel_calls)
    fused.set_policy(model, "on")
    _, got, got_kv = greedy(model, prompts, num_decode_steps, forced=expected_tokens)

    # Every norm, rotation and MLP activation took the fused path, none the torch one.
    c = model.config
    norms_per_layer = 2 + (2 if c.use_qk_norm else 0)
    num_forwards = num_decode_steps + 1
    assert kernel_calls["rms_norm"] == num_forwards * (c.num_hidden_layers * norms_per_layer + 1)
    assert kernel_calls["rope"] == kernel_calls["silu_and_mul"] == num_forwards * c.num_hidden_layers
    for name in ("torch_norm", "torch_rope", "torch_silu"):
        assert kernel_calls[name] == torch_calls[name], name

    # RoPE and the residual sums round like torch; the norm's rsqrt and sum order may differ by an ulp
    # (the interpreter's numpy math matched torch exactly in fp16; a GPU's approximate rsqrt may not).
    tol = {torch.float32: 4e-6, torch.float16: 1e-3}[dtype] * (4 if DEVICE.type == "cuda" else 1)
    for step, (g, e) in enumerate(zip(got, expected)):
        scale = e.logits.abs().max().item()
        torch.testing.assert_close(g.logits, e.logits, atol=tol * scale, rtol=0, msg=f"forward {step}")
        torch.testing.assert_close(g.aux_hidden_states, e.aux_hidden_states, atol=tol * 4, rtol=tol)
        top2 = e.logits.topk(2, dim=-1).values
        is_clear = (top2[:, 0] - top2[:, 1]) > 4 * tol * scale
        assert torch.equal(g.logits.argmax(-1)[is_clear], e.logits.argmax(-1)[is_clear])
    for layer in range(c.num_hidden_layers):
        for got_cache, expected_cache in ((got_kv.k, expected_kv.k), (got_kv.v, expected_kv.v)):
            torch.testing.assert_close(got_cache[layer], expected_cache[layer], atol=tol * 4, rtol=tol)


def test_auto_keeps_cpu_on_the_torch_path(kernel_calls):
    model = tiny_model("tiny-llama", torch.float32, torch.device("cpu"), num_layers=2)
    fused.set_policy(model, "auto")
    greedy(model, prompts_for(model.config.vocab_size, (4,)), 1)
    assert kernel_calls["rms_norm"] == kernel_calls["rope"] == kernel_calls["silu_and_mul"] == 0
    assert kernel_calls["torch_norm"] > 0 and kernel_calls["torch_silu"] > 0


def test_unknown_policy_names_the_supported_ones():
    model = tiny_model("tiny-llama", torch.float32, torch.device("cpu"), num_layers=2)
    with pytest.raises(SpecbenchError, match="auto, on, off"):
        fused.set_policy(model, "fast")
    with pytest.raises(SpecbenchError, match=r"fused_kernels \(--fused-kernels\).*auto, on, off"):
        EngineConfig(fused_kernels="1")


def test_the_policy_is_each_models_own(kernel_calls):
    # A fused engine and an unfused reference engine coexist in one process: the policy is a value of the model.
    fused_model = tiny_model("tiny-llama", torch.float32, torch.device("cpu"), num_layers=2)
    reference = tiny_model("tiny-llama", torch.float32, torch.device("cpu"), num_layers=2)
    fused.set_policy(fused_model, "on" if kernels_runnable_here() else "auto")
    fused.set_policy(reference, "off")
    assert {m.fused_policy for m in reference.modules() if isinstance(m, fused.UsesFusedKernels)} == {"off"}
    greedy(reference, prompts_for(reference.config.vocab_size, (4,)), 1)
    assert kernel_calls["rms_norm"] == kernel_calls["rope"] == kernel_calls["silu_and_mul"] == 0
    if kernels_runnable_here():
        greedy(fused_model, prompts_for(fused_model.config.vocab_size, (4,)), 1)
        assert kernel_calls["rms_norm"] > 0 and kernel_calls["rope"] > 0


@pytest.mark.skipif(kernels_runnable_here(), reason="the interpreted tests run in this process")
def test_interpreted_fused_tests_pass_in_a_fresh_process():
    assert_passes_interpreted(__file__)


@pytest.mark.gpu
@needs_cuda
def test_gpu_bf16_greedy_tokens_match_unfused():
    model = tiny_model("tiny-llama", torch.bfloat16, DEVICE, num_layers=4)
    prompts, num_decode_steps = prompts_for(model.config.vocab_size, (7, 20, 13, 30)), 24
    fused.set_policy(model, "off")
    expected, expected_forwards, _ = greedy(model, prompts, num_decode_steps)
    fused.set_policy(model, "on")
    got, _, _ = greedy(model, prompts, num_decode_steps)
    same = sum(a == b for x, y in zip(got, expected) for a, b in zip(x, y))
    record_gpu_result("fused_vs_unfused_bf16_greedy", same / sum(map(len, expected)))
    # The norm may differ by one bf16 ulp, so a request may only diverge where the torch path was near a tie.
    for r, (g, e) in enumerate(zip(got, expected)):
        first = next((i for i, (a, b) in enumerate(zip(g, e)) if a != b), None)
        if first is not None:
            row_index = sum(len(p) for p in prompts[:r + 1]) - 1 if first == 0 else r  # prefill rows, then one each
            row = expected_forwards[first].logits[row_index]
            top2 = row.topk(2).values
            assert (top2[0] - top2[1]).item() <= 0.02 * row.abs().max().item(), f"request {r} step {first}"


@pytest.mark.gpu
@needs_cuda
def test_gpu_fused_layers_never_sync_and_replay_in_a_cuda_graph():
    norm = RMSNorm(4096, 1e-5).to(DEVICE, torch.bfloat16).requires_grad_(False)
    norm.weight.normal_(1.0, 0.3)
    rotary = RotaryEmbedding(128, 500000.0, None)
    x, residual = torch.randn(2, 16, 4096, device=DEVICE, dtype=torch.bfloat16)
    qkv = torch.randn(16, 48 * 128, device=DEVICE, dtype=torch.bfloat16)
    positions = torch.arange(100, 116, device=DEVICE)
    cos_sin = rotary.cos_sin(positions, 200)
    mlp = GatedMLP(4096, 14336).to(DEVICE, torch.bfloat16).requires_grad_(False)
    for weight in (mlp.gate_up_proj.weight, mlp.down_proj.weight):
        weight.normal_(0.0, 0.02)

    def step(policy: str) -> tuple[torch.Tensor, ...]:
        for module in (norm, mlp):
            fused.set_policy(module, policy)
        q, k, _ = qkv.clone().view(16, 48, 128).split([32, 8, 8], dim=1)
        q, k = RotaryEmbedding.rotate_qk(q, k, cos_sin, policy)
        normed, summed = norm.add_and_norm(x, residual)
        return norm(x), normed, summed, q, k, mlp(x)

    eager = step("on")  # compiles the kernels
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        step("on")
    finally:
        torch.cuda.set_sync_debug_mode("default")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step("on")
    graph.replay()
    torch.cuda.synchronize()
    for got, want in zip(captured, eager):
        assert torch.equal(got, want)
    reference = step("off")
    assert torch.equal(captured[2], reference[2])  # the residual sum rounds like torch's add
    assert torch.equal(captured[3], reference[3]) and torch.equal(captured[4], reference[4])  # RoPE: bit for bit
    assert torch.equal(captured[5], reference[5])  # silu_and_mul rounds like F.silu then the multiply

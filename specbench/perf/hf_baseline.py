"""HuggingFace transformers `generate` on specbench's dummy model shapes: the baseline specbench is compared with.

`python -m specbench.perf.hf_baseline --preset llama-3.1-8b --batch-sizes 1,16,64 --cache dynamic --json OUT`
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass

import torch

from specbench.errors import SpecbenchError
from specbench.models.config import ModelConfig
from specbench.models.loader import parse_dtype
from specbench.models.presets import get_preset

CACHES = ("dynamic", "static")


@dataclass(frozen=True)
class HFBaselineResult:
    batch_size: int
    cache: str  # "dynamic" | "static"
    is_compiled: bool
    num_output_tokens: int  # generated tokens counted in generate's output, all requests
    output_tokens_per_s: float  # num_output_tokens / total_s of the steady (second) call
    total_s: float  # steady call, prefill included
    compile_s: float  # first call minus steady call: compilation (and other first-call) cost
    peak_mem_gb: float | None  # torch.cuda.max_memory_allocated during the steady call; None off CUDA


# specbench architecture -> the transformers model type the baseline builds for it (same shapes, HF's own code).
HF_MODEL_TYPES = {"llama": "llama", "qwen3_moe": "qwen3_moe", "gpt_oss": "gpt_oss"}
# gpt-oss's attention sinks have no SDPA path in transformers: it runs its eager attention.
_ATTN_IMPLEMENTATIONS = {"llama": "sdpa", "qwen3_moe": "sdpa", "gpt_oss": "eager"}


def _rope_parameters(config: ModelConfig) -> dict:
    rope = {"rope_type": "default", "rope_theta": config.rope_theta}
    if config.rope_scaling is not None:
        s = config.rope_scaling
        rope.update(rope_type=s.rope_type, factor=s.factor)
        if s.rope_type == "llama3":
            rope.update(low_freq_factor=s.low_freq_factor, high_freq_factor=s.high_freq_factor,
                        original_max_position_embeddings=s.original_max_position_embeddings)
    return rope


def _common_fields(config: ModelConfig) -> dict:
    eos = list(config.eos_token_ids) or None
    return dict(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size, num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads, num_key_value_heads=config.num_key_value_heads,
        head_dim=config.head_dim, rms_norm_eps=config.rms_norm_eps,
        max_position_embeddings=config.max_position_embeddings, tie_word_embeddings=config.tie_word_embeddings,
        attention_bias=config.attention_bias, bos_token_id=config.bos_token_id, eos_token_id=eos,
        pad_token_id=eos[0] if eos else None,
    )


def hf_llama_config(config: ModelConfig):
    """A transformers LlamaConfig with the same shapes and RoPE as `config`."""
    from transformers import LlamaConfig

    if config.architecture != "llama":
        raise SpecbenchError(f"the HF Llama baseline builds Llama models only, got a {config.architecture!r} config")
    return LlamaConfig(**_common_fields(config), intermediate_size=config.intermediate_size,
                       rope_parameters=_rope_parameters(config))


def hf_qwen3_moe_config(config: ModelConfig):
    """A transformers Qwen3MoeConfig with the same shapes, routing and RoPE as `config` (its MoE layers sparse, the
    others dense of intermediate_size)."""
    from transformers import Qwen3MoeConfig

    moe = config.moe
    if moe is None or moe.scoring != "softmax" or moe.activation != "silu" or moe.has_shared_expert:
        raise SpecbenchError("the HF Qwen3-MoE baseline needs softmax-routed silu experts without a shared expert")
    dense = [i for i in range(config.num_hidden_layers) if not config.is_moe_layer(i)]
    return Qwen3MoeConfig(**_common_fields(config), intermediate_size=config.intermediate_size,
                          rope_parameters=_rope_parameters(config), num_experts=moe.num_experts,
                          num_experts_per_tok=moe.num_experts_per_tok, moe_intermediate_size=moe.moe_intermediate_size,
                          norm_topk_prob=moe.norm_topk_prob, decoder_sparse_step=1, mlp_only_layers=dense)


def hf_gpt_oss_config(config: ModelConfig):
    """A transformers GptOssConfig with the same shapes as `config`: every layer sparse, sliding-window layers where
    `config` has them (window from the first such layer), sinks and YaRN RoPE as transformers builds gpt-oss."""
    from transformers import GptOssConfig

    from specbench.attention.kinds import FullAttention

    moe = config.moe
    if moe is None or moe.activation != "swiglu_oai" or len(config.moe_layer_ids) != config.num_hidden_layers:
        raise SpecbenchError("the HF gpt-oss baseline needs swiglu_oai experts in every layer")
    kinds = config.attention_kinds or (FullAttention(),) * config.num_hidden_layers
    windows = [k.kv_window for k in kinds if k.kv_window is not None]
    layer_types = [k.hf_layer_types[0] for k in kinds]
    return GptOssConfig(**_common_fields(config), intermediate_size=moe.moe_intermediate_size,
                        num_local_experts=moe.num_experts, num_experts_per_tok=moe.num_experts_per_tok,
                        swiglu_alpha=moe.swiglu_alpha, swiglu_limit=moe.swiglu_limit, layer_types=layer_types,
                        sliding_window=windows[0] if windows else None)


_HF_CONFIGS = {"llama": hf_llama_config, "qwen3_moe": hf_qwen3_moe_config, "gpt_oss": hf_gpt_oss_config}


def hf_model_type(config: ModelConfig) -> str:
    if config.architecture not in HF_MODEL_TYPES:
        raise SpecbenchError(f"the HF baseline has no builder for architecture {config.architecture!r}; supported: "
                             f"{', '.join(HF_MODEL_TYPES)} (or name model_type)")
    return HF_MODEL_TYPES[config.architecture]


def hf_config(config: ModelConfig, model_type: str | None = None):
    """The transformers config of `config`'s shapes, as `model_type` (default: by its architecture)."""
    model_type = model_type or hf_model_type(config)
    if model_type not in _HF_CONFIGS:
        raise SpecbenchError(f"unknown HF model type {model_type!r}; supported: {', '.join(_HF_CONFIGS)}")
    return _HF_CONFIGS[model_type](config)


def build_hf_model(config: ModelConfig, *, device: torch.device | str, dtype: torch.dtype, seed: int = 0,
                   model_type: str | None = None):
    """Random weights (HF's own N(0, 0.02) init) materialized directly on `device` in `dtype`; no hub access."""
    from transformers import AutoModelForCausalLM

    model_type = model_type or hf_model_type(config)
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(hf_config(config, model_type), dtype=dtype,
                                                 attn_implementation=_ATTN_IMPLEMENTATIONS[model_type])
    return model.eval().requires_grad_(False)


def random_prompts(batch_size: int, prompt_len: int, vocab_size: int, device: torch.device | str,
                   seed: int = 0) -> torch.Tensor:  # [batch_size, prompt_len] int64
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (batch_size, prompt_len), generator=gen).to(device)


def greedy_generate(model, prompts: torch.Tensor, output_len: int, *, cache: str,
                    compile: bool) -> torch.Tensor:  # prompts [batch, prompt_len] -> [batch, output_len]
    """Exactly `output_len` greedy tokens per prompt (EOS masked until then).

    Static cache: transformers compiles the decode step itself (CompileConfig, mode "reduce-overhead") on
    CUDA unless `disable_compile`; prefill runs eagerly.
    """
    if cache not in CACHES:
        raise SpecbenchError(f"unknown HF cache {cache!r}; supported: {', '.join(CACHES)}")
    if compile and cache != "static":
        raise SpecbenchError("compile needs cache='static': transformers compiles only static-cache decoding")
    if compile and prompts.device.type != "cuda":
        raise SpecbenchError("compile needs a CUDA device: transformers compiles generate's decode step only there")
    kwargs = {"cache_implementation": "static", "disable_compile": not compile} if cache == "static" else {}
    out = model.generate(prompts, attention_mask=torch.ones_like(prompts), do_sample=False,
                         max_new_tokens=output_len, min_new_tokens=output_len, **kwargs)
    generated = out[:, prompts.shape[1]:]
    if generated.shape[1] != output_len:
        raise RuntimeError(f"generate returned {generated.shape[1]} new tokens, asked for {output_len}")
    return generated


def _timed(fn, device: torch.device) -> tuple[float, object]:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    result = fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start, result


def run_hf_baseline(
    preset_or_config: str | ModelConfig,
    *,
    batch_sizes: list[int],
    prompt_len: int = 128,
    output_len: int = 256,
    cache: str = "dynamic",
    compile: bool = False,
    device: torch.device | str = "cuda",
    dtype: torch.dtype = torch.bfloat16,
    seed: int = 0,
    model_type: str | None = None,  # the transformers model to build; default by the config's architecture
) -> list[HFBaselineResult]:
    """One model, then per batch size: a warm-up call (compiles, when asked) and one timed call."""
    config = get_preset(preset_or_config) if isinstance(preset_or_config, str) else preset_or_config
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SpecbenchError("the HF baseline was asked for a CUDA device but torch sees none")
    model = build_hf_model(config, device=device, dtype=dtype, seed=seed, model_type=model_type)
    results = []
    for batch_size in batch_sizes:
        prompts = random_prompts(batch_size, prompt_len, config.vocab_size, device, seed=seed + batch_size)

        def generate(prompts=prompts):
            return greedy_generate(model, prompts, output_len, cache=cache, compile=compile)

        first_s, _ = _timed(generate, device)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        total_s, tokens = _timed(generate, device)
        results.append(HFBaselineResult(
            batch_size=batch_size, cache=cache, is_compiled=compile, num_output_tokens=tokens.numel(),
            output_tokens_per_s=tokens.numel() / total_s, total_s=total_s, compile_s=max(first_s - total_s, 0.0),
            peak_mem_gb=torch.cuda.max_memory_allocated(device) / 1e9 if device.type == "cuda" else None,
        ))
    return results


def format_table(results: list[HFBaselineResult]) -> str:
    lines = [f"{'batch':>5}  {'cache':<7} {'compiled':<8} {'tok/s':>9} {'total s':>8} {'compile s':>9} {'peak GB':>7}"]
    for r in results:
        mem = f"{r.peak_mem_gb:7.2f}" if r.peak_mem_gb is not None else f"{'-':>7}"
        lines.append(f"{r.batch_size:>5}  {r.cache:<7} {str(r.is_compiled):<8} {r.output_tokens_per_s:9.1f} "
                     f"{r.total_s:8.2f} {r.compile_s:9.2f} {mem}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specbench.perf.hf_baseline", description=__doc__)
    parser.add_argument("--preset", default="llama-3.1-8b")
    parser.add_argument("--batch-sizes", default="1,16,64", help="comma-separated")
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=256)
    parser.add_argument("--cache", choices=CACHES, default="dynamic")
    parser.add_argument("--compile", action="store_true", help="static cache only")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--json", help="write the results here as a JSON list")
    args = parser.parse_args(argv)
    try:
        batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
        if not batch_sizes or min(batch_sizes) < 1:
            raise ValueError
    except ValueError:
        print(f"error: --batch-sizes must be positive integers, got {args.batch_sizes!r}", file=sys.stderr)
        return 2
    try:
        results = run_hf_baseline(
            args.preset, batch_sizes=batch_sizes, prompt_len=args.prompt_len, output_len=args.output_len,
            cache=args.cache, compile=args.compile, device=args.device, dtype=parse_dtype(args.dtype) or torch.bfloat16,
        )
    except SpecbenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    device = torch.device(args.device)
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    print(f"HF transformers {transformers_version()} generate, {args.preset}, {device_name}, "
          f"{args.prompt_len}-token prompts, {args.output_len} output tokens")
    print(format_table(results))
    if args.json:
        run = {"preset": args.preset, "device": device_name, "transformers": transformers_version(),
               "torch": torch.__version__, "dtype": args.dtype, "prompt_len": args.prompt_len,
               "output_len": args.output_len, "results": [asdict(r) for r in results]}
        with open(args.json, "w") as f:
            json.dump(run, f, indent=2)
    return 0


def transformers_version() -> str:
    import transformers

    return transformers.__version__


if __name__ == "__main__":
    sys.exit(main())

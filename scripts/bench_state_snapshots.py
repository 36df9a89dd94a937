"""CPU timing of prefix hits on a hybrid target (recurrent-state snapshots at block boundaries, recurrent/
state_snapshots.py): what a hit saves, and what taking snapshots costs.

    PYTHONPATH=. python scripts/bench_state_snapshots.py [--prefix 1024] [--threads 1]

1. Engine, a small random Qwen3-Next written here (DeltaNet / attention x 2, hidden 256, 4 key / 8 value heads of
   64): time to first token of a request whose 1024-token prefix (a shared system prompt) is cached, against the
   same request with --no-prefix-caching, and a cold prefill with snapshots every block, every 4 blocks, or none.
2. One Gated DeltaNet layer at Qwen3-Next-80B's shape (16 key / 32 value heads, 128 x 128): the chunked rule over
   the prefix from zeros (what a miss recomputes per layer), with the states at every 16 / 64 tokens kept (a
   snapshot's cost in the prefill), against restoring one snapshot (a device copy of the slot)."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from specbench import LLM, SamplingParams
from specbench.recurrent.gated_delta_chunked import gated_delta_rule_chunked
from specbench.selftest.tiny_tokenizer import write_tiny_tokenizer


def _write_target(out: Path) -> None:
    from transformers import AutoModelForCausalLM, Qwen3NextConfig

    config = Qwen3NextConfig(
        vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64,
        layer_types=["linear_attention", "full_attention"] * 2, linear_num_key_heads=4, linear_num_value_heads=8,
        linear_key_head_dim=64, linear_value_head_dim=64, linear_conv_kernel_dim=4, max_position_embeddings=4096,
        num_experts=0, tie_word_embeddings=False)
    config.architectures = ["Qwen3NextForCausalLM"]
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(out)
    write_tiny_tokenizer(out)  # 512 ids, the selftest's


def _ttft(llm: LLM, prompt: list[int]) -> float:
    out = llm.generate([prompt], SamplingParams(max_tokens=1, ignore_eos=True))[0]
    return out.stats.emission_times[0] - out.stats.arrival_time


def engine_rows(prefix_len: int, repeats: int, threads: int) -> None:
    gen = torch.Generator().manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        _write_target(Path(tmp))
        options = dict(dtype="fp32", device="cpu", block_size=16, max_concurrency=4, cpu_threads=threads)
        system = torch.randint(0, 512, (prefix_len,), generator=gen).tolist()

        def suffix() -> list[int]:
            return torch.randint(0, 512, (16,), generator=gen).tolist()

        rows = {}
        for name, extra in (("no prefix caching", {"enable_prefix_caching": False}),
                            ("snapshots every block (cold)", {}),
                            ("snapshots every 4 blocks (cold)", {"state_snapshot_blocks": 4})):
            llm = LLM(tmp, **options, **extra)
            _ttft(llm, suffix())  # warm-up
            rows[name] = [_ttft(llm, system + suffix()) for _ in range(1)]
            if name.startswith("snapshots every block"):  # the system prompt is cached now: every later one hits
                rows["hit (every block)"] = [_ttft(llm, system + suffix()) for _ in range(repeats)]
            else:
                rows[name] += [_ttft(LLM(tmp, **options, **extra), system + suffix()) for _ in range(repeats - 1)]
        for name, times in rows.items():
            print(f"  {name:34s} TTFT median {sorted(times)[len(times) // 2] * 1e3:8.1f} ms over {len(times)}")


def layer_rows(prefix_len: int, repeats: int) -> None:
    hk, hv, d = 16, 32, 128
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(prefix_len, hk, d, generator=gen), torch.randn(prefix_len, hk, d, generator=gen)
    v = torch.randn(prefix_len, hv, d, generator=gen)
    g, b = -torch.rand(prefix_len, hv, generator=gen), torch.rand(prefix_len, hv, generator=gen)
    zeros = torch.zeros(hv, d, d)
    slot, snapshot = torch.zeros(hv, d, d), torch.randn(hv, d, d, generator=gen)

    def timed(fn) -> float:
        fn()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return sorted(times)[len(times) // 2]

    print(f"  one layer at Qwen3-Next-80B's shape, {prefix_len} tokens from zeros:")
    for name, cuts in (("no snapshots", ()), ("a state every 64 tokens", tuple(range(64, prefix_len + 1, 64))),
                       ("a state every 16 tokens", tuple(range(16, prefix_len + 1, 16)))):
        t = timed(lambda: gated_delta_rule_chunked(q, k, v, g, b, zeros, state_at=cuts))
        print(f"    chunked rule, {name:26s} {t * 1e3:8.1f} ms")
    t = timed(lambda: slot.copy_(snapshot))
    print(f"    restoring one snapshot (copy)          {t * 1e3:8.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prefix", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"engine, small Qwen3-Next, {args.prefix}-token shared prefix + 16 tokens, block size 16:")
    engine_rows(args.prefix, args.repeats, args.threads)
    layer_rows(args.prefix, args.repeats)


if __name__ == "__main__":
    main()

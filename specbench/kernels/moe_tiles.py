"""Tiles of the expert kernels (kernels/moe_gemv.py), chosen on the host from shapes only: a CUDA graph captures one
launch, and a run-time autotuner would time (and so could pick differently) on every process start.

`TUNED` holds the winners of `scripts/bench_moe_kernels.py` on an H100 (it prints the lines to paste here), keyed by
(hidden, inter, token bucket); shapes not in it take `heuristic_tiles`, the design of kernels/gemv.py's Llama-8B
tiles. A batch takes the tiles of its bucket (the smallest of TOKEN_BUCKETS holding it), so a CUDA-graph batch padded
within its bucket sums each real row in the same order as the real rows alone would.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from specbench.kernels.runtime import next_pow2

TOKEN_BUCKETS = (1, 4, 16, 64)  # the last is the most tokens the expert kernels take (a decode or verify batch)


@dataclass(frozen=True)
class ProjectionTiles:
    # False: the CUDA cores, one token (kernels/gemv.py's one-token design: few rows, the whole width a step).
    # True: tensor cores, weight rows as the MMA's M side, an expert's tokens (padded to block_m) as its N side.
    is_dot: bool
    block_n: int  # weight rows (output features) per program; gate_up: this many gate rows and as many up rows
    block_k: int  # input width per step of the weight walk (capped at the input width's power of two)
    num_warps: int = 4
    num_stages: int = 3  # software-pipelined weight loads in flight (tensor-core mode)
    block_m: int = 16  # tensor-core mode: an expert's tokens per MMA step (the N side; at least 16)


@dataclass(frozen=True)
class ExpertTiles:
    gate_up: ProjectionTiles
    down: ProjectionTiles


# Filled from `scripts/bench_moe_kernels.py` on the H100 (the lead pastes its "TUNED" lines here). Session 12,
# NVIDIA H100 80GB HBM3, triton 3.6.0: Qwen3-30B-A3B (hidden 2048, inter 768) and gpt-oss-20b (2880, 2880) shapes,
# random top-k routing; the comments give us per layer: the previous kernels (kernels/moe.py, since deleted), the heuristic
# defaults, these tiles.
TUNED: dict[tuple[int, int, int], ExpertTiles] = {
    (2048, 768, 1): ExpertTiles(
        gate_up=ProjectionTiles(is_dot=False, block_n=1, block_k=4096, num_warps=8, num_stages=3, block_m=16),
        down=ProjectionTiles(is_dot=False, block_n=2, block_k=1024, num_warps=4, num_stages=3, block_m=16)),  # us per layer, previous / default / tuned: 41.9 / 37.2 / 30.5
    # (2048, 768, 4) left to the heuristic: the kernel bench's winner there (CUDA-core gate_up, 110.6 -> 100.4 us under
    # random routing) made the engine's 4-token Qwen3 verify slower, 5.59 -> 6.02 ms: the engine's tokens share experts
    # (9.3 of 32 slots distinct), and the CUDA-core tile walks an expert's tile once per token of it.
    (2048, 768, 16): ExpertTiles(
        gate_up=ProjectionTiles(is_dot=True, block_n=64, block_k=128, num_warps=4, num_stages=4, block_m=16),
        down=ProjectionTiles(is_dot=True, block_n=64, block_k=128, num_warps=4, num_stages=4, block_m=16)),  # us per layer, previous / default / tuned: 296.8 / 277.2 / 267.7
    (2048, 768, 64): ExpertTiles(
        gate_up=ProjectionTiles(is_dot=True, block_n=64, block_k=128, num_warps=4, num_stages=4, block_m=16),
        down=ProjectionTiles(is_dot=True, block_n=64, block_k=128, num_warps=4, num_stages=4, block_m=16)),  # us per layer, previous / default / tuned: 473.5 / 408.3 / 401.9
    (2880, 2880, 1): ExpertTiles(
        gate_up=ProjectionTiles(is_dot=False, block_n=2, block_k=1024, num_warps=4, num_stages=3, block_m=16),
        down=ProjectionTiles(is_dot=False, block_n=1, block_k=1024, num_warps=4, num_stages=3, block_m=16)),  # us per layer, previous / default / tuned: 104.1 / 84.7 / 74.2
    (2880, 2880, 4): ExpertTiles(
        gate_up=ProjectionTiles(is_dot=True, block_n=64, block_k=128, num_warps=4, num_stages=4, block_m=16),
        down=ProjectionTiles(is_dot=True, block_n=64, block_k=128, num_warps=4, num_stages=4, block_m=16)),  # us per layer, previous / default / tuned: 269.2 / 257.5 / 244.8
    (2880, 2880, 16): ExpertTiles(
        gate_up=ProjectionTiles(is_dot=True, block_n=64, block_k=128, num_warps=4, num_stages=4, block_m=16),
        down=ProjectionTiles(is_dot=True, block_n=64, block_k=128, num_warps=4, num_stages=4, block_m=16)),  # us per layer, previous / default / tuned: 506.2 / 484.7 / 469.6
    (2880, 2880, 64): ExpertTiles(
        gate_up=ProjectionTiles(is_dot=True, block_n=32, block_k=256, num_warps=4, num_stages=3, block_m=16),
        down=ProjectionTiles(is_dot=True, block_n=64, block_k=128, num_warps=4, num_stages=4, block_m=16)),  # us per layer, previous / default / tuned: 617.7 / 571.1 / 550.5
    # Session 22, the same card: Qwen3-Next-80B-A3B's experts (hidden 2048, inter 512, top 10 of 512), the hybrid
    # target of issue 45. At 4 tokens its slots are ~97% distinct experts (38.9 of 40 in the engine's verify), so
    # the CUDA-core gate_up's pass per token of an expert costs nothing extra there.
    (2048, 512, 1): ExpertTiles(
        gate_up=ProjectionTiles(is_dot=False, block_n=2, block_k=2048, num_warps=8, num_stages=3, block_m=16),
        down=ProjectionTiles(is_dot=False, block_n=2, block_k=1024, num_warps=4, num_stages=3, block_m=16)),  # us per layer, default / tuned: 38.0 / 30.9; in the engine gate_up n1 k4096 took 19.0 us against this 16.8
    (2048, 512, 4): ExpertTiles(
        gate_up=ProjectionTiles(is_dot=False, block_n=2, block_k=1024, num_warps=4, num_stages=3, block_m=16),
        down=ProjectionTiles(is_dot=True, block_n=64, block_k=128, num_warps=4, num_stages=4, block_m=16)),  # us per layer, default / tuned: 105.6 / 94.1
}


def token_bucket(num_tokens: int) -> int:
    for bucket in TOKEN_BUCKETS:
        if num_tokens <= bucket:
            return bucket
    raise ValueError(f"expert kernels take at most {TOKEN_BUCKETS[-1]} tokens, got {num_tokens}")


def heuristic_tiles(bucket: int, hidden: int, inter: int) -> ExpertTiles:
    """At one token, kernels/gemv.py's one-token tiles: 2 rows a program and the whole row (up to 2048 elements) a
    step on 8 warps (85-99% of copy bandwidth on Llama-8B). From two tokens, tensor cores: gate_up as the previous
    expert kernels' (the deleted kernels/moe.py: 16 rows and 512-byte K steps up to 16 tokens, 32 rows and 256 bytes past;
    gpt-oss-20b at 83% of its floor at c=16), down as gemv.py's down + residual (32 rows, 512-byte steps)."""
    if bucket == 1:
        return ExpertTiles(
            gate_up=ProjectionTiles(is_dot=False, block_n=2, block_k=min(2048, next_pow2(hidden)), num_warps=8),
            down=ProjectionTiles(is_dot=False, block_n=2, block_k=min(2048, next_pow2(inter)), num_warps=8))
    gate_up = (ProjectionTiles(is_dot=True, block_n=16, block_k=256) if bucket <= 16
               else ProjectionTiles(is_dot=True, block_n=32, block_k=128))
    return ExpertTiles(gate_up=gate_up, down=ProjectionTiles(is_dot=True, block_n=32, block_k=256))


def default_tiles(num_tokens: int, hidden: int, inter: int, element_size: int = 2) -> ExpertTiles:
    bucket = token_bucket(num_tokens)
    tiles = TUNED.get((hidden, inter, bucket)) or heuristic_tiles(bucket, hidden, inter)
    if element_size > 2:  # fp32 (checking runs): the same bytes per pipelined tensor-core tile
        return ExpertTiles(*(replace(t, block_k=max(16, t.block_k * 2 // element_size)) if t.is_dot else t
                             for t in (tiles.gate_up, tiles.down)))
    return tiles

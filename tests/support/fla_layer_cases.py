"""One Gated DeltaNet layer run twice on the same inputs and slots, once with the torch recurrent kernels and once with
fla's (recurrent/kernel_choice.py), for each kind of rows a forward carries: committed rows (prefill from zeros,
a prompt chunk resuming a slot, a sequence past one 64-token chunk, a single token), plain decode rows, a uniform
verify (every request k + 1), and a mixed forward (verify rows of different lengths beside a prompt chunk). The
shared driver of the CPU test (fake fla, tests/support/fake_fla.py) and the GPU one (fla-core on CUDA)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.recurrent.config import GatedDeltaNetConfig
from specbench.recurrent.gated_delta_net import GatedDeltaNet
from specbench.recurrent.kernel_choice import FLA, TORCH
from specbench.recurrent.state_cache import StateCache, StateShape
from specbench.recurrent.state_rows import state_rows

# value heads grouped 2 per key head, as Qwen3-Next; dims of 16 (fla's tensor-core tiles need K, V >= 16)
CONFIG = GatedDeltaNetConfig(num_k_heads=2, num_v_heads=4, k_dim=16, v_dim=16, conv_kernel_size=4)
HIDDEN = 32
NUM_SLOTS = 6


@dataclass(frozen=True)
class RowsCase:
    name: str
    slots: list[int]  # [num_reqs]
    num_query: list[int]  # [num_reqs] tokens of each request in the forward
    num_verify_reqs: int  # the first ones are verify rows
    starts_fresh: list[bool]  # [num_reqs]


CASES = (
    RowsCase("committed", [1, 4, 0, 5], [5, 70, 1, 3], 0, [True, False, True, False]),
    RowsCase("decode", [3, 0, 2, 5], [1, 1, 1, 1], 4, [False] * 4),
    RowsCase("verify", [2, 5, 1], [4, 4, 4], 3, [False] * 3),
    RowsCase("mixed", [0, 3, 4, 1], [1, 4, 9, 2], 2, [False, False, True, False]),
)


@dataclass(frozen=True)
class RowsDiff:
    output: float  # max |fla - torch| over the layer's output [num_tokens, hidden]
    slots_conv: float  # over every slot's conv state after the forward
    slots_recurrent: float  # over every slot's recurrent state after the forward
    kept_conv: float  # over the verify rows' kept conv states (0 when none)
    kept_recurrent: float  # over the verify rows' kept recurrent states
    scale: float  # max |torch| over output and recurrent states: what the differences are relative to


def _layer(device: torch.device) -> GatedDeltaNet:
    gen = torch.Generator().manual_seed(0)
    layer = GatedDeltaNet(CONFIG, HIDDEN, 1e-6, state_layer=0)
    for param in layer.parameters():
        param.data.copy_(torch.randn(param.shape, generator=gen) * 0.3)
    return layer.to(device)


def _states(device: torch.device) -> StateCache:
    c = CONFIG
    cache = StateCache(StateShape.of(c.state_layout(), 1),
                       NUM_SLOTS, torch.float32, device)
    gen = torch.Generator().manual_seed(1)
    cache.conv.copy_(torch.randn(cache.conv.shape, generator=gen))
    cache.recurrent.copy_(torch.randn(cache.recurrent.shape, generator=gen) * 0.1)
    return cache


@torch.inference_mode()
def compare_rows(case: RowsCase, device: torch.device) -> RowsDiff:
    layer = _layer(device)
    x = torch.randn(sum(case.num_query), HIDDEN, generator=torch.Generator().manual_seed(2)).to(device)
    cu = [0]
    for n in case.num_query:
        cu.append(cu[-1] + n)
    rows = state_rows(case.slots, case.num_query, case.num_verify_reqs, case.starts_fresh)
    runs = {}
    for kernels in (TORCH, FLA):
        layer.recurrent_kernels = kernels
        states = _states(device)
        states.begin_forward()
        out = layer(x, tuple(cu), states, rows)
        runs[kernels] = (out, states)
    (want, ref), (got, fla) = runs[TORCH], runs[FLA]

    def diff(a: torch.Tensor, b: torch.Tensor) -> float:
        return float((a.float() - b.float()).abs().max()) if a.numel() else 0.0

    kept = [diff(fla.pending[0][i], ref.pending[0][i]) for i in (0, 1)] if ref.pending else [0.0, 0.0]
    assert bool(ref.pending) == bool(fla.pending) == (case.num_verify_reqs > 0)
    return RowsDiff(diff(got, want), diff(fla.conv, ref.conv), diff(fla.recurrent, ref.recurrent), *kept,
                    scale=max(float(want.abs().max()), float(ref.recurrent.abs().max())))

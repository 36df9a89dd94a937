"""Per-request sampling on device: temperature / top-k / top-p warping and seeded, sync-free token draws."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from specbench.device_copy import to_device
from specbench.sampling_params import SamplingParams


@dataclass(frozen=True, slots=True)
class SamplingTensors:
    temperature: torch.Tensor  # [num_reqs] float32, 0 = greedy
    top_k: torch.Tensor  # [num_reqs] int64, vocab_size when off
    top_p: torch.Tensor  # [num_reqs] float32
    is_greedy: torch.Tensor  # [num_reqs] bool
    generators: tuple[torch.Generator | None, ...]  # [num_reqs]; None = use the default RNG
    all_greedy: bool  # host flag: the argmax fast path needs no sync
    # [num_reqs] host copy of is_greedy so RNG bookkeeping never reads the device; None = unknown,
    # then every row with a generator is treated as sampled (harmless: greedy rows ignore their draws).
    is_greedy_cpu: tuple[bool, ...] | None = None

    @property
    def num_reqs(self) -> int:
        return len(self.generators)

    def sampled_generators(self) -> tuple[torch.Generator | None, ...]:
        """Generators with known-greedy rows set to None: a generator advances only on draws its request uses."""
        if self.is_greedy_cpu is None:
            return self.generators
        return tuple(None if greedy else g for g, greedy in zip(self.generators, self.is_greedy_cpu))


def make_generator(seed: int | None, device: torch.device | str) -> torch.Generator | None:
    if seed is None:
        return None
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator


def build_sampling_tensors(
    params: Sequence[SamplingParams],
    generators: Sequence[torch.Generator | None],
    vocab_size: int,
    device: torch.device | str,
) -> SamplingTensors:
    if len(params) != len(generators):
        raise ValueError(f"{len(params)} sampling params but {len(generators)} generators")
    is_greedy = [p.is_greedy for p in params]
    # Greedy rows carry temperature 0 (top_k == 1 is greedy too), so `temperature == 0` <=> is_greedy.
    temperature = [0.0 if greedy else p.temperature for p, greedy in zip(params, is_greedy)]
    top_k = [vocab_size if p.top_k == -1 else min(p.top_k, vocab_size) for p in params]
    return SamplingTensors(
        temperature=to_device(temperature, torch.float32, device),
        top_k=to_device(top_k, torch.int64, device),
        top_p=to_device([p.top_p for p in params], torch.float32, device),
        is_greedy=to_device(is_greedy, torch.bool, device),
        generators=tuple(generators),
        all_greedy=all(is_greedy),
        is_greedy_cpu=tuple(is_greedy),
    )


def logits_to_probs(
    logits: torch.Tensor,  # [n, V]
    temperature: torch.Tensor,  # [n] float32, 0 = greedy
    top_k: torch.Tensor,  # [n] int64 in [1, V]
    top_p: torch.Tensor,  # [n] float32 in (0, 1]
) -> torch.Tensor:  # [n, V] float32
    """Temperature, then top-k, then top-p, then renormalize.

    top-k keeps every token whose logit ties the k-th largest (order-independent).
    top-p keeps the smallest prefix of the (top-k renormalized) sorted distribution
    whose mass reaches top_p; the most likely token is always kept.
    Rows with temperature 0 get the one-hot of their argmax so the function is total.
    """
    logits = logits.float()
    is_greedy = temperature == 0
    scaled = logits / torch.where(is_greedy, 1.0, temperature)[:, None]
    sorted_logits, sorted_idx = _sort_descending(scaled, top_k)  # [n, V], [n, V or fewer]
    kth_logit = sorted_logits.gather(1, (top_k - 1)[:, None])  # [n, 1]
    sorted_logits = sorted_logits.masked_fill(sorted_logits < kth_logit, float("-inf"))
    sorted_probs = sorted_logits.softmax(dim=-1)
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs  # [n, V], 0 for the first token
    sorted_probs = sorted_probs.masked_fill(mass_before >= top_p[:, None], 0.0)
    sorted_probs = sorted_probs / sorted_probs.sum(dim=-1, keepdim=True)
    kept = sorted_probs[:, : sorted_idx.shape[1]]  # the columns beyond sorted_idx's hold 0 (see _sort_descending)
    probs = torch.zeros_like(sorted_probs).scatter_(1, sorted_idx, kept)
    one_hot = torch.zeros_like(probs).scatter_(1, logits.argmax(dim=-1, keepdim=True), 1.0)
    return torch.where(is_greedy[:, None], one_hot, probs)


def _sort_descending(
    scaled: torch.Tensor,  # [n, V] float32
    top_k: torch.Tensor,  # [n] int64 in [1, V]
) -> tuple[torch.Tensor, torch.Tensor]:  # ([n, V] values, descending; [n, V or k] their token ids)
    """`scaled.sort(descending)`, or on CPU, when every row keeps at most k < V tokens and no token past the k-th
    ties it, only the first k sorted (topk: a quarter of a full sort's time on the sampled check's 400-row batches)
    and the rest of each row -inf, which top-k masking makes of them anyway: every later step sees the same values,
    so the warped probabilities are the same bit for bit (the ids past k, whose probability is 0, are not returned).
    CUDA sorts in full: reading k would sync the device."""
    vocab = scaled.shape[-1]
    if scaled.device.type != "cpu" or scaled.shape[0] == 0:
        return scaled.sort(dim=-1, descending=True)
    k = int(top_k.max())
    if k >= vocab:
        return scaled.sort(dim=-1, descending=True)
    values, ids = scaled.topk(k, dim=-1)  # [n, k], descending
    if bool(((scaled >= values[:, -1:]).sum(dim=-1) > k).any()):  # a tie at the k-th value, which top-k keeps
        return scaled.sort(dim=-1, descending=True)
    return torch.cat([values, values.new_full((values.shape[0], vocab - k), float("-inf"))], dim=-1), ids


def sample_from_probs(
    probs: torch.Tensor,  # [n, V], non-negative; need not be normalized
    generators: Sequence[torch.Generator | None],  # [n]
) -> torch.Tensor:  # [n] int64
    """Exponential race: argmax_i probs_i / E_i with E_i ~ Exp(1) picks i with probability probs_i / sum(probs).

    Sync-free: no normalization, cumsum/searchsorted or host read; only device-side
    elementwise ops and an argmax. Rows with a generator draw their own V exponentials
    in row order (rows of one request may share its generator); the other rows draw
    together from the default RNG. Zero-probability tokens never win.
    """
    if len(generators) != probs.shape[0]:
        raise ValueError(f"{probs.shape[0]} rows but {len(generators)} generators")
    exponentials = torch.empty_like(probs, dtype=torch.float32)
    if any(g is None for g in generators):
        exponentials.exponential_()
    for row, generator in enumerate(generators):
        if generator is not None:
            exponentials[row].exponential_(generator=generator)
    # exponential_ may return exactly 0; 0/0 would be NaN and NaN wins argmax.
    exponentials.clamp_min_(torch.finfo(torch.float32).tiny)
    return (probs.float() / exponentials).argmax(dim=-1)


def sample(logits: torch.Tensor, st: SamplingTensors) -> torch.Tensor:  # logits [num_reqs, V] -> [num_reqs] int64
    """One token per request (plain decode, prefill): greedy rows argmax, the others sample."""
    greedy_tokens = logits.argmax(dim=-1)
    if st.all_greedy:
        return greedy_tokens
    probs = logits_to_probs(logits, st.temperature, st.top_k, st.top_p)
    sampled_tokens = sample_from_probs(probs, st.sampled_generators())
    return torch.where(st.is_greedy, greedy_tokens, sampled_tokens)

"""INV-STATE (the recurrent-state oracle of hybrid targets): after any step, each running request's state slot
equals the state a fresh forward over its committed tokens alone leaves (fp32: to rounding).

The recomputation shares no code with the engine's verify-and-commit path: one cache-free prefill over
token_ids[:num_cached_tokens] on a private KV cache and a private state slot (check/fresh_forward.py), whose recurrent
layers (Gated DeltaNet, Mamba-2) write their final state straight into that slot. A rollback that keeps a rejected
draft's state, stops one position short or too far, rolls back one of the two states only, or leaves a zero-draft
request's state at the previous round all leave a slot this forward does not reproduce, whatever the tokens looked
like.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.check.fresh_forward import fresh_sequence


@dataclass(frozen=True)
class StateDiff:
    request_id: str
    num_committed: int  # tokens the slot should hold the state after
    conv_max_abs: float  # max |engine - recomputed| over every state layer's conv state
    recurrent_max_abs: float  # ... recurrent state

    def is_within(self, atol: float) -> bool:
        return self.conv_max_abs <= atol and self.recurrent_max_abs <= atol


@torch.inference_mode()
def recomputed_state(model, token_ids: list[int], block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(conv [num_state_layers, C, W], recurrent [num_state_layers, Hv, Dk, Dv]) after `token_ids`, from zeros."""
    device = model.embed_weight.device
    md, kv = fresh_sequence(model.kv_cache_spec(), len(token_ids), block_size, device)
    model(torch.tensor(token_ids, dtype=torch.int64, device=device), md, kv, phase="oracle")
    return kv.states.conv[:, 0], kv.states.recurrent[:, 0]


def state_diffs(engine) -> list[StateDiff]:
    """INV-STATE for every running request of `engine` (an LLMEngine over a hybrid target) that owns a slot and has
    committed tokens in it (prefill done)."""
    states = engine.runner.kv_cache.states
    model = engine.runner.model
    diffs = []
    for request in engine.scheduler.running:
        num = request.num_cached_tokens
        if num == 0 or request.is_prefilling:
            continue
        slot = states.slot_for(request.request_id)
        conv, recurrent = recomputed_state(model, request.token_ids[:num], engine.block_size)
        diffs.append(StateDiff(request.request_id, num,
                               float((states.conv[:, slot].float() - conv.float()).abs().max()),
                               float((states.recurrent[:, slot] - recurrent).abs().max())))
    return diffs


STATE_ATOL = 1e-3  # fp32 recomputation agrees to ~1e-6; a wrong slot is off by O(0.1)


def generate_checking_states(llm, prompts, params, atol: float = STATE_ATOL) -> None:
    """Run `prompts` to completion on `llm` (an LLM over a hybrid target), checking INV-STATE after every step;
    raises InvariantViolation at the first slot that differs from its recomputation by more than atol (bf16 runs
    need a looser one)."""
    from specbench.attention.invariant_violation import InvariantViolation

    engine = llm.engine
    for prompt in prompts:
        engine.add_request(prompt, params)
    step = 0
    while engine.has_unfinished():
        engine.step()
        step += 1
        for diff in state_diffs(engine):
            if not diff.is_within(atol):
                raise InvariantViolation(
                    f"INV-STATE violated after step {step}: request {diff.request_id}'s recurrent-state slot differs "
                    f"from a recomputation over its {diff.num_committed} committed tokens (conv max |diff| "
                    f"{diff.conv_max_abs:.3g}, recurrent {diff.recurrent_max_abs:.3g})")

"""Everything after a tree verify's target forward, before (host walks, per-request loops, per-layer KV moves) and
after (engine/tree_round.finish_tree_round: batched on the device, one host read), side by side.

    python scripts/bench_tree_host.py                # CUDA when present (Llama-3.1-8B KV and vocab), else CPU (smaller)
    python scripts/bench_tree_host.py --device cpu --iters 20

Each row times, per round (median over --iters, the device drained before and after each), at concurrency 1 and 16,
SGLang's default tree (topk 4, 8 draft tokens, depth 5; the tree TopKTreeBuilder grows under the synthetic law):
- `verify`: the verifier alone until its result is on the host (synthetic forced acceptance; greedy);
- `compaction`: the accepted path's KV moves over every layer;
- `round`: verify + compaction + features + stats + committed tokens, what run_tree_round does after the target.
The two sides must commit the same tokens (checked every iteration: greedy is identical; synthetic draws the same
coins), else the script exits non-zero.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

import torch

from specbench.engine import tree_round
from specbench.engine.stats import RequestStats
from specbench.engine.timing import PhaseTimer
from specbench.kv.kv_cache import KVCache, KVCacheSpec
from specbench.runtime.phases import TargetOutput
from specbench.sampling_params import SamplingParams
from specbench.speculation.sampling import build_sampling_tensors
from specbench.speculation.synthetic.tree import (
    DEFAULT_RANK_DECAY,
    SGLANG_SETTING_RATES,
    expected_tree,
    synthetic_tree_verify,
    tree_table,
)
from specbench.speculation.tree.draft_tree import DraftTree, tree_from_parents
from specbench.speculation.tree.kv import accepted_path_moves, apply_moves, move_slots_all_layers, padded_path_moves
from specbench.speculation.tree.padded import pad_tree
from specbench.speculation.tree.plan import TreePlan
from specbench.speculation.verify.tree_stats import round_counts
from specbench.speculation.verify.tree import TreeVerifyResult, verify_tree
from specbench.speculation.verify.tree_batched import verify_tree_batched

TOPK, NUM_DRAFT_TOKENS, DEPTH = 4, 8, 5
BLOCK_SIZE = 16
PROMPT_LEN = 512


@dataclass(frozen=True)
class Shapes:
    num_layers: int
    num_kv_heads: int
    head_dim: int
    vocab: int
    feature_dim: int
    dtype: torch.dtype


LLAMA_8B = Shapes(32, 8, 128, 128256, 3 * 4096, torch.bfloat16)  # EAGLE-3 features: three aux hidden states
CPU_SMALL = Shapes(4, 2, 64, 8000, 3 * 256, torch.float32)


@dataclass
class FakeRequest:
    request_id: str
    num_cached_tokens: int
    block_table: list[int]
    stats: RequestStats = field(default_factory=lambda: RequestStats(
        arrival_time=0.0, num_prompt_tokens=PROMPT_LEN, num_drafted_per_pos=[0] * DEPTH, num_accepted_per_pos=[0] * DEPTH))
    sampling_params: SamplingParams = field(default_factory=lambda: SamplingParams(temperature=0.0))


class FakeProposer:
    def add_target_features(self, request_id: str, start: int, features: torch.Tensor) -> None:
        pass

    def on_tree_verified(self, request_ids, accepted_nodes) -> None:
        pass


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def build_case(shapes: Shapes, num_reqs: int, device: torch.device, seed: int):
    gen = torch.Generator().manual_seed(seed)
    table = tree_table(SGLANG_SETTING_RATES, TOPK, DEFAULT_RANK_DECAY)
    parents = expected_tree(table, TOPK, NUM_DRAFT_TOKENS, DEPTH)
    tokens = [torch.randint(0, shapes.vocab, (len(parents),), generator=gen).tolist() for _ in range(num_reqs)]
    tree = tree_from_parents(tokens, [parents] * num_reqs, device)
    num_rows = num_reqs * (1 + len(parents))
    # logits whose argmax often equals the child's token at the parent's row (greedy paths of some length)
    logits = torch.randn(num_rows, shapes.vocab, generator=gen)
    cu_rows = tree.cu_num_rows.tolist()
    for r in range(num_reqs):
        for i, p in enumerate(parents):
            if torch.rand((), generator=gen) < 0.6:
                logits[cu_rows[r] + 1 + p, tokens[r][i]] += 20.0
    blocks_per_req = (PROMPT_LEN + 64) // BLOCK_SIZE
    kv = KVCache(KVCacheSpec(shapes.num_layers, shapes.num_kv_heads, shapes.head_dim, shapes.dtype),
                 num_reqs * blocks_per_req + 1, BLOCK_SIZE, device)
    tables = [list(range(1 + r * blocks_per_req, 1 + (r + 1) * blocks_per_req)) for r in range(num_reqs)]
    features = torch.randn(num_rows, shapes.feature_dim, generator=gen).to(device, shapes.dtype)
    out = TargetOutput(logits.to(device), features)
    block_tables = torch.tensor(tables, dtype=torch.int32, device=device)
    return tree, out, kv, tables, block_tables, table.to(device)


def requests_for(tables: list[list[int]]) -> list[FakeRequest]:
    return [FakeRequest(f"r{r}", PROMPT_LEN, t) for r, t in enumerate(tables)]


# ---------------------------------------------------------------- before: the code this replaced


def old_synthetic_tree_verify(target_logits: torch.Tensor, tree: DraftTree, conditional: torch.Tensor,
                              generator: torch.Generator | None) -> TreeVerifyResult:
    """synthetic_tree_verify as it was: the widest request and the deepest path read from the device, one pass per
    node over the padded layout to settle acceptance."""
    device = target_logits.device
    num_reqs = tree.num_reqs
    num_nodes = tree.num_nodes.to(device)
    width = int(num_nodes.max()) if num_reqs else 0
    slot = torch.arange(width, device=device)
    is_node = slot[None, :] < num_nodes[:, None]
    flat = (tree.cu_num_nodes[:-1].to(device)[:, None] + slot[None, :]).clamp_max(max(tree.token_ids.numel() - 1, 0))

    def padded(x: torch.Tensor, fill: int) -> torch.Tensor:
        return torch.where(is_node, x.to(device)[flat], fill)

    parent, depth, tokens = padded(tree.parent, -2), padded(tree.depth, 0), padded(tree.token_ids, -1)
    is_earlier = slot[None, :, None] > slot[None, None, :]
    is_sibling = (parent[:, :, None] == parent[:, None, :]) & is_earlier & is_node[:, None, :]
    rank = is_sibling.sum(dim=2)
    max_depth, max_rank = conditional.shape
    in_table = is_node & (depth < max_depth) & (rank < max_rank)
    rate = torch.where(in_table, conditional[depth.clamp_max(max_depth - 1), rank.clamp_max(max_rank - 1)], 0.0)
    is_hit = torch.rand(num_reqs, width, device=device, generator=generator) < rate
    is_first_hit = is_hit & ~(is_sibling & is_hit[:, None, :]).any(dim=2)
    is_accepted = torch.zeros_like(is_hit)
    parent_index = parent.clamp_min(0)
    for _ in range(width):
        is_accepted = is_first_hit & ((parent == -1) | is_accepted.gather(1, parent_index)) & is_node
    num_accepted = is_accepted.sum(dim=1)
    tree_depth = int(tree.depth.max()) + 1
    level = torch.arange(tree_depth, device=device)
    at_level = is_accepted[:, None, :] & (depth[:, None, :] == level[None, :, None])
    accepted_nodes = torch.where(at_level.any(dim=2), at_level.long().argmax(dim=2), -1)
    last = torch.where(num_accepted > 0, accepted_nodes.gather(1, (num_accepted - 1).clamp_min(0)[:, None])[:, 0], -1)
    final = target_logits.argmax(dim=-1)[tree.cu_num_rows[:-1].to(device) + 1 + last]
    path_tokens = torch.where(accepted_nodes >= 0, tokens.gather(1, accepted_nodes.clamp_min(0)), -1)
    output = torch.nn.functional.pad(path_tokens, (0, 1), value=-1).scatter(1, num_accepted[:, None], final[:, None])
    return TreeVerifyResult(accepted_nodes=accepted_nodes, num_accepted=num_accepted, output_token_ids=output)


def old_compaction(kv: KVCache, requests, result: TreeVerifyResult, num_cached: list[int]) -> None:
    widest = max(len(r.block_table) for r in requests)
    tables = torch.tensor([list(r.block_table) + [0] * (widest - len(r.block_table)) for r in requests],
                          dtype=torch.int32)
    plan = accepted_path_moves(result.accepted_nodes, result.num_accepted, torch.tensor(num_cached), tables,
                               BLOCK_SIZE)
    if plan.num_moves == 0:
        return
    for layer in range(len(kv.k)):
        k_flat, v_flat = kv.flat(layer)
        apply_moves(k_flat, plan)
        apply_moves(v_flat, plan)


def old_round(runner, requests, st, tree: DraftTree, out: TargetOutput, synthetic: bool) -> list[list[int]]:
    """run_tree_round after the target forward, as it was (logprobs off)."""
    if synthetic:
        result = old_synthetic_tree_verify(out.logits, tree, runner.table, runner.synthetic_generator)
    else:
        result = verify_tree(out.logits, tree, None, st)
    num_accepted = result.num_accepted.tolist()
    accepted_paths = [nodes[:n] for nodes, n in zip(result.accepted_nodes.tolist(), num_accepted)]
    outputs = result.output_token_ids.tolist()
    num_cached = [r.num_cached_tokens for r in requests]
    old_compaction(runner.target_runner.kv_cache, requests, result, num_cached)
    cu_rows = tree.cu_num_rows.tolist()
    path_rows = [[cu_rows[r], *(cu_rows[r] + 1 + n for n in path)] for r, path in enumerate(accepted_paths)]
    committed = []
    for r, request in enumerate(requests):
        rows = torch.tensor(path_rows[r], dtype=torch.int64).to(out.logits.device)
        runner.proposer.add_target_features(request.request_id, num_cached[r], out.features[rows])
        request.num_cached_tokens += num_accepted[r] + 1
        one = tree_from_parents([tree.tokens_of(r)], [tree.parents_of(r)])
        width = result.accepted_nodes.shape[1]
        sub = TreeVerifyResult(result.accepted_nodes[r: r + 1].cpu(), result.num_accepted[r: r + 1].cpu(),
                               result.output_token_ids[r: r + 1, : width + 1].cpu())
        depths = tree.depth[tree.request_slice(r)]
        request.stats.record_tree_round(runner.num_nodes[r], int(depths.max()) + 1, num_accepted[r],
                                        round_counts(one, sub))
        committed.append(outputs[r][: num_accepted[r] + 1])
    runner.proposer.on_tree_verified(tuple(r.request_id for r in requests), tuple(map(tuple, accepted_paths)))
    return committed


def new_round(runner, requests, st, tree: DraftTree, out: TargetOutput, synthetic: bool,
              block_tables: torch.Tensor) -> list[list[int]]:
    runner.synthetic_rates = SGLANG_SETTING_RATES if synthetic else None
    committed, _, _ = tree_round.finish_tree_round(runner, requests, st, PhaseTimer(out.logits.device),
                                                   TreePlan(TOPK, DEPTH, NUM_DRAFT_TOKENS), tree,
                                                   tuple(tree.num_nodes.tolist()), block_tables, out,
                                                   needs_features=True)
    return committed


# ---------------------------------------------------------------- timing


def median_ms(fn, device: torch.device, iters: int, setup=None) -> tuple[float, object]:
    """Median wall time of fn() (its device work drained), after two warm-up calls; setup() runs untimed before
    each call and its result is fn's argument."""
    times, value = [], None
    for _ in range(iters + 2):
        arg = setup() if setup is not None else None
        _sync(device)
        start = time.perf_counter()
        value = fn(arg) if setup is not None else fn()
        _sync(device)
        times.append(1e3 * (time.perf_counter() - start))
    return statistics.median(times[2:]), value


def run_case(shapes: Shapes, num_reqs: int, device: torch.device, iters: int) -> list[tuple[str, float, float]]:
    tree, out, kv, tables, block_tables, table = build_case(shapes, num_reqs, device, seed=num_reqs)
    st = build_sampling_tensors([SamplingParams(temperature=0.0)] * num_reqs, [None] * num_reqs, shapes.vocab, device)
    runner = SimpleNamespace(paths=SimpleNamespace(record=lambda name: None), proposer=FakeProposer(),
                             target_runner=SimpleNamespace(kv_cache=kv), block_size=BLOCK_SIZE, device=device,
                             synthetic_rates=None, table=table, synthetic_tree_table=lambda depth, topk: table,
                             synthetic_generator=None)
    num_nodes = tuple(tree.num_nodes.tolist())
    runner.num_nodes = num_nodes  # the old round read the proposal's host counts
    rows = []

    def reseed():
        runner.synthetic_generator = torch.Generator(device=device).manual_seed(0)

    def host(result: TreeVerifyResult) -> list[list[int]]:
        n = result.num_accepted.tolist()
        return [row[: k + 1] for row, k in zip(result.output_token_ids.tolist(), n)]

    padded = pad_tree(tree, max(num_nodes))
    old_ms, old = median_ms(lambda _: host(old_synthetic_tree_verify(out.logits, tree, table,
                                                                     runner.synthetic_generator)), device, iters, reseed)
    new_ms, new = median_ms(lambda _: host(synthetic_tree_verify(
        out.logits, tree, table, runner.synthetic_generator, pad_tree(tree, max(num_nodes)))), device, iters, reseed)
    _same("synthetic verify", old, new)
    rows.append(("verify synthetic", old_ms, new_ms))
    old_ms, old = median_ms(lambda: host(verify_tree(out.logits, tree, None, st)), device, iters)
    new_ms, new = median_ms(lambda: host(verify_tree_batched(
        out.logits, tree, st, num_nodes, pad_tree(tree, max(num_nodes)))), device, iters)
    _same("greedy verify", old, new)
    rows.append(("verify greedy", old_ms, new_ms))
    result = synthetic_tree_verify(out.logits, tree, table, torch.Generator(device=device).manual_seed(0), padded)
    requests = requests_for(tables)
    num_cached = [r.num_cached_tokens for r in requests]
    cached = torch.tensor(num_cached, device=device)
    old_ms, _ = median_ms(lambda: old_compaction(kv, requests, result, num_cached), device, iters)
    new_ms, _ = median_ms(lambda: move_slots_all_layers(kv, padded_path_moves(
        result.accepted_nodes, result.num_accepted, cached, block_tables, BLOCK_SIZE)), device, iters)
    rows.append((f"compaction ({shapes.num_layers} layers)", old_ms, new_ms))
    for synthetic in (True, False):
        name = "round synthetic" if synthetic else "round greedy"
        def fresh_requests():  # untimed: fresh requests and a reseeded synthetic generator per round
            runner.synthetic_generator = torch.Generator(device=device).manual_seed(0)
            return requests_for(tables)

        old_ms, old = median_ms(lambda reqs, s=synthetic: old_round(runner, reqs, st, tree, out, s), device, iters,
                                fresh_requests)
        new_ms, new = median_ms(lambda reqs, s=synthetic: new_round(runner, reqs, st, tree, out, s, block_tables),
                                device, iters, fresh_requests)
        _same(name, old, new)
        rows.append((name, old_ms, new_ms))
    return rows


def _same(name: str, old, new) -> None:
    if old != new:
        sys.exit(f"error: {name}: the batched path committed other tokens than the old one: {old} != {new}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--concurrency", default="1,16")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (a shared box's cores make more noisy)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    shapes = LLAMA_8B if device.type == "cuda" else CPU_SMALL
    print(f"device {device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}), tree topk "
          f"{TOPK} / {NUM_DRAFT_TOKENS} tokens / depth {DEPTH}, KV {shapes.num_layers} layers x {shapes.num_kv_heads} "
          f"heads x {shapes.head_dim} {shapes.dtype}, vocab {shapes.vocab}; median of {args.iters}, ms per round")
    print(f"{'c':>3}  {'phase':<26} {'before':>9} {'after':>9} {'speedup':>8}")
    for concurrency in (int(c) for c in args.concurrency.split(",")):
        for name, old_ms, new_ms in run_case(shapes, concurrency, device, args.iters):
            print(f"{concurrency:>3}  {name:<26} {old_ms:9.3f} {new_ms:9.3f} {old_ms / new_ms:7.2f}x")


if __name__ == "__main__":
    main()

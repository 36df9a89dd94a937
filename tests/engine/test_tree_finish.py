"""The post-verify half of a tree round, on the CPU and (when there is one) on CUDA: the batched pieces equal the
references on the device, the features handed over are the path's rows; on CUDA no host sync happens before the
round's one read (torch's sync debug mode raises on any, or counts them).

Run on a GPU: `pytest -q tests/engine/test_tree_finish.py tests/speculation/test_tree_verify_batched.py
tests/speculation/test_tree_kv.py` (and `python scripts/bench_tree_host.py` for the timings)."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import pytest
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
    synthetic_tree_walk,
    tree_table,
)
from specbench.speculation.tree.draft_tree import TreeShapeError, tree_from_parents
from specbench.speculation.tree.kv import accepted_path_moves, apply_moves, move_slots_all_layers, padded_path_moves
from specbench.speculation.tree.padded import pad_tree, path_shape, uniform_tree
from specbench.speculation.tree.plan import TreePlan
from specbench.speculation.verify.tree import verify_tree
from specbench.speculation.verify.tree_batched import verify_tree_batched
from tests.support.trees import random_round, random_trees

DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                                                              reason="needs a CUDA device")])]
VOCAB = 5
BLOCK_SIZE = 4


class _NoSync:
    """torch's sync debug mode on CUDA ("error": any synchronizing call raises); nothing on the CPU."""

    def __init__(self, device: str, mode: str = "error") -> None:
        self.is_cuda, self.mode = device == "cuda", mode

    def __enter__(self):
        if self.is_cuda:
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode(self.mode)

    def __exit__(self, *exc) -> None:
        if self.is_cuda:
            torch.cuda.set_sync_debug_mode("default")


def _case(seed: int, device: str, num_reqs: int = 6):
    gen = torch.Generator().manual_seed(seed)
    tree = random_trees(gen, num_reqs, 9, VOCAB)
    tree = type(tree)(*(t.to(device) for t in (tree.token_ids, tree.parent, tree.depth, tree.num_nodes,
                                               tree.cu_num_nodes)))
    logits = torch.randn(int(tree.cu_num_rows[-1]), VOCAB, generator=gen).to(device)
    return tree, logits, tuple(tree.num_nodes.tolist())


@pytest.mark.parametrize("device", DEVICES)
def test_verifiers_launch_no_sync_and_equal_the_walks(device):
    for seed in range(10):
        tree, logits, num_nodes = _case(seed, device)
        greedy = build_sampling_tensors([SamplingParams(temperature=0.0)] * 6, [None] * 6, VOCAB, device)
        seeded = build_sampling_tensors([SamplingParams(temperature=1.0, seed=seed)] * 6,
                                        [torch.Generator(device).manual_seed(seed + r) for r in range(6)], VOCAB, device)
        table = tree_table((0.9, 0.8, 0.7), 3, 0.6).to(device)
        width = max(num_nodes)
        synthetic_generator = torch.Generator(device).manual_seed(seed)
        with _NoSync(device):
            padded = pad_tree(tree, width)
            got = verify_tree_batched(logits, tree, greedy, num_nodes, padded)
            verify_tree_batched(logits, tree, seeded, num_nodes, padded)
            synthetic = synthetic_tree_verify(logits, tree, table, synthetic_generator, padded)
            path_shape(padded, got.accepted_nodes, got.num_accepted)
        want = verify_tree(logits, tree, None, greedy)
        assert torch.equal(got.num_accepted, want.num_accepted)
        assert torch.equal(got.output_token_ids[:, : want.output_token_ids.shape[1]], want.output_token_ids)
        coins = torch.rand(6, width, device=device, generator=torch.Generator(device).manual_seed(seed))
        paths, finals = synthetic_tree_walk(logits, tree, table, coins)
        n = synthetic.num_accepted.tolist()
        assert [row[:k] for row, k in zip(synthetic.accepted_nodes.tolist(), n)] == paths
        assert [row[k] for row, k in zip(synthetic.output_token_ids.tolist(), n)] == finals


@pytest.mark.parametrize("device", DEVICES)
def test_compaction_over_all_layers_launches_no_sync_and_equals_the_reference(device):
    gen = torch.Generator().manual_seed(0)
    for _ in range(10):
        accepted, num_accepted, cached, tables = (t.to(device) for t in random_round(gen, 5, 9, 40))
        kv = KVCache(KVCacheSpec(4, 2, 8, torch.bfloat16), 40, BLOCK_SIZE, torch.device(device))
        kv.storage.copy_(torch.randn(kv.storage.shape, generator=gen).to(torch.bfloat16))
        want = [t.clone() for layer in range(4) for t in kv.flat(layer)]
        plan = accepted_path_moves(accepted, num_accepted, cached, tables, BLOCK_SIZE)
        for cache in want:
            apply_moves(cache, plan)
        with _NoSync(device):
            move_slots_all_layers(kv, padded_path_moves(accepted, num_accepted, cached, tables, BLOCK_SIZE))
        assert all(torch.equal(got, w) for got, w in zip((t for layer in range(4) for t in kv.flat(layer)), want))


def _round_case(num_reqs: int, seed: int, device: str, vocab: int = 1000, prompt_len: int = 40):
    """SGLang's default tree (topk 4, 8 tokens, depth 5) for every request, logits whose argmax often follows a
    branch, a 4-layer KV cache, features, fake requests."""
    gen = torch.Generator().manual_seed(seed)
    table = tree_table(SGLANG_SETTING_RATES, 4, DEFAULT_RANK_DECAY)
    parents = expected_tree(table, 4, 8, 5)
    tokens = [torch.randint(0, vocab, (len(parents),), generator=gen).tolist() for _ in range(num_reqs)]
    tree = tree_from_parents(tokens, [parents] * num_reqs, device)
    cu_rows = tree.cu_num_rows.tolist()
    logits = torch.randn(cu_rows[-1], vocab, generator=gen)
    for r in range(num_reqs):
        for i, p in enumerate(parents):
            if torch.rand((), generator=gen) < 0.6:
                logits[cu_rows[r] + 1 + p, tokens[r][i]] += 20.0
    blocks_per_req = (prompt_len + 1 + 8) // 16 + 1  # the root and 8 nodes after the prompt
    kv = KVCache(KVCacheSpec(4, 2, 8, torch.bfloat16), num_reqs * blocks_per_req, 16, torch.device(device))
    tables = [list(range(r * blocks_per_req, (r + 1) * blocks_per_req)) for r in range(num_reqs)]
    stats = [RequestStats(arrival_time=0.0, num_prompt_tokens=prompt_len, num_drafted_per_pos=[0] * 5,
                          num_accepted_per_pos=[0] * 5) for _ in range(num_reqs)]
    requests = [SimpleNamespace(request_id=f"r{r}", num_cached_tokens=prompt_len, block_table=tables[r],
                                stats=stats[r], sampling_params=SamplingParams(temperature=0.0))
                for r in range(num_reqs)]
    out = TargetOutput(logits.to(device), torch.randn(cu_rows[-1], 24, generator=gen).to(device))
    return tree, out, kv, requests, torch.tensor(tables, dtype=torch.int32, device=device), table.to(device)


class _Proposer:
    def __init__(self) -> None:
        self.features: dict[str, torch.Tensor] = {}

    def add_target_features(self, request_id: str, start: int, features: torch.Tensor) -> None:
        self.features[request_id] = features

    def on_tree_verified(self, request_ids, accepted_nodes) -> None:
        self.paths = accepted_nodes


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("synthetic", [True, False])
def test_finish_tree_round_syncs_once(synthetic, device):
    """finish_tree_round: the committed tokens are the verifier's, the features handed over the path's rows, the
    KV compacted; on CUDA under sync debug mode "warn", exactly one synchronizing call (the round's read)."""
    tree, out, kv, requests, block_tables, table = _round_case(16, 3, device)
    st = build_sampling_tensors([SamplingParams(temperature=0.0)] * 16, [None] * 16, out.logits.shape[1], device)
    proposer = _Proposer()
    runner = SimpleNamespace(paths=SimpleNamespace(record=lambda name: None), proposer=proposer,
                             target_runner=SimpleNamespace(kv_cache=kv), block_size=16, device=torch.device(device),
                             synthetic_rates=(0.8,) if synthetic else None, synthetic_tree_table=lambda d, k: table,
                             synthetic_generator=torch.Generator(device).manual_seed(0))
    num_nodes = tuple(tree.num_nodes.tolist())
    kv.storage.copy_(torch.randn(kv.storage.shape).to(kv.storage.dtype))
    kv_before = kv.storage.clone()
    with _NoSync(device, "warn"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        committed, num_accepted, _ = tree_round.finish_tree_round(
            runner, requests, st, PhaseTimer(torch.device(device)), TreePlan(4, 5, 8), tree, num_nodes,
            block_tables, out, needs_features=True)
    syncs = [str(w.message) for w in caught if "synchroniz" in str(w.message).lower()]
    assert len(syncs) == (1 if device == "cuda" else 0), syncs
    generator = torch.Generator(device).manual_seed(0)
    want = synthetic_tree_verify(out.logits, tree, table, generator) if synthetic else \
        verify_tree(out.logits, tree, None, st)
    n = want.num_accepted.tolist()
    assert committed == [row[: k + 1] for row, k in zip(want.output_token_ids.tolist(), n)]
    assert sum(n) > 0 and max(n) >= 2, "paths too short to move anything"
    plan = accepted_path_moves(want.accepted_nodes, want.num_accepted,
                               torch.tensor([40] * 16, device=device), block_tables, 16)
    flat = kv_before.view(8, -1, 2, 8)
    for cache in flat:
        apply_moves(cache, plan)
    assert torch.equal(kv.storage.view(8, -1, 2, 8), flat)
    assert num_accepted == sum(len(c) - 1 for c in committed) and len(proposer.features) == 16
    cu_rows = tree.cu_num_rows.tolist()
    for r, path in enumerate(proposer.paths):  # the features handed over are the root's and the path's rows
        rows = [cu_rows[r], *(cu_rows[r] + 1 + n for n in path)]
        assert torch.equal(proposer.features[f"r{r}"], out.features[rows])


def test_finish_tree_round_refuses_a_tree_whose_parent_follows_its_child():
    """The device layout derives depths without checking the parents (engine/tree_inputs.py): the round's one read
    carries the check, and a node whose parent does not precede it stops the round in one clear error."""
    tree, out, kv, requests, block_tables, table = _round_case(3, 0, "cpu")
    st = build_sampling_tensors([SamplingParams(temperature=0.0)] * 3, [None] * 3, out.logits.shape[1], "cpu")
    runner = SimpleNamespace(paths=SimpleNamespace(record=lambda name: None), proposer=_Proposer(),
                             target_runner=SimpleNamespace(kv_cache=kv), block_size=16, device=torch.device("cpu"),
                             synthetic_rates=None, synthetic_tree_table=lambda d, k: table, synthetic_generator=None)
    num_nodes = tuple(tree.num_nodes.tolist())
    parents = tree.parent.view(3, -1).clone()
    tokens = tree.token_ids.view(3, -1)
    clean_tree, clean = uniform_tree(tokens, parents)
    tree_round.finish_tree_round(runner, requests, st, PhaseTimer(torch.device("cpu")), TreePlan(4, 5, 8), clean_tree,
                                 num_nodes, block_tables, out, needs_features=False, padded=clean)
    parents[2, 3] = 6  # node 3's parent after it
    bad_tree, bad = uniform_tree(tokens, parents)
    with pytest.raises(TreeShapeError, match="request 2: drafted tree node 3 has a parent that does not precede it"):
        tree_round.finish_tree_round(runner, requests, st, PhaseTimer(torch.device("cpu")), TreePlan(4, 5, 8),
                                     bad_tree, num_nodes, block_tables, out, needs_features=False, padded=bad)

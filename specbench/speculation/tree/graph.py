"""One CUDA graph per batch bucket for the tree draft of one TreePlan: the root's top-k children, every draft step
over the frontier (metadata, masks and parent rows derived on the device: speculation/tree/device.py) and the
budget cut, replayed after the round's eager catch-up. Used by the EAGLE/MTP proposer (eagle.tree_graph) and the
draft LM (draft.tree_graph), each with its own draft function and root inputs.

Static inputs: the catch-up's last rows (`num_roots` [max_reqs, width] tensors, e.g. the root's hidden state),
each request's draft prefix length and block table, and whether it is real. Padding requests (is_real False) sit
at prefix 0 and write nothing (slot -1); their outputs are dropped. A plan's graphs are captured once, between runs
(the proposers' prepare_tree_draft_graphs, from LLMEngine.set_draft_shape / set_num_steps); a round whose plan,
batch or block tables the graphs do not cover drafts eagerly on the same device code. Off CUDA "replay" reruns the
draft function on the static buffers (tests of everything but the capture itself).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from specbench.execution_paths import PathRecorder
from specbench.runtime.cuda_graph import GraphPlan, batch_buckets, capture_graph
from specbench.speculation.tree.step import StepLayout
from specbench.speculation.tree.plan import TreePlan, kv_rows

# draft(roots, layout) -> the round's outputs, each [bucket, ...]; `roots` [bucket, width] each; must not sync
TreeDraftFn = Callable[[tuple[torch.Tensor, ...], StepLayout], tuple[torch.Tensor, ...]]


class TreeDraftGraphs:
    def __init__(self, draft: TreeDraftFn, plan: TreePlan, graph_plan: GraphPlan, *, num_roots: int,
                 root_width: int, root_dtype: torch.dtype, paths: PathRecorder,
                 reset: Callable[[int], None] | None = None, pool=None) -> None:
        """`reset(bucket)`: puts the caller's own static inputs (a catch-up's buffers) in a padding state before a
        bucket is captured. `pool`: a graph pool shared with other graphs of the caller (replayed one at a time,
        outputs copied out at once); None: a pool of its own."""
        self.draft = draft
        self.reset = reset
        self.plan = plan
        self.block_size = graph_plan.block_size
        self.device = device = graph_plan.device
        self.paths = paths  # the engine's record of execution paths
        self.buckets = batch_buckets(graph_plan.max_num_reqs)
        # RoPE positions stay below the plan's (the tables were grown to it when graphs were enabled); the tree rows
        # are stored up to kv_rows(plan) past the prefix.
        self.max_positions = graph_plan.max_positions
        max_reqs = graph_plan.max_num_reqs
        max_blocks = -(-(graph_plan.max_positions + kv_rows(plan)) // self.block_size)
        # [num_roots][max_reqs, width] the catch-up's last rows
        self.roots = tuple(torch.zeros(max_reqs, root_width, dtype=root_dtype, device=device) for _ in range(num_roots))
        self.prefix = torch.zeros(max_reqs, dtype=torch.int64, device=device)  # [max_reqs]
        self.is_real = torch.zeros(max_reqs, dtype=torch.bool, device=device)  # [max_reqs]
        self.block_tables = torch.zeros(max_reqs, max_blocks, dtype=torch.int32, device=device)  # [max_reqs, blocks]
        self.pool = None if device.type != "cuda" else pool if pool is not None else torch.cuda.graph_pool_handle()
        # bucket -> (graph or None off CUDA, static outputs, execution paths the captured draft took)
        self._graphs: dict[int, tuple[object, tuple[torch.Tensor, ...], frozenset[str]]] = {}
        self.num_replays = 0

    def bucket_for(self, num_reqs: int) -> int | None:
        return next((b for b in self.buckets if b >= num_reqs), None)

    def fits(self, block_tables: torch.Tensor, prefix_lens: tuple[int, ...]) -> bool:
        """The batch replays on a captured bucket: not too many requests, block tables and positions in range."""
        n = len(prefix_lens)
        return (0 < n and self.bucket_for(n) is not None and block_tables.shape[1] <= self.block_tables.shape[1]
                and max(prefix_lens) + self.plan.depth <= self.max_positions)

    def _draft(self, bucket: int) -> tuple[torch.Tensor, ...]:
        layout = StepLayout(self.prefix[:bucket], self.block_tables[:bucket], self.block_size, self.max_positions,
                            is_real=self.is_real[:bucket])
        return self.draft(tuple(root[:bucket] for root in self.roots), layout)

    @torch.inference_mode()
    def capture(self) -> None:
        """Every bucket, largest first so smaller ones reuse its pool memory; on padding only (writes no KV)."""
        for bucket in sorted(self.buckets, reverse=True):
            self.is_real.zero_()
            self.prefix.zero_()
            if self.reset is not None:
                self.reset(bucket)
            if self.pool is None:
                self._graphs[bucket] = (None, (), frozenset())
            else:
                with self.paths.collecting() as taken:
                    graph, outputs = capture_graph(lambda b=bucket: self._draft(b), self.pool, self.device)
                self._graphs[bucket] = (graph, outputs, frozenset(taken))

    @torch.inference_mode()
    def run(self, roots: tuple[torch.Tensor, ...], prefix: torch.Tensor, block_tables: torch.Tensor
            ) -> tuple[torch.Tensor, ...]:
        """The draft's outputs for the real requests, [num_reqs, ...] each (roots [num_reqs, width] each; prefix
        [num_reqs] int64; block_tables [num_reqs, blocks] int32; all on the device)."""
        n = prefix.shape[0]
        bucket = self.bucket_for(n)
        for buffer, root in zip(self.roots, roots, strict=True):
            buffer[:n].copy_(root)
        self.prefix[:n].copy_(prefix)
        self.prefix[n:bucket].zero_()
        self.is_real[:n].fill_(True)
        self.is_real[n:bucket].fill_(False)
        self.block_tables[:n, : block_tables.shape[1]].copy_(block_tables)
        graph, outputs, paths = self._graphs[bucket]
        if graph is None:
            outputs = self._draft(bucket)
        else:
            graph.replay()
            self.paths.record_all(paths)
        self.num_replays += 1
        # copies: the static outputs are overwritten by the next replay, the proposal lives on through the verify
        return tuple(out[:n].clone() for out in outputs)

    @property
    def num_graphs(self) -> int:
        return len(self._graphs)

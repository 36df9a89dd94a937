"""One CUDA graph per batch bucket for the tree draft of one TreePlan: the root's top-k children, every draft step
over the frontier (metadata, masks and parent rows derived on the device: speculation/tree_device.py) and the
budget cut, replayed after the round's eager catch-up.

Static inputs: the catch-up's last rows (the root's hidden and logits input), each request's draft prefix length
and block table, and whether it is real. Padding requests (is_real False) sit at prefix 0 and write nothing (slot
-1); their outputs are dropped. A plan's graphs are captured once (EagleProposer.prepare_tree_draft_graphs, between
runs); a round whose plan, batch or block tables the graphs do not cover drafts eagerly on the same device code.
"""

from __future__ import annotations

import torch

from specbench.runtime.cuda_graph import GraphPlan, batch_buckets, capture_graph
from specbench.speculation.tree_device import StepLayout, grow_tree_on_device
from specbench.speculation.tree_propose import TreePlan, kv_rows


class EagleTreeGraphs:
    def __init__(self, proposer, plan: TreePlan, graph_plan: GraphPlan) -> None:
        self.proposer = proposer
        self.plan = plan
        self.block_size = graph_plan.block_size
        self.device = device = graph_plan.device
        self.paths = proposer.head.attn_backend.paths  # the engine's record of execution paths
        self.buckets = batch_buckets(graph_plan.max_num_reqs)
        # RoPE positions stay below the plan's (the tables were grown to it when graphs were enabled); the tree rows
        # are stored up to kv_rows(plan) past the prefix.
        self.max_positions = graph_plan.max_positions
        max_reqs, width = graph_plan.max_num_reqs, proposer.head.config.layer.hidden_size
        max_blocks = -(-(graph_plan.max_positions + kv_rows(plan)) // self.block_size)
        dtype = proposer.head.dtype
        self.root_hidden = torch.zeros(max_reqs, width, dtype=dtype, device=device)  # [max_reqs, H]
        self.root_logits_input = torch.zeros(max_reqs, width, dtype=dtype, device=device)  # [max_reqs, H]
        self.prefix = torch.zeros(max_reqs, dtype=torch.int64, device=device)  # [max_reqs]
        self.is_real = torch.zeros(max_reqs, dtype=torch.bool, device=device)  # [max_reqs]
        self.block_tables = torch.zeros(max_reqs, max_blocks, dtype=torch.int32, device=device)  # [max_reqs, blocks]
        self.pool = torch.cuda.graph_pool_handle() if device.type == "cuda" else None
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

    def _draft(self, bucket: int) -> tuple[torch.Tensor, torch.Tensor]:
        """([bucket, num_kept] draft ids in the target's vocabulary, [bucket, num_kept] parents)."""
        layout = StepLayout(self.prefix[:bucket], self.block_tables[:bucket], self.block_size, self.max_positions,
                            is_real=self.is_real[:bucket])
        return self.proposer.draft_tree(self.plan, self.root_hidden[:bucket], self.root_logits_input[:bucket], layout,
                                        grow_tree_on_device, check_metadata=False)

    @torch.inference_mode()
    def capture(self) -> None:
        """Every bucket, largest first so smaller ones reuse its pool memory; on padding only (writes no KV)."""
        for bucket in sorted(self.buckets, reverse=True):
            self.is_real.zero_()
            self.prefix.zero_()
            if self.pool is None:  # off CUDA (reference-backend tests): rerun instead of replaying
                self._graphs[bucket] = (None, (), frozenset())
            else:
                with self.paths.collecting() as taken:
                    graph, outputs = capture_graph(lambda b=bucket: self._draft(b), self.pool, self.device)
                self._graphs[bucket] = (graph, outputs, frozenset(taken))

    @torch.inference_mode()
    def run(self, root_hidden: torch.Tensor, root_logits_input: torch.Tensor, prefix: torch.Tensor,
            block_tables: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(draft ids, parents), [num_reqs, num_kept] each, for the real requests (root_hidden, root_logits_input:
        [num_reqs, H]; prefix [num_reqs] int64; block_tables [num_reqs, blocks] int32, all on the device)."""
        n = root_hidden.shape[0]
        bucket = self.bucket_for(n)
        self.root_hidden[:n].copy_(root_hidden)
        self.root_logits_input[:n].copy_(root_logits_input)
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
        return outputs[0][:n].clone(), outputs[1][:n].clone()

    @property
    def num_graphs(self) -> int:
        return len(self._graphs)

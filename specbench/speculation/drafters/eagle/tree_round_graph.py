"""The whole EAGLE/MTP tree round in one CUDA graph per batch bucket: the catch-up padded to depth + 1 queries per
request (as EagleRoundGraphs pads a chain round's to k + 1: padding first, at committed positions, slot -1), its last
rows as the roots, then the tree draft (speculation/tree/graph.py). A tree round's catch-up covers the root and the
accepted path, at most depth + 1 positions, so every round but a request's first (its prompt's features) and those
after a preemption fits; those replay the steps-only graphs after an eager catch-up (eagle.tree_graph)."""

from __future__ import annotations

import torch

from specbench.runtime.cuda_graph import GraphPlan, GraphShape, StaticBuffers
from specbench.speculation.drafters.eagle.round_graph import RoundInput
from specbench.speculation.drafters.eagle.round_input import RoundFeatures
from specbench.speculation.tree.device import grow_tree_on_device
from specbench.speculation.tree.step import StepLayout
from specbench.speculation.tree.graph import TreeDraftGraphs
from specbench.speculation.tree.plan import TreePlan


class EagleTreeRoundGraphs:
    def __init__(self, proposer, plan: TreePlan, graph_plan: GraphPlan, pool=None) -> None:
        self.proposer = proposer
        self.plan = plan
        self.query_len = q = plan.depth + 1
        self.block_size = graph_plan.block_size
        head = proposer.head
        self.graphs = TreeDraftGraphs(self._draft, plan, graph_plan, num_roots=0, root_width=0, root_dtype=head.dtype,
                                      paths=head.attn_backend.paths, reset=self._reset, pool=pool)
        # the catch-up's buffer holds unprojected target features (the graph projects them); the tree draft's block
        # tables, wide enough for the tree rows, are the catch-up's too
        feature_dim = head.fc.in_features if head.is_eagle3 else head.config.layer.hidden_size
        self.extend = StaticBuffers(graph_plan.max_num_reqs, q, self.graphs.block_tables.shape[1], feature_dim,
                                    head.dtype, graph_plan.device, block_tables=self.graphs.block_tables,
                                    max_positions=graph_plan.max_positions)
        # [max_reqs] row of each request's last catch-up query
        self.last_rows = torch.arange(1, graph_plan.max_num_reqs + 1, device=graph_plan.device) * q - 1

    def _reset(self, bucket: int) -> None:
        self.extend.reset(GraphShape(bucket, self.query_len))

    def _draft(self, roots: tuple[torch.Tensor, ...], layout: StepLayout) -> tuple[torch.Tensor, ...]:
        head, kv = self.proposer.head, self.proposer.kv_cache
        bucket = layout.prefix.shape[0]
        num_tokens = bucket * self.query_len
        md = self.extend.metadata(GraphShape(bucket, self.query_len), self.block_size)
        features = head.project_target_features(self.extend.hidden[:num_tokens])
        out = head(self.extend.input_ids[:num_tokens], features, md, kv, phase="eagle_extend", check_metadata=False)
        last = self.last_rows[:bucket]
        return self.proposer.draft_tree(self.plan, out.hidden[last], out.logits_input[last], layout,
                                        grow_tree_on_device, check_metadata=False)

    def fits(self, feats: RoundFeatures, prefix_lens: tuple[int, ...], block_tables: torch.Tensor) -> bool:
        """Every request catches up over <= depth + 1 positions with room for leading padding, and the batch fits
        the tree draft graphs."""
        q = self.query_len
        for r, start in enumerate(feats.new_feature_start):
            num_new = feats.cu_num_new_features[r + 1] - feats.cu_num_new_features[r]
            if not 0 < num_new <= q or start < q - num_new:
                return False
        return self.graphs.fits(block_tables, prefix_lens)

    def run(self, inp: RoundInput, prefix: torch.Tensor, block_tables: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(draft ids, parents) [num_reqs, num_kept] each; `inp` the padded catch-up (round_input.build_round_input)."""
        n = prefix.shape[0]
        shape = GraphShape(self.graphs.bucket_for(n), self.query_len)
        self.extend.load(shape, inp.extend_input_ids, inp.extend_md, None)
        # Real rows get this round's features; padding rows keep earlier finite values (their outputs are dropped).
        self.extend.hidden.index_copy_(0, inp.real_rows, inp.new_features)
        return self.graphs.run((), prefix, block_tables)

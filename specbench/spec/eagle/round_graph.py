"""One CUDA graph per batch bucket for a whole EAGLE drafting round: the catch-up, padded to k + 1 queries per
request, then draft steps 1 .. k - 1, each reading its own metadata buffers.

A round replays once instead of launching k forwards from Python. The host still builds every phase's
metadata (and the debug invariants check it) before the replay; each draft step has its own buffers, so no step
can run on another step's positions, slots or visible lengths (seed 004). Catch-up padding queries sit before a
request's real ones, at already committed positions, with slot -1: they attend causally, write nothing, and
their outputs are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.attention.metadata import AttentionMetadata
from specbench.runtime.cuda_graph import GraphShape, StaticBuffers, batch_buckets, capture_graph


@dataclass(frozen=True, slots=True)
class RoundInput:
    extend_input_ids: torch.Tensor  # [num_reqs * (k + 1)] per request: padding ids, then the catch-up tokens
    extend_md: AttentionMetadata  # num_reqs x (k + 1) queries, leading padding with slot -1
    extend_hidden: torch.Tensor  # [num_reqs * (k + 1), H] projected target features (padding rows: anything)
    step_mds: tuple[AttentionMetadata, ...]  # [k - 1] draft step j = 1 .. k - 1, one query per request


class EagleRoundGraphs:
    def __init__(self, proposer, num_steps: int, plan, check_metadata) -> None:
        self.proposer = proposer
        self.num_steps = num_steps
        self.query_len = num_steps + 1
        self.block_size = plan.block_size
        self.device = plan.device
        self.check_metadata = check_metadata
        self.buckets = batch_buckets(plan.max_num_reqs)
        head = proposer.head
        hidden = head.config.layer.hidden_size
        self.extend = StaticBuffers(plan.max_num_reqs, self.query_len, plan.max_blocks_per_req, hidden, head.dtype,
                                    plan.device, max_positions=plan.max_positions)
        # Every phase of a round reads the same block tables: the steps share the catch-up's buffer.
        self.steps = [StaticBuffers(plan.max_num_reqs, 1, plan.max_blocks_per_req, None, head.dtype, plan.device,
                                    block_tables=self.extend.block_tables, max_positions=plan.max_positions)
                      for _ in range(num_steps - 1)]
        # [max_reqs] row of each request's last catch-up query
        self.last_rows = torch.arange(1, plan.max_num_reqs + 1, device=plan.device) * self.query_len - 1
        self.pool = torch.cuda.graph_pool_handle() if plan.device.type == "cuda" else None
        self._graphs: dict[int, tuple[object, tuple[torch.Tensor, ...]]] = {}
        self.num_replays = 0

    def bucket_for(self, num_reqs: int) -> int | None:
        return next((b for b in self.buckets if b >= num_reqs), None)

    def _round(self, bucket: int) -> tuple[torch.Tensor]:
        """[bucket, k] draft token ids (target vocabulary)."""
        head, kv = self.proposer.head, self.proposer.kv_cache
        num_tokens = bucket * self.query_len
        md = self.extend.metadata(GraphShape(bucket, self.query_len), self.block_size)
        out = head(self.extend.input_ids[:num_tokens], self.extend.hidden[:num_tokens], md, kv,
                   phase="eagle_extend", check_metadata=False)
        last = self.last_rows[:bucket]
        hidden, ids = out.hidden[last], self.proposer.argmax_target_ids(out.logits_input[last])
        drafts = [ids]
        for buffers in self.steps:
            md = buffers.metadata(GraphShape(bucket, 1), self.block_size)
            out = head(ids, hidden, md, kv, phase="eagle_step", check_metadata=False)
            hidden, ids = out.hidden, self.proposer.argmax_target_ids(out.logits_input)
            drafts.append(ids)
        return (torch.stack(drafts, dim=1),)

    @torch.inference_mode()
    def capture(self) -> None:
        for bucket in sorted(self.buckets, reverse=True):
            self.extend.reset(GraphShape(bucket, self.query_len))
            for buffers in self.steps:
                buffers.reset(GraphShape(bucket, 1))
            if self.pool is None:  # off CUDA (Triton interpreter tests): rerun instead of replaying
                self._graphs[bucket] = (None, ())
            else:
                self._graphs[bucket] = capture_graph(lambda: self._round(bucket), self.pool, self.device)

    def run(self, inp: RoundInput) -> torch.Tensor:  # [num_reqs, k], a view valid until the next replay
        n = inp.extend_md.num_reqs
        bucket = self.bucket_for(n)
        self.check_metadata(inp.extend_md, "eagle_extend")
        for j, md in enumerate(inp.step_mds, start=1):
            self.check_metadata(md, f"eagle_step_{j}")
        self.extend.load(GraphShape(bucket, self.query_len), inp.extend_input_ids, inp.extend_md, inp.extend_hidden)
        for buffers, md in zip(self.steps, inp.step_mds):
            buffers.load(GraphShape(bucket, 1), None, md, None)
        graph, outputs = self._graphs[bucket]
        if graph is None:
            with torch.inference_mode():
                outputs = self._round(bucket)
        else:
            graph.replay()
        self.num_replays += 1
        return outputs[0][:n]

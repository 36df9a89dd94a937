"""One CUDA graph per batch bucket for a whole EAGLE drafting round: the catch-up, padded to k + 1 queries per
request, then draft steps 1 .. k - 1, each reading its own metadata buffers.

A round replays once instead of launching k forwards from Python. The host builds the catch-up's metadata; the
graph derives each draft step's metadata from it into that step's own buffers (step j of a request queries the
position after its last catch-up query plus j - 1, sees one key more, writes that position's slot), so no step
can run on another step's positions, slots or visible lengths (seed 004), and no host work per step sits
between the verify and the round. With the debug invariants on, the host also builds every step's metadata the
reference way (step_plan.draft_step_metadata), checks it before the replay, and after it checks that the graph
derived exactly that. The target features are projected inside the graph. Catch-up padding queries sit before
a request's real ones, at already committed positions, with slot -1: they attend causally, write nothing, and
their outputs are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.attention.invariant_violation import InvariantViolation
from specbench.attention.metadata import PADDING_SLOT, AttentionMetadata
from specbench.runtime.cuda_graph import GraphShape, StaticBuffers, batch_buckets, capture_graph


@dataclass(frozen=True, slots=True)
class AheadRoundInput:
    """A round launched from a verify's outputs before the host read them (engine overlap of EAGLE rounds)."""

    newest_positions: torch.Tensor  # [num_reqs] int64, position of each request's newest token at that verify
    block_tables: torch.Tensor  # [num_reqs, max_num_blocks] int32, cover the next verify's positions
    verify_token_ids: torch.Tensor  # [num_reqs, k + 1] int64 the verify's output: accepted drafts, then the bonus
    num_accepted: torch.Tensor  # [num_reqs] int64
    target_features: torch.Tensor  # [num_reqs * (k + 1), feature_dim] the verify's features, row j = newest + j


@dataclass(frozen=True, slots=True)
class RoundInput:
    extend_input_ids: torch.Tensor  # [num_reqs * (k + 1)] per request: padding ids, then the catch-up tokens
    extend_md: AttentionMetadata  # num_reqs x (k + 1) queries, leading padding with slot -1
    new_features: torch.Tensor  # [num_new_total, feature_dim] unprojected target features of the real queries
    real_rows: torch.Tensor  # [num_new_total] int64, row of each real catch-up query in the padded layout
    # [k - 1] draft step j = 1 .. k - 1 built on the host: only with the debug invariants on (else ()), to check
    step_mds: tuple[AttentionMetadata, ...]


class EagleRoundGraphs:
    def __init__(self, proposer, num_steps: int, plan, check_metadata) -> None:
        self.proposer = proposer
        self.num_steps = num_steps
        self.query_len = num_steps + 1
        self.block_size = plan.block_size
        self.device = plan.device
        self.check_metadata = check_metadata
        self.paths = proposer.head.attn_backend.paths  # the engine's record of execution paths
        self.buckets = batch_buckets(plan.max_num_reqs)
        head = proposer.head
        # the catch-up's buffer holds unprojected target features: the graph projects them
        feature_dim = head.fc.in_features if head.is_eagle3 else head.config.layer.hidden_size
        self.extend = StaticBuffers(plan.max_num_reqs, self.query_len, plan.max_blocks_per_req, feature_dim,
                                    head.dtype, plan.device, max_positions=plan.max_positions)
        # Every phase of a round reads the same block tables: the steps share the catch-up's buffer.
        self.steps = [StaticBuffers(plan.max_num_reqs, 1, plan.max_blocks_per_req, None, head.dtype, plan.device,
                                    block_tables=self.extend.block_tables, max_positions=plan.max_positions)
                      for _ in range(num_steps - 1)]
        # [max_reqs] row of each request's last catch-up query
        self.last_rows = torch.arange(1, plan.max_num_reqs + 1, device=plan.device) * self.query_len - 1
        self.query_index = torch.arange(self.query_len, device=plan.device)  # [k + 1]
        self.request_index = torch.arange(plan.max_num_reqs, device=plan.device)  # [max_reqs]
        self.pool = torch.cuda.graph_pool_handle() if plan.device.type == "cuda" else None
        # bucket -> (graph or None off CUDA, static outputs, execution paths the captured round took)
        self._graphs: dict[int, tuple[object, tuple[torch.Tensor, ...], frozenset[str]]] = {}
        self._outputs: tuple[torch.Tensor, ...] = ()  # the last replay's (_round)
        self.num_replays = 0
        self.num_ahead = 0  # replays of rounds built on the device from a verify not yet read (run_ahead)

    def bucket_for(self, num_reqs: int) -> int | None:
        return next((b for b in self.buckets if b >= num_reqs), None)

    def _round(self, bucket: int) -> tuple[torch.Tensor, ...]:
        """([bucket, k] draft token ids (target vocabulary), then each step's logits input [bucket, H], steps
        0 .. k - 1). The logits inputs are tensors the round computes anyway: keeping them as outputs costs no
        kernel, and the draft oracle reads them after a replay (logits_inputs)."""
        head, kv = self.proposer.head, self.proposer.kv_cache
        num_tokens = bucket * self.query_len
        md = self.extend.metadata(GraphShape(bucket, self.query_len), self.block_size)
        features = head.project_target_features(self.extend.hidden[:num_tokens])
        out = head(self.extend.input_ids[:num_tokens], features, md, kv, phase="eagle_extend", check_metadata=False)
        last = self.last_rows[:bucket]
        logits_inputs = [out.logits_input[last]]
        hidden, ids = out.hidden[last], self.proposer.argmax_target_ids(logits_inputs[0])
        drafts = [ids]
        for j, buffers in enumerate(self.steps, start=1):
            self._derive_step_metadata(buffers, bucket, j)
            md = buffers.metadata(GraphShape(bucket, 1), self.block_size)
            out = head(ids, hidden, md, kv, phase="eagle_step", check_metadata=False)
            logits_inputs.append(out.logits_input)
            hidden, ids = out.hidden, self.proposer.argmax_target_ids(out.logits_input)
            drafts.append(ids)
        return (torch.stack(drafts, dim=1), *logits_inputs)

    def _derive_step_metadata(self, buffers: StaticBuffers, bucket: int, step: int) -> None:
        """Step j's metadata from the catch-up's, on the device: a request whose last catch-up query sits at p
        queries p + j, sees p + j + 1 keys and writes the slot of p + j; a padding request (its last catch-up
        slot is -1) queries position 0, sees 1 key and writes nothing."""
        last = self.last_rows[:bucket]
        is_real = self.extend.slot_mapping[last] != PADDING_SLOT  # [bucket]
        positions = torch.where(is_real, self.extend.positions[last] + step, 0)  # [bucket]
        tables = self.extend.block_tables[:bucket]
        blocks = tables.gather(1, (positions // self.block_size)[:, None])[:, 0].to(torch.int64)
        slots = blocks * self.block_size + positions % self.block_size
        buffers.positions[:bucket].copy_(positions)
        buffers.slot_mapping[:bucket].copy_(torch.where(is_real, slots, PADDING_SLOT))
        buffers.seq_lens[:bucket].copy_(positions + 1)

    @torch.inference_mode()
    def capture(self) -> None:
        for bucket in sorted(self.buckets, reverse=True):
            self.extend.reset(GraphShape(bucket, self.query_len))
            for buffers in self.steps:
                buffers.reset(GraphShape(bucket, 1))
            if self.pool is None:  # off CUDA (Triton interpreter tests): rerun instead of replaying
                self._graphs[bucket] = (None, (), frozenset())
            else:
                with self.paths.collecting() as taken:
                    graph, outputs = capture_graph(lambda: self._round(bucket), self.pool, self.device)
                self._graphs[bucket] = (graph, outputs, frozenset(taken))

    def run(self, inp: RoundInput) -> torch.Tensor:  # [num_reqs, k], a view valid until the next replay
        n = inp.extend_md.num_reqs
        bucket = self.bucket_for(n)
        self.check_metadata(inp.extend_md, "eagle_extend")
        for j, md in enumerate(inp.step_mds, start=1):
            self.check_metadata(md, f"eagle_step_{j}")
        self.extend.load(GraphShape(bucket, self.query_len), inp.extend_input_ids, inp.extend_md, None)
        # Real rows get this round's features; padding rows keep earlier finite values (their outputs are dropped).
        self.extend.hidden.index_copy_(0, inp.real_rows, inp.new_features)
        outputs = self._replay(bucket)
        for j, (buffers, md) in enumerate(zip(self.steps, inp.step_mds), start=1):
            check_derived_step(buffers, md, f"eagle_step_{j}")
        return outputs[0][:n]

    def _replay(self, bucket: int) -> tuple[torch.Tensor, ...]:
        graph, outputs, paths = self._graphs[bucket]
        if graph is None:
            with torch.inference_mode():
                outputs = self._round(bucket)
        else:
            graph.replay()
            self.paths.record_all(paths)
        self.num_replays += 1
        self._outputs = outputs
        return outputs

    def logits_inputs(self, num_reqs: int) -> list[torch.Tensor]:
        """[k] the last replayed round's logits input of each step, [num_reqs, H] (its first rows): views valid until
        the next replay, in stream order after it (the draft oracle computes the step logits from them)."""
        return [x[:num_reqs] for x in self._outputs[1:]]

    @torch.inference_mode()
    def run_ahead(self, inp: AheadRoundInput) -> torch.Tensor:  # [num_reqs, k], valid until the next replay
        """The next round from a verify's outputs still on the device (the host has not read them): request r
        accepted a drafts, so its catch-up covers positions newest .. newest + a (the verify's first a + 1
        query rows), fed the verify's output tokens 0 .. a; k - a padding queries lead. Built here with device
        ops, as build_round_input builds it on the host (the debug invariants compare the two)."""
        n, q, bs = len(inp.newest_positions), self.query_len, self.block_size
        bucket = self.bucket_for(n)
        buf = self.extend
        width = inp.block_tables.shape[1]
        buf.block_tables[:n, :width].copy_(inp.block_tables, non_blocking=True)
        num_pad = (q - 1) - inp.num_accepted  # [n]
        src = self.query_index[None, :] - num_pad[:, None]  # [n, q] verify row feeding each query, < 0 = padding
        is_real = src >= 0
        row = src.clamp_min(0)
        positions = inp.newest_positions[:, None] + src  # [n, q]
        blocks = inp.block_tables.gather(1, positions // bs).to(torch.int64)
        slots = torch.where(is_real, blocks * bs + positions % bs, PADDING_SLOT)
        num_tokens = n * q
        buf.input_ids[:num_tokens].copy_(torch.where(is_real, inp.verify_token_ids.gather(1, row), 0).flatten())
        buf.positions[:num_tokens].copy_(positions.flatten())
        buf.slot_mapping[:num_tokens].copy_(slots.flatten())
        buf.seq_lens[:n].copy_(inp.newest_positions + inp.num_accepted + 1)
        buf.hidden[:num_tokens].copy_(inp.target_features[(self.request_index[:n, None] * q + row).flatten()])
        buf.pad_from(GraphShape(bucket, q), n)
        self.num_ahead += 1
        return self._replay(bucket)[0][:n]


def check_ahead_round(buffers: StaticBuffers, reference: RoundInput, rows_of_request: tuple[int, ...],
                      where: str = "eagle_extend (ahead)") -> None:
    """Debug invariants: the catch-up built on the device equals the host's reference build, for the requests
    in `reference` (rows `rows_of_request` of the device batch)."""
    md = reference.extend_md
    q = md.max_query_len
    token_rows = torch.tensor([b * q + j for b in rows_of_request for j in range(q)], device=buffers.positions.device)
    request_rows = torch.tensor(rows_of_request, device=buffers.positions.device)
    derived = {"positions": buffers.positions[token_rows].tolist(),
               "slot_mapping": buffers.slot_mapping[token_rows].tolist(),
               "seq_lens": buffers.seq_lens[request_rows].tolist(), "input_ids": buffers.input_ids[token_rows].tolist()}
    expected = {"positions": list(md.positions_cpu), "slot_mapping": list(md.slot_mapping_cpu),
                "seq_lens": list(md.seq_lens_cpu), "input_ids": reference.extend_input_ids.tolist()}
    for name, values in derived.items():
        if values != expected[name]:
            raise InvariantViolation(f"{where}: built on the device {name} {values[:8]}, the reference build says "
                                     f"{expected[name][:8]}")
    hidden = buffers.hidden[token_rows][reference.real_rows]
    if not torch.equal(hidden, reference.new_features.to(hidden.dtype)):
        raise InvariantViolation(f"{where}: the device catch-up fed other target features than the reference")


def check_derived_step(buffers: StaticBuffers, md: AttentionMetadata, where: str,
                       rows_of_request: tuple[int, ...] | None = None) -> None:
    """Debug invariants: what the graph derived for a draft step equals the host's reference metadata (for the
    requests in `md`, rows `rows_of_request` of the replayed batch; default: its first rows)."""
    rows = torch.tensor(rows_of_request if rows_of_request is not None else range(md.num_reqs),
                        device=buffers.positions.device)
    derived = {"positions": buffers.positions[rows].tolist(), "slot_mapping": buffers.slot_mapping[rows].tolist(),
               "seq_lens": buffers.seq_lens[rows].tolist()}
    expected = {"positions": list(md.positions_cpu), "slot_mapping": list(md.slot_mapping_cpu),
                "seq_lens": list(md.seq_lens_cpu)}
    for name, values in derived.items():
        if values != expected[name]:
            raise InvariantViolation(f"{where}: the round graph derived {name} {values[:8]}, the reference "
                                     f"metadata says {expected[name][:8]}")

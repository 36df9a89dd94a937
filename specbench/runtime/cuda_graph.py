"""CUDA graphs for fixed-shape forwards: target decode/verify and draft-decode steps.

One graph per (batch-size bucket, query tokens per request). Every replay first checks the real batch's
metadata on the host (debug invariants), then copies it into the static buffers the graph was captured
on; padding requests get slot -1 (their K/V is never stored) and see only their own keys. The metadata of
each draft step is therefore rebuilt into the buffers before its replay: a graph never runs on the
previous step's positions, slots or visible lengths (seed 004), and nothing edits the buffers in place
after capture (seed 003). A tree verify runner (`is_tree`) also holds the tree mask and its packed words as static
buffers (TreeBuffers), reloaded the same way before every replay.
"""

from __future__ import annotations

import dataclasses
import gc
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from specbench.attention.metadata import AttentionMetadata
from specbench.attention.metadata import TreeMask
from specbench.execution_paths import PathRecorder

# Batch-size buckets: every size up to 4, then powers of two to 16, then steps of 16.
_SMALL_BUCKETS = (1, 2, 3, 4, 8, 16)
# The captured max_seq_len only sizes the attention's key splits; longer sequences stay correct.
CAPTURE_SEQ_LEN = 4096


def batch_buckets(max_num_reqs: int) -> tuple[int, ...]:
    sizes = [b for b in _SMALL_BUCKETS if b < max_num_reqs]
    sizes += range(32, max_num_reqs, 16)
    return tuple(sorted(set(sizes) | {max_num_reqs}))


# forward(input_ids [num_tokens], md, hidden [num_tokens, H] or None) -> tensors with num_tokens rows
GraphForward = Callable[[torch.Tensor, AttentionMetadata, torch.Tensor | None], tuple[torch.Tensor, ...]]


@dataclass(frozen=True)
class GraphPlan:
    """What every CUDA-graph runner of one engine is sized for."""

    max_num_reqs: int
    max_blocks_per_req: int  # ceil((max_model_len + k_max + 1) / block_size)
    max_positions: int  # RoPE tables are grown to this before capture
    block_size: int
    device: torch.device


@dataclass(frozen=True, slots=True)
class GraphShape:
    num_reqs: int  # the bucket: requests in the captured batch, padding included
    query_len: int  # query tokens per request (1 = decode / draft step, k + 1 = verify)


class StaticBuffers:
    """Device buffers every graph of one runner reads (sized for the largest bucket and query length)."""

    def __init__(self, max_num_reqs: int, max_query_len: int, max_blocks: int, hidden_size: int | None,
                 hidden_dtype: torch.dtype, device: torch.device, block_tables: torch.Tensor | None = None,
                 max_positions: int = CAPTURE_SEQ_LEN, is_tree: bool = False) -> None:
        # The captured max_seq_len: never past the positions the RoPE tables were grown to before capture
        # (growing a table inside a capture would copy from the host, which a capture forbids).
        self.capture_seq_len = min(CAPTURE_SEQ_LEN, max_positions)
        max_tokens = max_num_reqs * max_query_len
        self.input_ids = torch.zeros(max_tokens, dtype=torch.int64, device=device)  # [max_tokens]
        self.positions = torch.zeros(max_tokens, dtype=torch.int64, device=device)  # [max_tokens]
        self.slot_mapping = torch.full((max_tokens,), -1, dtype=torch.int64, device=device)  # [max_tokens]
        self.query_start_loc = torch.zeros(max_num_reqs + 1, dtype=torch.int32, device=device)  # [max_reqs + 1]
        self.seq_lens = torch.ones(max_num_reqs, dtype=torch.int32, device=device)  # [max_reqs]
        # [max_reqs, max_blocks]; `block_tables` shares another buffer set's (phases of one round read one table)
        self.owns_block_tables = block_tables is None
        self.block_tables = (torch.zeros(max_num_reqs, max_blocks, dtype=torch.int32, device=device)
                             if block_tables is None else block_tables)
        # [max_tokens, hidden] the EAGLE head's input feature; None for plain LMs
        self.hidden = None if hidden_size is None else torch.zeros(max_tokens, hidden_size, dtype=hidden_dtype,
                                                                    device=device)
        # [max_reqs + 1] cu_num_query_tokens of a uniform batch, one row per query length
        self._uniform_cu = {q: torch.arange(0, (max_num_reqs + 1) * q, q, dtype=torch.int32, device=device)
                            for q in range(1, max_query_len + 1)}
        self._cu_shape: GraphShape | None = None  # query_start_loc holds this shape's uniform prefix sums
        # Tree verify graphs (attention/tree_mask.py, verify layout: each request's tree rows are its queries): the
        # mask and its packed words are static inputs too, filled before every replay. None for causal graphs.
        self.tree = TreeBuffers(max_tokens, max_query_len, device) if is_tree else None

    def _set_uniform_cu(self, shape: GraphShape) -> None:
        if shape != self._cu_shape:
            self.query_start_loc[: shape.num_reqs + 1].copy_(self._uniform_cu[shape.query_len][: shape.num_reqs + 1])
            self._cu_shape = shape

    def reset(self, shape: GraphShape) -> None:
        """A valid batch of padding requests: what warm-up and capture run on (they never write real KV)."""
        num_tokens = shape.num_reqs * shape.query_len
        self._set_uniform_cu(shape)
        self.seq_lens[: shape.num_reqs].fill_(shape.query_len)
        self.slot_mapping[:num_tokens].fill_(-1)
        self.positions[:num_tokens].zero_()
        if self.tree is not None:
            self.tree.pad(shape, 0)

    def metadata(self, shape: GraphShape, block_size: int) -> AttentionMetadata:
        num_tokens = shape.num_reqs * shape.query_len
        md = AttentionMetadata(
            positions=self.positions[:num_tokens],
            slot_mapping=self.slot_mapping[:num_tokens],
            query_start_loc=self.query_start_loc[: shape.num_reqs + 1],
            seq_lens=self.seq_lens[: shape.num_reqs],
            block_tables=self.block_tables[: shape.num_reqs],
            block_size=block_size,
            max_query_len=shape.query_len,
            max_seq_len=self.capture_seq_len,
            # Host views are meaningless for a graph's buffers: replays check the real batch's metadata instead.
            query_start_loc_cpu=(),
            seq_lens_cpu=(),
            positions_cpu=(),
            slot_mapping_cpu=(),
            block_tables_cpu=(),
        )
        return md if self.tree is None else dataclasses.replace(md, tree=self.tree.mask_of(shape))

    def load(self, shape: GraphShape, input_ids: torch.Tensor | None, md: AttentionMetadata,
             hidden: torch.Tensor | None) -> None:
        """Copy one batch in; padding requests [md.num_reqs, shape.num_reqs) write nothing and see Q keys.

        `input_ids` None: the graph computes them itself (a draft step feeds the previous step's tokens).
        """
        n = md.num_reqs
        num_tokens = n * shape.query_len
        if input_ids is not None:
            self.input_ids[:num_tokens].copy_(input_ids, non_blocking=True)
        self.positions[:num_tokens].copy_(md.positions, non_blocking=True)
        self.slot_mapping[:num_tokens].copy_(md.slot_mapping, non_blocking=True)
        self.seq_lens[:n].copy_(md.seq_lens, non_blocking=True)
        if self.owns_block_tables:
            width = md.block_tables.shape[1]
            self.block_tables[:n, :width].copy_(md.block_tables, non_blocking=True)
        if hidden is not None:
            self.hidden[:num_tokens].copy_(hidden, non_blocking=True)
        if self.tree is not None:
            assert md.tree is not None, "a tree graph replays tree verifies only"
            self.tree.load(md.tree.mask)
        self.pad_from(shape, n)

    def pad_from(self, shape: GraphShape, n: int) -> None:
        """Requests [n, shape.num_reqs) become padding: they write nothing and see their own Q keys."""
        q = shape.query_len
        num_tokens, padded_tokens = n * q, shape.num_reqs * q
        self._set_uniform_cu(shape)
        if padded_tokens > num_tokens:
            self.slot_mapping[num_tokens:padded_tokens].fill_(-1)
            self.positions[num_tokens:padded_tokens].zero_()
            self.seq_lens[n : shape.num_reqs].fill_(q)
            if self.tree is not None:
                self.tree.pad(shape, n)


class TreeBuffers:
    """The static tree inputs of a tree verify graph: the bool mask (the torch reference's input, CPU reruns) and
    its packed words (the Triton kernel's). Padding requests see their own rows causally, as in a chain graph."""

    def __init__(self, max_tokens: int, max_query_len: int, device: torch.device) -> None:
        from specbench.kernels.tree_attention import pack_tree_mask  # imports triton: tree graphs only

        self._pack = pack_tree_mask
        self.max_query_len = max_query_len
        self.mask = torch.zeros(max_tokens, max_query_len, dtype=torch.bool, device=device)  # [max_tokens, max_q]
        self._causal = torch.ones(max_query_len, max_query_len, dtype=torch.bool, device=device).tril()  # [q, q]
        num_words = -(-max_query_len // 32)  # pack_tree_mask's words per row
        self.packed = torch.zeros(max_tokens, num_words, dtype=torch.int32, device=device)  # [max_tokens, num_words]

    def mask_of(self, shape: GraphShape) -> TreeMask:
        """The TreeMask a graph of `shape` is captured on: views of the static buffers."""
        num_tokens, q = shape.num_reqs * shape.query_len, shape.query_len
        return TreeMask(mask=self.mask[:num_tokens, :q], mask_cpu=torch.zeros(0, q, dtype=torch.bool),
                        num_tree_rows=(q,) * shape.num_reqs, is_verify=True, packed=self.packed[:num_tokens])

    def load(self, mask: torch.Tensor) -> None:
        """`mask` [num_tokens, q] bool on the device: a real tree verify's (verify layout, every request q rows)."""
        num_tokens, width = mask.shape
        if width > self.max_query_len:
            raise ValueError(f"tree mask of {width} rows in a graph captured for {self.max_query_len}")
        self.mask[:num_tokens].zero_()
        self.mask[:num_tokens, :width].copy_(mask, non_blocking=True)
        self.packed[:num_tokens].copy_(self._pack(self.mask[:num_tokens]))

    def pad(self, shape: GraphShape, n: int) -> None:
        """Requests [n, shape.num_reqs) of a `shape` batch become padding: each sees its own rows causally."""
        q, num_padding = shape.query_len, shape.num_reqs - n
        if num_padding <= 0:
            return
        rows = slice(n * q, shape.num_reqs * q)
        self.mask[rows].zero_()
        self.mask[rows, :q].copy_(self._causal[:q, :q].repeat(num_padding, 1))
        self.packed[rows].copy_(self._pack(self.mask[rows]))


def capture_graph(fn: Callable[[], tuple[torch.Tensor, ...]], pool, device: torch.device):
    """(graph, static outputs) of `fn`, after a warm-up on a side stream that compiles kernels and settles the
    allocator outside the capture."""
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn()
    torch.cuda.current_stream(device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    # Garbage collection inside a capture can destroy another engine's graphs and free their memory, which a
    # capturing stream forbids (seen on an H200 when one process builds many engines: check, selftest); the
    # builder collects once before capturing. A host sync inside a capture invalidates it with an error that
    # names no operation; sync debug mode raises at the offending call instead.
    gc.disable()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Synchronization debug mode is a prototype")
        torch.cuda.set_sync_debug_mode("error")
        try:
            with torch.cuda.graph(graph, pool=pool):
                outputs = fn()
        finally:
            torch.cuda.set_sync_debug_mode("default")
            gc.enable()
    return graph, outputs


@dataclass(frozen=True)
class _Captured:
    graph: torch.cuda.CUDAGraph | None  # None off CUDA: `rerun` stands in for the replay
    outputs: tuple[torch.Tensor, ...]  # the graph's static outputs, [padded_tokens, ...] each
    rerun: Callable[[], tuple[torch.Tensor, ...]] | None
    paths: frozenset[str]  # execution paths the captured forward took (a rerun records its own as it runs)


class CudaGraphRunner:
    """Captures `forward` per GraphShape and replays it for batches whose requests all have one query length."""

    def __init__(
        self,
        forward: GraphForward,
        plan: GraphPlan,
        *,
        name: str,  # phase name used by the debug invariants, e.g. "verify", "draft_step"
        check_metadata: Callable[[AttentionMetadata, str], None],  # the attention backend's begin_forward
        paths: PathRecorder,  # the engine's: each replay records the paths its graph's forward took
        max_query_len: int,
        hidden_size: int | None = None,
        hidden_dtype: torch.dtype = torch.bfloat16,
        is_tree: bool = False,  # graphs of tree verifies (md.tree, verify layout) only; else causal forwards only
    ) -> None:
        self.forward = forward
        self.is_tree = is_tree
        self.name = name
        self.check_metadata = check_metadata
        self.paths = paths
        self.buckets = batch_buckets(plan.max_num_reqs)
        self.max_query_len = max_query_len
        self.block_size = plan.block_size
        self.device = device = plan.device
        self.buffers = StaticBuffers(plan.max_num_reqs, max_query_len, plan.max_blocks_per_req, hidden_size,
                                     hidden_dtype, device, max_positions=plan.max_positions, is_tree=is_tree)
        # Off CUDA (Triton interpreter tests) "replay" reruns forward on the static buffers: same buffer
        # logic, no capture.
        self.is_graph = device.type == "cuda"
        self.pool = torch.cuda.graph_pool_handle() if self.is_graph else None
        self._graphs: dict[GraphShape, _Captured] = {}
        self.num_replays = 0

    def shape_for(self, md: AttentionMetadata) -> GraphShape | None:
        """The graph a batch replays on, or None when it must run eagerly (ragged, too big, never captured)."""
        n, q = md.num_reqs, md.max_query_len
        if n == 0 or q > self.max_query_len or md.num_tokens != n * q or n > self.buckets[-1]:
            return None
        if (md.tree is not None) != self.is_tree or (md.tree is not None and not md.tree.is_verify):
            return None  # a causal graph never runs a tree forward, nor a tree graph a causal or draft-step one
        if md.block_tables.shape[1] > self.buffers.block_tables.shape[1]:
            return None
        bucket = next(b for b in self.buckets if b >= n)
        shape = GraphShape(bucket, q)
        return shape if shape in self._graphs else None

    def capture(self, query_len: int) -> None:
        """Capture every bucket at this query length, largest first so smaller ones reuse its pool memory."""
        for bucket in sorted(self.buckets, reverse=True):
            shape = GraphShape(bucket, query_len)
            if shape not in self._graphs:
                self._capture(shape)

    def recapture(self) -> None:
        """Capture again every query length captured so far, through the forward as it is now (a test harness that
        bent the forward after the engine was built: specbench.faults.path_mutant.recapture_target_graphs)."""
        query_lens = sorted({shape.query_len for shape in self._graphs})
        self._graphs.clear()
        # A fresh pool: the cleared graphs were the old pool's last users, and capturing into a pool nothing uses
        # any more trips the caching allocator's assert (`use_count > 0`, seen on the H100 switching MoE sets).
        if self.is_graph:
            self.pool = torch.cuda.graph_pool_handle()
        for query_len in query_lens:
            self.capture(query_len)

    @torch.inference_mode()
    def _capture(self, shape: GraphShape) -> None:
        buf = self.buffers
        num_tokens = shape.num_reqs * shape.query_len
        buf.reset(shape)
        md = buf.metadata(shape, self.block_size)
        hidden = None if buf.hidden is None else buf.hidden[:num_tokens]
        input_ids = buf.input_ids[:num_tokens]
        if not self.is_graph:
            self._graphs[shape] = _Captured(None, (), lambda: self.forward(input_ids, md, hidden), frozenset())
            return
        with self.paths.collecting() as taken:
            graph, outputs = capture_graph(lambda: self.forward(input_ids, md, hidden), self.pool, self.device)
        self._graphs[shape] = _Captured(graph, outputs, None, frozenset(taken))

    def replay(self, shape: GraphShape, input_ids: torch.Tensor, md: AttentionMetadata,
               hidden: torch.Tensor | None = None, where: str | None = None) -> tuple[torch.Tensor, ...]:
        """Outputs are views of the graph's static outputs, valid until the next replay of this runner."""
        self.check_metadata(md, where or self.name)
        captured = self._graphs[shape]
        self.buffers.load(shape, input_ids, md, hidden)
        if captured.graph is not None:
            captured.graph.replay()
            self.paths.record_all(captured.paths)
            outputs = captured.outputs
        else:
            with torch.inference_mode():
                outputs = captured.rerun()
        self.num_replays += 1
        return tuple(out[: md.num_tokens] for out in outputs)

    @property
    def num_graphs(self) -> int:
        return len(self._graphs)

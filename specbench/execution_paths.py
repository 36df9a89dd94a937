"""The engine's execution paths, each declared once, and the per-engine record of which ones a run took.

A path is a way the engine may compute the same result: a fast path and its slow alternative are both paths.
A path is *production* on a device when a default run there takes it (`scripts/bench_gpu.py` and a default
`specbench sweep`: EngineConfig defaults resolved on that device): on CPU async scheduling with the torch
attention, verifier and layers; on CUDA also CUDA graphs, rounds drafted ahead, fused projections, the Triton
verifier and attention. The tree paths (`eagle_topk` > 1, opt-in as in SGLang) count as production where a tree run
takes them by default (the selftest's tree rows run them). `specbench selftest` fails when a production path of
its device went unexercised by the engines under test (selftest/coverage.py), so a new fast path cannot land
without the sentinel reaching it: add it here (or, for a path a proposer's own code decides, to its class's
`execution_paths`), record it where the engine decides to take it, and make the selftest reach it.
speculation/registry.py execution_paths() lists every path.

Recording happens at host-side decision points only (a set add; never a device sync). A forward captured in a CUDA
graph records while it is captured, into the graph's own set; each replay records that set (runtime/cuda_graph.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from specbench.errors import SpecbenchError

DEVICE_CLASSES = ("cpu", "cuda")


@dataclass(frozen=True)
class MethodGroup:
    """The methods whose proposer class declares one capability (speculation/capabilities.py). This leaf sits below
    the proposers, so a path names the group and speculation/registry.py resolves it from the registered classes."""

    capability: str  # the capability interface's name (speculation/registry.py binds it to the class)


@dataclass(frozen=True)
class ExecutionPath:
    name: str  # "<area>.<variant>", e.g. "eagle.round_graph"
    description: str  # one line: what runs, and where in the code
    production_on: tuple[str, ...]  # device classes (DEVICE_CLASSES) where a default run takes it; () = opt-in only
    # Methods whose engines can take it (EngineConfig.method values); () = every method; a MethodGroup until
    # speculation/registry.py resolves it. In a proposer class's `execution_paths` left (): the registry fills in the
    # methods whose class is the declaring class or a subclass of it.
    methods: tuple[str, ...] | MethodGroup = ()
    # Only a CUDA device reaches it in the selftest: the engine captures graphs only on CUDA (tests/engine and
    # tests/eagle replay the graph runners on CPU by capturing by hand), flashinfer runs on CUDA only.
    needs_cuda: bool = False
    # A target kind only whose engines can take it ("" = every target): production_paths counts it only where a run
    # included such a target (the selftest's hybrid target: selftest/tiny_hybrid.py).
    target_kind: str = ""
    # The pip extra (extras.py) an engine needs to take it at all: where it is not installed, no run takes the path,
    # so it is production nowhere (the selftest skips the rows that reach it, saying so).
    extra: str = ""


HYBRID = "hybrid"  # the target kind of models with recurrent-state layers (Qwen3-Next's Gated DeltaNet)
MOE = "moe"  # the target kind of models with MoE layers (the selftest's window + MoE target)
MAMBA2 = "mamba2"  # the target kind of hybrids whose recurrent layers are Mamba-2 mixers (Bamba)
SPECULATIVE = MethodGroup("Proposer")  # every method with a proposer
DRAFTS_AHEAD = MethodGroup("DraftsAhead")
DRAFTS_TREES = MethodGroup("DraftsTrees")


def proposer_path(method: str) -> str:
    """The path every drafted round of `method` records (speculation/registry.py declares one per registered method)."""
    return f"proposer.{method}"


# The engine's own paths, in two sections; a proposer class declares the paths its own code decides (its
# `execution_paths`), and speculation/registry.py lists all of them between the two: LOOP_PATHS, one
# proposer.<method> per registered method, the classes' paths, FORWARD_PATHS.
LOOP_PATHS: tuple[ExecutionPath, ...] = (
    # ---- the step loop -------------------------------------------------------------------------------------------
    ExecutionPath("decode.overlap", "plain decode step launched before the previous one is read back "
                  "(engine/step_loop.py)", ("cpu", "cuda"), ("none",)),
    ExecutionPath("decode.sync", "plain decode step read back before the next is scheduled (engine/step_loop.py; "
                  "--no-async-scheduling, or a speculative batch with no drafts at the context limit)", ()),
    ExecutionPath("spec.sync_round", "speculative round read back before the next is drafted (engine/step_loop.py)",
                  ("cpu", "cuda"), SPECULATIVE),
    ExecutionPath("eagle.ahead", "EAGLE round drafted on the device from a verify not read back yet "
                  "(engine/step_loop.py, speculation/drafters/eagle/ahead.py)", ("cuda",), DRAFTS_AHEAD,
                  needs_cuda=True),
    ExecutionPath("spec.tree_round", "tree-drafted round (eagle_topk > 1), synchronous: no drafting ahead, draft "
                  "steps eager; the tree verify replays graph.verify_tree when captured (engine/tree_round.py)",
                  ("cpu", "cuda"), DRAFTS_TREES),
    ExecutionPath("verify.tree", "tree verification, torch reference walk (speculation/verify/tree.py)",
                  ("cpu", "cuda"), DRAFTS_TREES),
    ExecutionPath("tree.device_layout", "tree verify input laid out on the device from the drafters' uniform trees, "
                  "no host read (engine/tree_inputs.py build_uniform_tree_verify_input)", ("cpu", "cuda"),
                  DRAFTS_TREES),
    ExecutionPath("preemption", "running requests preempted for KV and recomputed (engine/scheduler.py)",
                  ("cpu", "cuda")),
    # Opt-in (--chunked-prefill); the selftest's chunked scenario reaches both (selftest/chunked.py).
    ExecutionPath("prefill.chunked_mixed", "prompt chunks and decode/verify rows in one eager target forward "
                  "(--chunked-prefill; engine/mixed_step.py, Scheduler.schedule_mixed)", ()),
    ExecutionPath("prefill.chunk_partial", "a prompt chunk that is not its prompt's last: KV (and features, prompt "
                  "logprobs) only, no token (--chunked-prefill; engine/mixed_step.py)", ()),
    ExecutionPath("prefix.register", "full blocks of committed KV registered in the prefix cache "
                  "(engine/prefix_reuse.py)", ("cpu", "cuda")),
    ExecutionPath("prefix.hit", "a request admitted on cached prefix blocks, prefilling only the rest "
                  "(engine/prefix_reuse.py)", ("cpu", "cuda")),
    ExecutionPath("prefix.evict", "a cached block no request holds evicted for a fresh one (kv/prefix_cache.py, "
                  "recorded by engine/prefix_reuse.py)", ("cpu", "cuda")),
)

FORWARD_PATHS: tuple[ExecutionPath, ...] = (
    # ---- hybrid targets (recurrent-state layers): production where a hybrid target runs (the selftest's does) ----
    ExecutionPath("hybrid.state_write", "recurrent-state layers write the final state of committed tokens (prefill, "
                  "prompt chunks) into the requests' slots (engine/state_attach.py, recurrent/gated_delta_net.py, "
                  "recurrent/mamba2_mixer.py)",
                  ("cpu", "cuda"), target_kind=HYBRID),
    ExecutionPath("hybrid.state_commit", "a verify keeps each position's recurrent state; the verifier's accepted "
                  "count picks the one each slot takes (recurrent/state_cache.py commit)", ("cpu", "cuda"),
                  target_kind=HYBRID),
    ExecutionPath("hybrid.tree_verify", "a tree round's verify through the Gated DeltaNet layers: each node's state "
                  "continues its parent's, level by level (recurrent/tree_verify.py); the slot takes the accepted "
                  "path's last node's (engine/state_attach.py commit_tree_states)", ("cpu", "cuda"), DRAFTS_TREES,
                  target_kind=HYBRID),
    # The default on CUDA (--recurrent-kernels auto): the CUDA selftest's hybrid rows run it.
    ExecutionPath("hybrid.triton_verify", "uniform verify rows (plain decode, chain verifies: the rows CUDA graphs "
                  "replay) through our fused conv and gated-delta-rule kernels, two launches a layer, every "
                  "position's state kept, the layer's projections as gemv kernels (kernels/gated_delta_verify.py, "
                  "models/recurrent_kernels.py)", ("cuda",), target_kind=HYBRID),
    # Opt-in (--recurrent-kernels fla, CUDA with fla-core installed; auto takes our triton kernels instead).
    ExecutionPath("hybrid.fla_chunk", "committed rows (prefill, prompt chunks) of a forward's requests through "
                  "fla-core's chunk_gated_delta_rule, one varlen call (recurrent/fla_kernels.py)", (),
                  needs_cuda=True, target_kind=HYBRID),
    ExecutionPath("hybrid.fla_recurrent", "verify rows (plain decode, k + 1 positions) through fla-core's "
                  "fused_recurrent_gated_delta_rule over the batch, one call per position chaining the state "
                  "(recurrent/fla_kernels.py)", (), needs_cuda=True, target_kind=HYBRID),
    # Mamba-2 mixers (recurrent/mamba2_mixer.py): production where a Mamba-2 target runs (the selftest's Bamba row)
    ExecutionPath("hybrid.mamba2_verify", "Mamba-2 mixers run verify rows (plain decode, k + 1 positions) through "
                  "the per-token SSD scan, keeping each position's conv and SSM state for the commit "
                  "(recurrent/mamba2_mixer.py, recurrent/ssd_rule.py)", ("cpu", "cuda"), target_kind=MAMBA2),
    ExecutionPath("hybrid.mamba2_chunked", "Mamba-2 mixers run committed rows (prefill, prompt chunks) through the "
                  "chunked SSD scan, the final state into the slot (recurrent/mamba2_mixer.py)", ("cpu", "cuda"),
                  target_kind=MAMBA2),
    ExecutionPath("hybrid.snapshot_take", "the recurrent state after a registered block's last committed token kept "
                  "as that block's snapshot (recurrent/state_snapshots.py, engine/prefix_reuse.py register)",
                  ("cpu", "cuda"), target_kind=HYBRID),
    ExecutionPath("hybrid.snapshot_restore", "a prefix hit resumes the request's state slot from the snapshot of its "
                  "last hit block (engine/prefix_reuse.py admit)", ("cpu", "cuda"), target_kind=HYBRID),
    # ---- the target forward --------------------------------------------------------------------------------------
    ExecutionPath("target.eager", "target decode or verify forward run eagerly (engine/model_runner.py)",
                  ("cpu", "cuda")),
    ExecutionPath("graph.decode", "target plain decode step replayed from a CUDA graph (runtime/cuda_graph.py)",
                  ("cuda",), ("none",), needs_cuda=True),
    ExecutionPath("graph.verify", "target verify replayed from a CUDA graph (runtime/cuda_graph.py)", ("cuda",),
                  SPECULATIVE, needs_cuda=True),
    # The selftest's tree rows replay it on CUDA (a default engine captures the tree shape it is given).
    ExecutionPath("graph.verify_tree", "target tree verify replayed from a CUDA graph, tree mask and its packed "
                  "words as static buffers (runtime/cuda_graph.py TreeBuffers, engine/model_runner.py)", ("cuda",),
                  DRAFTS_TREES,
                  needs_cuda=True),
    # Hybrid targets' graphs (recurrent/graph_rows.py): their decode and uniform chain verifies, recorded beside
    # graph.decode / graph.verify; prefill, mixed, ragged and tree verifies and the fla kernels run eagerly. The
    # selftest's hybrid rows replay them on CUDA.
    ExecutionPath("graph.hybrid_decode", "hybrid target plain decode step replayed from a CUDA graph, the requests' "
                  "state slots a static buffer, padding on the scratch slot (recurrent/graph_rows.py, "
                  "engine/model_runner.py)", ("cuda",), ("none",), needs_cuda=True, target_kind=HYBRID),
    ExecutionPath("graph.hybrid_verify", "hybrid target uniform chain verify (every request k + 1 tokens) replayed "
                  "from a CUDA graph, kept states handed back to the commit (recurrent/graph_rows.py, "
                  "engine/model_runner.py)", ("cuda",), SPECULATIVE, needs_cuda=True, target_kind=HYBRID),
    # ---- layers (target, draft LM and EAGLE head alike) ----------------------------------------------------------
    ExecutionPath("layers.torch", "decoder block as torch projections, norms, RoPE and activation (models/llama.py)",
                  ("cpu",)),
    ExecutionPath("layers.fused_ops", "decoder block as torch projections with the Triton norm, RoPE and SiLU "
                  "kernels (models/layers.py; prefills, batches past 64 tokens)", ("cuda",)),
    ExecutionPath("proj.fused", "decoder block as fused gemv projections (biases in their epilogues; a MoE "
                  "layer's MLP half is its routing and expert kernels), attention from the qkv output: q/k norm + "
                  "RoPE + K/V store in one kernel where the heads are normed (models/decode_gemv.py, kernels/gemv.py, "
                  "kernels/qk_norm_rope.py)", ("cuda",)),
    ExecutionPath("proj.rope_store", "fused qkv projection (+ bias) that also rotates q/k and stores K/V "
                  "(models/decode_gemv.py, kernels/gemv_rope.py)", ("cuda",)),
    # The "grouped" MoE kernel set's (models/moe_kernel_sets.py): the few-token one opt-in (slower than gemv on the
    # H100); the prefill one also the default "auto" set's, production on CUDA where a MoE target ran (the
    # selftest's window + MoE target reaches it: its prefills batch its prompts past 64 tokens).
    ExecutionPath("moe.few_token_combine", "MoE experts of a 2-16 token batch (verify): grouped gate_up, then the "
                  "down projection with the routing-weighted sum over a token's experts in its epilogue "
                  "(kernels/moe_few_token.py, kernels/moe_down_combine.py)", ()),
    ExecutionPath("hybrid.gated_attention_fused", "a hybrid target's gated full-attention layer at 1 to 64 tokens "
                  "as four kernels: the fused qkv gemv, q/k (1 + weight) norms + partial RoPE + K/V store, attention, "
                  "o_proj with the output gate's sigmoid in its prologue (models/gated_attention_fused.py; opt-in, "
                  "SPECBENCH_PENDING_FUSIONS=on, until a GPU run: models/pending_fusions.py)", (), target_kind=HYBRID),
    ExecutionPath("moe.route_norm", "a MoE layer of 1 to 4 tokens on the fused path: its RMSNorm (and the "
                  "residual add before it) in the routing kernel's prologue, the normed rows written there for the "
                  "experts (models/moe_forward.py normed_moe_forward, kernels/moe_route.py RouterNorm; opt-in, "
                  "SPECBENCH_PENDING_FUSIONS=on, until a GPU run: models/pending_fusions.py)", (), target_kind=MOE),
    ExecutionPath("moe.prefill_grouped", "MoE experts of a batch past 64 tokens (prefill) as a grouped GEMM over "
                  "experts, slots sorted by expert in torch ops (kernels/moe_prefill.py)", ("cuda",), target_kind=MOE),
    # ---- attention and verification ------------------------------------------------------------------------------
    ExecutionPath("attention.torch", "paged attention, torch reference (attention/torch_ref.py)", ("cpu",)),
    ExecutionPath("attention.triton", "paged attention, Triton kernels (attention/triton_backend.py)", ("cuda",)),
    ExecutionPath("attention.flashinfer", "paged attention through flashinfer (attention/flashinfer_backend.py; "
                  "optional extra)", (), needs_cuda=True),
    ExecutionPath("attention.tree_torch", "tree-masked attention, torch reference (attention/tree_torch_ref.py; "
                  "tree verify and draft steps on the torch backend)", ("cpu",), DRAFTS_TREES),
    ExecutionPath("attention.tree_triton", "tree-masked attention of tree verifies and tree draft steps, Triton "
                  "bitmask kernel (kernels/tree_attention.py)", ("cuda",), DRAFTS_TREES),
    ExecutionPath("verify.torch", "verification / sampling, torch reference (speculation/verify/chain.py)", ("cpu",)),
    ExecutionPath("verify.triton", "verification / sampling, Triton kernel (kernels/verify.py)", ("cuda",)),
    ExecutionPath("verify.synthetic", "forced per-position acceptance, chains (speculation/synthetic/chain.py) and "
                  "trees per (depth, rank) (speculation/synthetic/tree.py; --synthetic-acceptance, not lossless)",
                  (), SPECULATIVE),
    # ---- grammar-constrained decoding (grammar/; per request, the `grammar` extra) ----------------------------
    # A default engine takes these for any constrained request (response_format, regex, tools): production wherever
    # the extra is installed; the selftest's constrained rows reach them (selftest/constrained.py).
    ExecutionPath("grammar.mask", "verify/sample rows masked by each constrained request's grammar, row i by its "
                  "state after the drafts before i (grammar/book.py)", ("cpu", "cuda"), extra="grammar"),
    # Its methods: those whose drafts are not sampled under the mask. The drafters that sample their own logits
    # (draft LM, EAGLE, MTP) mask each draft step (grammar/draft_mask.py), so a grammar never refuses their drafts
    # and no run of theirs cuts any; n-gram's lookups are cut.
    ExecutionPath("grammar.draft_cut", "a constrained request's drafts cut at the first token its grammar refuses, "
                  "before the verify (engine/step_runner.py)", ("cpu", "cuda"), ("ngram",), extra="grammar"),
    ExecutionPath("grammar.tree_mask", "a tree round's verify rows masked by each constrained request's grammar, "
                  "node i's by its state after the path from the root to i, walked depth first (grammar/book.py)",
                  ("cpu", "cuda"), DRAFTS_TREES, extra="grammar"),
    ExecutionPath("grammar.tree_draft_mask", "a constrained batch's tree drafted under the mask: each frontier "
                  "node's log-probs masked by its path's grammar state, eager (grammar/tree_draft_mask.py)",
                  ("cpu", "cuda"), DRAFTS_TREES, extra="grammar"),
    ExecutionPath("grammar.rebuild", "a constrained request's grammar state rebuilt from its committed output "
                  "tokens (after a preemption: grammar/book.py)", ("cpu", "cuda"), extra="grammar"),
    ExecutionPath("grammar.reasoning_end_in_drafts", "a reasoning end marker (</think>) inside the drafts: the "
                  "rows after it masked by the grammar (grammar/book.py)", ("cpu", "cuda"), SPECULATIVE,
                  extra="grammar"),
    # Never production: only an engine that broke its invariant (a mutant's) commits a token its grammar refuses.
    ExecutionPath("grammar.violation", "a committed token the grammar refused (only a mutant's engine): the "
                  "request decodes unconstrained from then on (grammar/book.py)", ()),
)


# The engine's own paths: what a recorder accepts unless the engine builder hands it every registered path.
PATHS: tuple[ExecutionPath, ...] = LOOP_PATHS + FORWARD_PATHS

PATH_NAMES: frozenset[str] = frozenset(p.name for p in PATHS)
assert len(PATH_NAMES) == len(PATHS), "each path is declared once"


def device_class(device_type: str) -> str:
    """'cpu' or 'cuda' for a torch device type."""
    if device_type not in DEVICE_CLASSES:
        raise SpecbenchError(f"no execution-path device class for {device_type!r}; supported: "
                             f"{', '.join(DEVICE_CLASSES)}")
    return device_type


def production_paths(device: str, methods: tuple[str, ...] | None, paths: tuple[ExecutionPath, ...],
                     target_kinds: tuple[str, ...] = (),
                     installed: frozenset[str] | None = None) -> tuple[ExecutionPath, ...]:
    """The production paths of `device` ('cpu' | 'cuda') that engines of `methods` can take (None: any method) on
    targets of the kinds `target_kinds` (a path of a target kind outside it is left out: no such target ran);
    `paths` with their method groups resolved (speculation/registry.py execution_paths()). `installed`: the extras
    installed here (extras.installed_extras(); None: all), a path of a missing one is production nowhere."""
    return tuple(p for p in paths if device in p.production_on
                 and (not p.target_kind or p.target_kind in target_kinds)
                 and (installed is None or not p.extra or p.extra in installed)
                 and (methods is None or not p.methods or set(p.methods) & set(methods)))


class PathRecorder:
    """Which registered paths one engine took since it was built or last reset. Owned by the engine; the builder
    hands it to the parts that decide paths (attention backend, runners, proposers)."""

    def __init__(self, names: frozenset[str] | None = None) -> None:
        # The engine builder hands it every registered path (speculation/registry.py path_names()), and then an
        # unregistered name is refused; a recorder outside an engine (a model or head run on its own, where nobody
        # reads coverage) takes any name.
        self._names = names
        self._taken: set[str] = set()
        self._sink = self._taken  # where record() adds: _taken, or a graph's set while it is being captured

    def record(self, name: str) -> None:
        if self._names is not None and name not in self._names:
            raise SpecbenchError(f"unregistered execution path {name!r}: declare it in execution_paths.py or "
                                 "on the proposer class that takes it")
        self._sink.add(name)

    def record_all(self, names: frozenset[str]) -> None:
        self._sink.update(names)

    @contextlib.contextmanager
    def collecting(self) -> Iterator[set[str]]:
        """Records made inside go to the yielded set only (a CUDA-graph capture: its replays record them)."""
        previous, self._sink = self._sink, set()
        try:
            yield self._sink
        finally:
            self._sink = previous

    def taken(self) -> frozenset[str]:
        return frozenset(self._taken)

    def reset(self) -> None:
        self._taken.clear()

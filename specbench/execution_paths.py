"""The engine's execution paths, each declared once, and the per-engine record of which ones a run took.

A path is a way the engine may compute the same result: a fast path and its slow alternative are both paths.
A path is *production* on a device when a default run there takes it (`scripts/bench_gpu.py` and a default
`specbench sweep`: EngineConfig defaults resolved on that device): on CPU async scheduling with the torch
attention, verifier and layers; on CUDA also CUDA graphs, rounds drafted ahead, fused projections, the Triton
verifier and attention. The tree paths (`eagle_topk` > 1, opt-in as in SGLang) count as production where a tree run
takes them by default (the selftest's tree rows run them). `specbench selftest` fails when a production path of its device went unexercised by the
engines under test (selftest/coverage.py), so a new fast path cannot land without the sentinel reaching it: add it
here, record it where the engine decides to take it, and make the selftest reach it.

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
class ExecutionPath:
    name: str  # "<area>.<variant>", e.g. "eagle.round_graph"
    description: str  # one line: what runs, and where in the code
    production_on: tuple[str, ...]  # device classes (DEVICE_CLASSES) where a default run takes it; () = opt-in only
    # Methods whose engines can take it (EngineConfig.method values); () = every method.
    methods: tuple[str, ...] = ()
    # Only a CUDA device reaches it in the selftest: the engine captures graphs only on CUDA (tests/engine and
    # tests/eagle replay the graph runners on CPU by capturing by hand), flashinfer runs on CUDA only.
    needs_cuda: bool = False


_SPEC = ("ngram", "draft", "eagle", "eagle3", "mtp")
_EAGLE = ("eagle", "eagle3", "mtp")  # the EAGLE round machinery (mtp runs the target's MTP module through it)
_TREE = ("draft", "eagle", "eagle3", "mtp")  # the methods that draft trees (speculation/capabilities.py DraftsTrees)

PATHS: tuple[ExecutionPath, ...] = (
    # ---- the step loop -------------------------------------------------------------------------------------------
    ExecutionPath("decode.overlap", "plain decode step launched before the previous one is read back "
                  "(engine/step_loop.py)", ("cpu", "cuda"), ("none",)),
    ExecutionPath("decode.sync", "plain decode step read back before the next is scheduled (engine/step_loop.py; "
                  "--no-async-scheduling, or a speculative batch with no drafts at the context limit)", ()),
    ExecutionPath("spec.sync_round", "speculative round read back before the next is drafted (engine/step_loop.py)",
                  ("cpu", "cuda"), _SPEC),
    ExecutionPath("eagle.ahead", "EAGLE round drafted on the device from a verify not read back yet "
                  "(engine/step_loop.py, speculation/eagle/ahead.py)", ("cuda",), _EAGLE, needs_cuda=True),
    ExecutionPath("spec.tree_round", "tree-drafted round (eagle_topk > 1), synchronous and eager: no drafting "
                  "ahead, no CUDA graphs for the tree verify or the draft steps (engine/tree_round.py)", ("cpu", "cuda"), _TREE),
    ExecutionPath("verify.tree", "tree verification, torch reference walk (speculation/tree_verifier.py)",
                  ("cpu", "cuda"), _TREE),
    ExecutionPath("preemption", "running requests preempted for KV and recomputed (engine/scheduler.py)",
                  ("cpu", "cuda")),
    # ---- proposers -----------------------------------------------------------------------------------------------
    ExecutionPath("proposer.ngram", "n-gram lookup drafts (speculation/ngram.py)", ("cpu", "cuda"), ("ngram",)),
    ExecutionPath("proposer.draft", "draft-LM drafts (speculation/draft_model.py)", ("cpu", "cuda"), ("draft",)),
    ExecutionPath("proposer.eagle", "EAGLE-1 head drafts (speculation/eagle/proposer.py)", ("cpu", "cuda"), ("eagle",)),
    ExecutionPath("proposer.eagle3", "EAGLE-3 head drafts (speculation/eagle/proposer.py)", ("cpu", "cuda"), ("eagle3",)),
    ExecutionPath("proposer.mtp", "the target checkpoint's MTP module drafts (speculation/mtp/)", ("cpu", "cuda"),
                  ("mtp",)),
    ExecutionPath("draft.eager_step", "draft-LM draft step run eagerly (speculation/draft_model.py)", ("cpu",),
                  ("draft",)),
    ExecutionPath("draft.step_graph", "draft-LM draft step replayed from a CUDA graph (speculation/draft_model.py)",
                  ("cuda",), ("draft",), needs_cuda=True),
    ExecutionPath("eagle.eager", "EAGLE round drafted phase by phase: catch-up, then each draft step "
                  "(speculation/eagle/proposer.py)", ("cpu", "cuda"), _EAGLE),
    ExecutionPath("eagle.step_graph", "EAGLE draft step of a phase-by-phase round replayed from a CUDA graph "
                  "(speculation/eagle/proposer.py)", ("cuda",), _EAGLE, needs_cuda=True),
    ExecutionPath("eagle.fused_head", "draft head's input side on the fused projections: EAGLE-3's fc and 2H-wide "
                  "first layer (paired norms, q/k/v + RoPE + K/V store), EAGLE-1's fc, MTP's eh_proj "
                  "(speculation/eagle/fused_head.py)", ("cuda",), _EAGLE),
    ExecutionPath("eagle.round_graph", "whole EAGLE round replayed from one CUDA graph, input built on the host "
                  "(speculation/eagle/round_graph.py)", ("cuda",), _EAGLE, needs_cuda=True),
    # ---- the target forward --------------------------------------------------------------------------------------
    ExecutionPath("target.eager", "target decode or verify forward run eagerly (engine/model_runner.py)",
                  ("cpu", "cuda")),
    ExecutionPath("graph.decode", "target plain decode step replayed from a CUDA graph (runtime/cuda_graph.py)",
                  ("cuda",), ("none",), needs_cuda=True),
    ExecutionPath("graph.verify", "target verify replayed from a CUDA graph (runtime/cuda_graph.py)", ("cuda",),
                  _SPEC, needs_cuda=True),
    # ---- layers (target, draft LM and EAGLE head alike) ----------------------------------------------------------
    ExecutionPath("layers.torch", "decoder block as torch projections, norms, RoPE and activation (models/llama.py)",
                  ("cpu",)),
    ExecutionPath("layers.fused_ops", "decoder block as torch projections with the Triton norm, RoPE and SiLU "
                  "kernels (models/layers.py; prefills, batches past 64 tokens)", ("cuda",)),
    ExecutionPath("proj.fused", "decoder block as fused gemv projections, attention from the qkv output "
                  "(models/decode_gemv.py, kernels/gemv.py)", ("cuda",)),
    ExecutionPath("proj.rope_store", "fused qkv projection that also rotates q/k and stores K/V "
                  "(models/decode_gemv.py, kernels/gemv_rope.py)", ("cuda",)),
    # ---- attention and verification ------------------------------------------------------------------------------
    ExecutionPath("attention.torch", "paged attention, torch reference (attention/torch_ref.py)", ("cpu",)),
    ExecutionPath("attention.triton", "paged attention, Triton kernels (attention/triton_backend.py)", ("cuda",)),
    ExecutionPath("attention.flashinfer", "paged attention through flashinfer (attention/flashinfer_backend.py; "
                  "optional extra)", (), needs_cuda=True),
    ExecutionPath("attention.tree_torch", "tree-masked attention, torch reference (attention/tree_torch_ref.py; "
                  "tree verify on CPU, every tree draft step)", ("cpu", "cuda"), _TREE),
    ExecutionPath("attention.tree_triton", "tree-masked verify attention, Triton bitmask kernel "
                  "(kernels/tree_attention.py)", ("cuda",), _TREE),
    ExecutionPath("verify.torch", "verification / sampling, torch reference (speculation/verifier.py)", ("cpu",)),
    ExecutionPath("verify.triton", "verification / sampling, Triton kernel (kernels/verify.py)", ("cuda",)),
    ExecutionPath("verify.synthetic", "forced per-position acceptance (speculation/synthetic.py; "
                  "--synthetic-acceptance, not lossless)", (), _SPEC),
)

PATH_NAMES: frozenset[str] = frozenset(p.name for p in PATHS)
assert len(PATH_NAMES) == len(PATHS), "each path is declared once"


def path(name: str) -> ExecutionPath:
    for p in PATHS:
        if p.name == name:
            return p
    raise SpecbenchError(f"unknown execution path {name!r}; registered: {', '.join(sorted(PATH_NAMES))}")


def device_class(device_type: str) -> str:
    """'cpu' or 'cuda' for a torch device type."""
    if device_type not in DEVICE_CLASSES:
        raise SpecbenchError(f"no execution-path device class for {device_type!r}; supported: "
                             f"{', '.join(DEVICE_CLASSES)}")
    return device_type


def production_paths(device: str, methods: tuple[str, ...] | None = None,
                     paths: tuple[ExecutionPath, ...] = PATHS) -> tuple[ExecutionPath, ...]:
    """The production paths of `device` ('cpu' | 'cuda') that engines of `methods` can take (None: any method)."""
    return tuple(p for p in paths if device in p.production_on
                 and (methods is None or not p.methods or set(p.methods) & set(methods)))


class PathRecorder:
    """Which registered paths one engine took since it was built or last reset. Owned by the engine; the builder
    hands it to the parts that decide paths (attention backend, runners, proposers)."""

    def __init__(self, names: frozenset[str] = PATH_NAMES) -> None:
        self._names = names
        self._taken: set[str] = set()
        self._sink = self._taken  # where record() adds: _taken, or a graph's set while it is being captured

    def record(self, name: str) -> None:
        if name not in self._names:
            raise SpecbenchError(f"unregistered execution path {name!r}: declare it in execution_paths.py")
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

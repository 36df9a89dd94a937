"""Assemble an engine from its config: device, models, proposer, KV pool, scheduler."""

from __future__ import annotations

import gc
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch

from specbench.attention import create_backend
from specbench.config import EngineConfig
from specbench.runtime.cuda_graph import GraphPlan
from specbench.engine.model_runner import TargetRunner
from specbench.models.recurrent_kernels import check_triton_recurrent_kernels
from specbench.recurrent.kernel_choice import (
    AUTO,
    FLA,
    TORCH,
    TRITON,
    resolve_recurrent_kernels,
    runs_recurrent_kernels,
)
from specbench.recurrent.graph_rows import new_graph_kept
from specbench.recurrent.state_cache import new_state_cache
from specbench.recurrent.state_snapshots import StateSnapshots
from specbench.engine.prefix_reuse import PrefixReuse, new_prefix_cache, prefix_caching_off_reason
from specbench.engine.scheduler import Scheduler
from specbench.engine.stop import StopChecker
from specbench.errors import SpecbenchError
from specbench.kv.block_manager import BlockManager
from specbench.kv.kv_cache import KVCache
from specbench.runtime.hooks import NO_HOOKS, PhaseHooks
from specbench.execution_paths import PathRecorder
from specbench.speculation.capabilities import (CapturesDraftGraphs, ConsumesTargetFeatures, HasDraftKV,
                                               ResumesFromCachedKV)
from specbench.speculation.registry import ProposerContext, create_proposer, path_names

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from specbench.models.loader import LoadedModel
    from specbench.speculation.capabilities import Proposer

_CPU_DEFAULT_KV_GB = 1.0


@dataclass
class EngineParts:
    device: torch.device
    dtype: torch.dtype
    target: LoadedModel
    tokenizer: PreTrainedTokenizerBase | None
    proposer: Proposer | None  # None: method none (plain decoding)
    runner: TargetRunner
    scheduler: Scheduler
    stop_checker: StopChecker
    num_kv_blocks: int
    kv_pool_note: str  # how the pool was sized, for the manifest
    attention_backend: str  # resolved name
    verifier: str  # resolved name
    verify_fn: Callable  # specbench.speculation.verify.chain.verify or its Triton twin
    paths: PathRecorder  # which execution paths this engine took (execution_paths.py); the backend records too
    hooks: PhaseHooks = NO_HOOKS  # what the engine and proposer call while building phase inputs
    prefix_caching: str = "off (option)"  # "on", or why not (engine/prefix_reuse.py prefix_caching_off_reason)
    cuda_graphs: str = "off"  # "on" or "off: <why>", for the manifest
    # the gated-delta-rule kernels a hybrid target's layers run (resolved: torch | fla); None: no recurrent layers
    recurrent_kernels: str | None = None


def _triton_usable(device: torch.device) -> bool:
    if device.type != "cuda":
        return False
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def resolve_kernel_choice(name: str, device: torch.device, what: str) -> str:
    """`auto` picks triton on CUDA when triton imports, else the torch reference.

    The attention backend may also be `flashinfer` (optional extra); where it cannot run, one stderr line says
    why and `auto`'s choice is used instead.
    """
    if name == "auto":
        return "triton" if _triton_usable(device) else "torch"
    supported = ("torch", "triton", "flashinfer") if what == "attention backend" else ("torch", "triton")
    if name not in supported:
        raise SpecbenchError(f"unknown {what} {name!r}; supported: auto, {', '.join(supported)}")
    if name == "flashinfer":
        return _flashinfer_or_fallback(device)
    return name


def _flashinfer_or_fallback(device: torch.device) -> str:
    from specbench.attention.flashinfer_backend import flashinfer_import_error

    fallback = resolve_kernel_choice("auto", device, "attention backend")
    if device.type != "cuda":
        print(f"flashinfer runs on CUDA only (device is {device.type}); using the {fallback} attention backend",
              file=sys.stderr)
        return fallback
    reason = flashinfer_import_error()
    if reason is not None:
        print(f"flashinfer is not importable ({reason}); using the {fallback} attention backend", file=sys.stderr)
        return fallback
    return "flashinfer"


def select_verifier(name: str) -> Callable:
    if name == "triton":
        from specbench.speculation.verify.chain_triton import verify_triton

        return verify_triton
    from specbench.speculation.verify.chain import verify

    return verify


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)  # EngineConfig checked the syntax: cpu, cuda or cuda:N
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SpecbenchError(f"device {name!r} requested but CUDA is not available")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise SpecbenchError(f"device {name!r}: there are {torch.cuda.device_count()} CUDA devices (cuda:0 ...)")
    return device


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    from specbench.models.loader import parse_dtype

    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return parse_dtype(name)


def size_kv_pool(config: EngineConfig, bytes_per_block: int, device: torch.device) -> tuple[int, str]:
    if config.num_kv_blocks is not None:
        return config.num_kv_blocks, f"num_kv_blocks={config.num_kv_blocks}"
    if config.kv_cache_gb is not None:
        budget = config.kv_cache_gb * 2**30
        note = f"kv_cache_gb={config.kv_cache_gb}"
    elif device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        # Leave (1 - utilization) of the card free, plus headroom for activations.
        budget = free - (1 - config.gpu_memory_utilization) * total - 2 * 2**30
        note = f"gpu_memory_utilization={config.gpu_memory_utilization} (free {free / 2**30:.1f} GiB)"
    else:
        budget = _CPU_DEFAULT_KV_GB * 2**30
        note = f"cpu default {_CPU_DEFAULT_KV_GB} GiB"
    num_blocks = int(budget // bytes_per_block)
    if num_blocks < 1:
        raise SpecbenchError(f"KV budget ({note}) leaves no room for a single KV block; raise --kv-cache-gb")
    return num_blocks, f"{note} -> {num_blocks} blocks of {config.block_size} tokens"


def releasable_windows(kinds: tuple, *, has_draft_kv: bool) -> tuple[int, ...]:
    """The scheduler's `kv_windows`: the target's windows when every layer is windowed and no proposer keeps a KV
    cache in the same block tables (a draft LM's, EAGLE head's or MTP module's catch-up queries lag the target's
    commit and its layers' windows are its own: they keep every block); else () (nothing released early)."""
    windows = tuple(k.kv_window for k in kinds)
    if has_draft_kv or not windows or None in windows:
        return ()
    return windows


def build_engine_parts(config: EngineConfig, hooks: PhaseHooks = NO_HOOKS) -> EngineParts:
    from specbench.models.loader import load_model
    from specbench.models.memory import check_kv_budget
    from specbench.models.tokenizer import eos_token_ids, load_tokenizer
    from specbench.models.vocab import check_tokenizer_fits

    device = resolve_device(config.device)
    check_kv_budget(config.kv_cache_gb, device)
    dtype = resolve_dtype(config.dtype, device)
    torch.manual_seed(config.seed)
    if config.synthetic_acceptance is not None and config.method == "none":
        raise SpecbenchError("--synthetic-acceptance needs a speculative method (its drafts are what gets accepted)")
    backend_name = resolve_kernel_choice(config.attention_backend, device, "attention backend")
    verifier_name = resolve_kernel_choice(config.verifier, device, "verifier")
    # refused here for any target: `--recurrent-kernels fla` where fla cannot run is a mistake even when this
    # target has no recurrent layers
    recurrent_name = resolve_recurrent_kernels(config.recurrent_kernels, device,
                                               is_fused_off=config.fused_kernels == "off")
    if recurrent_name == TRITON:
        check_triton_recurrent_kernels(device)
    paths = PathRecorder(path_names())  # the engine's paths and every registered proposer class's
    backend = create_backend(backend_name, paths, check_invariants=config.debug_invariants)
    target = load_model(
        config.target,
        dtype=dtype,
        device=device,
        attn_backend=backend,
        load_format=config.load_format,
        allow_pickle=config.allow_pickle,
        seed=config.seed,
        max_model_len=config.max_model_len,
        fused_kernels=config.fused_kernels,
        moe_kernels=config.moe_kernels,
        recurrent_kernels=recurrent_name,
    )
    if recurrent_name != TORCH and target.config.is_hybrid and not runs_recurrent_kernels(target.model):
        # a Mamba-2 hybrid (Bamba, Nemotron-H, Granite-4): its mixers run our torch SSD forms whatever is asked;
        # the manifest records what ran
        if config.recurrent_kernels != AUTO:
            print(f"--recurrent-kernels {config.recurrent_kernels} applies to Gated DeltaNet layers; "
                  f"{target.config.architecture}'s recurrent layers are Mamba-2 and run the torch forms",
                  file=sys.stderr)
        recurrent_name = TORCH
    tokenizer = load_tokenizer(config.tokenizer) if config.tokenizer else target.tokenizer
    check_tokenizer_fits(tokenizer, target.config.vocab_size, "target")
    ctx = ProposerContext(config=config, target=target, attn_backend=backend, dtype=dtype, device=device, hooks=hooks)
    proposer = create_proposer(ctx)

    target_spec = target.model.kv_cache_spec()
    draft_spec = proposer.kv_cache_spec() if isinstance(proposer, HasDraftKV) else None
    bytes_per_block = target_spec.bytes_per_block(config.block_size)
    if draft_spec is not None:
        bytes_per_block += draft_spec.bytes_per_block(config.block_size)
    max_model_len = config.max_model_len or target.config.max_position_embeddings
    kv_windows = releasable_windows(target.config.attention_kinds, has_draft_kv=draft_spec is not None)
    prefix_note = (prefix_caching_off_reason(proposer, kv_windows, target.config.is_hybrid, config.state_snapshots)
                   if config.enable_prefix_caching else "off (option)")
    # Hybrid targets: the state slots (and, with prefix caching, their block-boundary snapshots) first, so a pool
    # sized from free GPU memory leaves room for them (a --kv-cache-gb budget counts K/V only).
    states = new_state_cache(target.model, config.max_concurrency) if target.config.is_hybrid else None
    if states is not None and recurrent_name != FLA and graphs_off_reason(config, backend, device) is None:
        # the graphs' kept-state buffers too: max concurrency x (k_max + 1) rows of every state layer
        states.graph_kept = new_graph_kept(states, config.max_concurrency * (config.max_num_steps + 1))
    if states is not None and prefix_note is None:
        states.snapshots = StateSnapshots(states.shape, config.state_snapshots, config.block_size,
                                          config.state_snapshot_blocks, states.conv.dtype, states.conv.device)
    num_blocks, note = size_kv_pool(config, bytes_per_block, device)
    target_kv = KVCache(target_spec, num_blocks, config.block_size, device)
    target_kv.states = states
    if isinstance(proposer, HasDraftKV):
        proposer.bind_kv_cache(KVCache(draft_spec, num_blocks, config.block_size, device))

    snapshots = None if states is None else states.snapshots
    block_manager = BlockManager(num_blocks, config.block_size,
                                 new_prefix_cache(hooks, paths, snapshots) if prefix_note is None else None)
    prefix = None
    if prefix_note is None:
        prefix = PrefixReuse(block_manager, proposer if isinstance(proposer, ResumesFromCachedKV) else None, paths,
                             hooks, states)
    scheduler = Scheduler(
        block_manager,
        max_concurrency=config.max_concurrency,
        max_num_batched_tokens=config.max_num_batched_tokens,
        num_steps=config.max_num_steps,  # the initial k; the scheduler owns it from here
        max_model_len=max_model_len,
        kv_windows=kv_windows,
        prefix=prefix,
        enable_chunked_prefill=config.enable_chunked_prefill,
    )
    scheduler.hooks = hooks
    feature_layers = proposer.target_feature_layers if isinstance(proposer, ConsumesTargetFeatures) else ()
    runner = TargetRunner(target.model, target_kv, feature_layers)
    graphs_note = (HYBRID_FLA_GRAPHS_NOTE if target.config.is_hybrid and recurrent_name == FLA
                   else enable_cuda_graphs(config, backend, device, runner, proposer, max_model_len))
    if target.config.is_hybrid and graphs_note == "on":
        graphs_note = HYBRID_GRAPHS_NOTE
    return EngineParts(
        device=device,
        dtype=dtype,
        target=target,
        tokenizer=tokenizer,
        proposer=proposer,
        runner=runner,
        scheduler=scheduler,
        stop_checker=StopChecker(tokenizer, eos_token_ids(target.config, tokenizer), max_model_len),
        num_kv_blocks=num_blocks,
        kv_pool_note=note,
        attention_backend=backend_name,
        verifier=verifier_name,
        verify_fn=select_verifier(verifier_name),
        paths=paths,
        hooks=hooks,
        cuda_graphs=graphs_note,
        prefix_caching="on" if prefix_note is None else prefix_note,
        recurrent_kernels=recurrent_name if target.config.is_hybrid else None,
    )


# A hybrid target's graphs (recurrent/graph_rows.py): what replays and what stays eager, for the manifest
HYBRID_GRAPHS_NOTE = "on (hybrid: decode, chain verify; eager: prefill, mixed, ragged and tree verifies)"
HYBRID_FLA_GRAPHS_NOTE = "off: --recurrent-kernels fla runs eagerly (graphs: the torch kernels)"


def enable_cuda_graphs(config: EngineConfig, backend, device: torch.device, runner: TargetRunner, proposer,
                       max_model_len: int) -> str:
    """Capture target decode/verify and draft-step graphs unless they cannot or must not be used; says which."""
    off = graphs_off_reason(config, backend, device)
    if off is not None:
        return off
    return capture_graphs(graph_plan(config, device, max_model_len), runner, proposer, config.max_num_steps)


def graphs_off_reason(config: EngineConfig, backend, device: torch.device) -> str | None:
    """Why this engine runs without CUDA graphs ("off: ..."), or None: it captures them."""
    if config.enforce_eager:
        return "off: enforce_eager"
    if device.type != "cuda":
        return f"off: {device.type}"
    if not getattr(backend, "supports_cuda_graphs", False):
        return f"off: attention backend {backend.name!r} runs eagerly"
    return None


def graph_plan(config: EngineConfig, device: torch.device, max_model_len: int) -> GraphPlan:
    max_positions = max_model_len + config.max_num_steps + 1  # a request's last verify block may reach past the limit
    return GraphPlan(
        max_num_reqs=config.max_concurrency,
        max_blocks_per_req=-(-max_positions // config.block_size),
        max_positions=max_positions,
        block_size=config.block_size,
        device=device,
    )


def capture_graphs(plan: GraphPlan, runner: TargetRunner, proposer, max_steps: int) -> str:
    """Target graphs for 1 and max_steps + 1 queries per request; draft graphs whenever the engine drafts (k = 1
    included: a round of one draft token is its catch-up alone, which an EAGLE / MTP round graph replays too)."""
    gc.collect()  # dead engines' graphs are destroyed here, not by a collection during a capture
    try:
        runner.enable_cuda_graphs(plan, max_query_len=max_steps + 1)
        runner.graphs.capture(1)
        if max_steps:
            runner.graphs.capture(max_steps + 1)
        if isinstance(proposer, CapturesDraftGraphs) and max_steps >= 1:
            proposer.enable_cuda_graphs(plan)
            proposer.prepare_cuda_graphs(max_steps)
    except (RuntimeError, torch.AcceleratorError) as exc:
        # Not recoverable in-process: a failed capture can leave CUDA RNG state mid-capture.
        raise SpecbenchError(f"CUDA graph capture failed ({str(exc).splitlines()[0]}); rerun with --enforce-eager "
                             "and report it") from exc
    return "on"

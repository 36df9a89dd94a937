"""`run_stress`: the stress stage as a library call (the CLI and the gate call it): size the matrix from what is
known of the engine or server, run every condition with speculation off and on, judge, report."""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.runs.sweep_config import SweepConfig
from specbench.runtime.cuda_graph import batch_buckets
from specbench.runtime.hooks import EngineFault
from specbench.stress.conditions import HYBRID_CONDITIONS, Condition, NotRun, ServerShape, default_matrix
from specbench.stress.report import StressReport
from specbench.stress.runner import BackendSlot, Side, StressSettings, plan_lines, run_matrix
from specbench.stress.verdict import JUDGES, judge

# A server's CUDA-graph batch sizes when it does not say (vLLM's and SGLang's defaults start 1, 2, 4, 8, then 16s).
DEFAULT_CAPTURE_SIZES = (1, 2, 4, 8, 16, 24, 32)
EMBEDDED_MAX_CONCURRENCY = 32  # the saturating condition's batch on the embedded engine


@dataclass(frozen=True)
class StressRequest:
    sweep: SweepConfig  # backend, engine or server (base_url / server_cmd), as the sweep takes them
    num_steps: int  # k with speculation on (the widest the server runs: the verify is widest there)
    baseline_url: str | None = None  # a running server's speculation-off twin (its k is fixed)
    rule: str = "auto"  # verdict.JUDGES, or auto: "output" for the embedded engine, else "canary"
    num_requests: int = 8  # per condition (more where its concurrency needs more)
    max_tokens: int = 24
    max_prompt_tokens: int | None = None  # None: the engine's context allows / 2048 for a server
    window_tokens: int | None = None  # None: the target's (embedded), else unknown
    chunk_tokens: int | None = None
    block_size: int | None = None  # None: the engine's / 16 for a server
    max_concurrency: int | None = None  # None: the engine's (at most 32) / 16 for a server
    conditions: tuple[str, ...] = ()  # run only these (names); () = the whole matrix
    seed: int = 0
    fault: EngineFault | None = None  # applied to the embedded engine (test machinery)
    hybrid: bool | None = None  # the target carries recurrent state; None: the engine knows, a server says
    # (specbench serve's /version `hybrid`), else --target's local config.json
    quiet: bool = False


def _embedded_shape(request: StressRequest, engine) -> ServerShape:
    config = engine.config
    windows = [k.kv_window for k in engine.parts.target.config.attention_kinds if k.kv_window is not None]
    max_len = engine.parts.stop_checker.max_model_len
    room = max_len - request.max_tokens - request.num_steps - 2
    graphs = engine.runner.graphs
    return ServerShape(
        block_size=config.block_size,
        window=request.window_tokens or (min(windows) if windows else None),
        # chunked prefill splits prompts at the step's token budget
        chunk_size=request.chunk_tokens or (config.max_num_batched_tokens if config.enable_chunked_prefill
                                            else None),
        # the engine's own buckets: what it captures on CUDA (off CUDA the same batch sizes, run eagerly)
        capture_sizes=tuple(graphs.buckets) if graphs is not None else batch_buckets(config.max_concurrency),
        max_concurrency=config.max_concurrency,
        max_prompt_tokens=min(request.max_prompt_tokens or room, room),
        can_restart=True,
        is_hybrid=engine.parts.target.config.is_hybrid if request.hybrid is None else request.hybrid,
    )


def _server_is_hybrid(request: StressRequest, on: Side) -> bool:
    """What the user said, else what a running server says of itself (its /version), else what --target's local
    config.json declares (a server launched per k is not asked before it runs)."""
    if request.hybrid is not None:
        return request.hybrid
    if request.sweep.base_url is not None:
        info = getattr(on.slot.live(), "info", None)
        if info is not None and info.is_hybrid:
            return True
    return _declares_recurrent_state(request.sweep.engine.target)


def _declares_recurrent_state(target: str | None) -> bool:
    """Whether a local checkpoint directory's config.json has recurrent-state layers (False where there is none,
    or it is not one specbench reads: a server may run what the embedded engine cannot)."""
    from specbench.models.config import ModelConfig

    path = Path(target).expanduser() / "config.json" if target else None
    if path is None or not path.is_file():
        return False
    try:
        return ModelConfig.from_hf(json.loads(path.read_text())).is_hybrid
    except (SpecbenchError, ValueError):
        return False


def _server_shape(request: StressRequest, is_hybrid: bool) -> ServerShape:
    return ServerShape(
        block_size=request.block_size or 16,
        window=request.window_tokens,
        chunk_size=request.chunk_tokens,
        capture_sizes=DEFAULT_CAPTURE_SIZES,
        max_concurrency=request.max_concurrency or 16,
        max_prompt_tokens=request.max_prompt_tokens or 2048,
        can_restart=request.sweep.server_cmd is not None,
        is_hybrid=is_hybrid,
    )


def _select(conditions: tuple[Condition, ...], names: tuple[str, ...]) -> tuple[Condition, ...]:
    if not names:
        return conditions
    if "hybrid" in names:  # the hybrid conditions this matrix has, in place of the word
        at = names.index("hybrid")
        present = tuple(c.name for c in conditions if c.name in HYBRID_CONDITIONS and c.name not in names)
        names = names[:at] + present + names[at + 1:]
    known = {c.name: c for c in conditions}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SpecbenchError(f"unknown stress condition(s) {', '.join(unknown)}; this matrix has: "
                             f"{', '.join(known)}")
    return tuple(known[n] for n in names)


def _sides(request: StressRequest, run_dir: Path) -> tuple[Side, Side, str]:
    from specbench.backends import create_backend

    k = request.num_steps
    # the engine is sized for the matrix's widest batch and k (the sweep sizes it for its grid the same way)
    config = dataclasses.replace(request.sweep, num_steps=(0, k),
                                 concurrency=(request.max_concurrency or EMBEDDED_MAX_CONCURRENCY,))
    if config.backend == "embedded" or config.server_cmd is not None:
        slot = BackendSlot(lambda: create_backend(config, run_dir, request.fault))
        where = "embedded engine" if config.backend == "embedded" else "server launched per k (--server-cmd)"
        return Side("k=0", 0, slot), Side(f"k={k}", k, slot), where
    if request.baseline_url is None:
        raise SpecbenchError("a running server (--base-url) runs one k: give its speculation-off twin with "
                             "--baseline-url, or let specbench launch it (--server-cmd)")
    baseline = dataclasses.replace(config, base_url=request.baseline_url)
    return (Side("k=0", 0, BackendSlot(lambda: create_backend(baseline, run_dir))),
            Side(f"k={k}", k, BackendSlot(lambda: create_backend(config, run_dir))),
            f"server {config.base_url} against {request.baseline_url}")


def run_stress(request: StressRequest) -> StressReport:
    if request.num_steps < 1:
        raise SpecbenchError(f"--num-steps {request.num_steps}: the stress stage compares k >= 1 with k = 0")
    if request.rule not in ("auto", *JUDGES):
        raise SpecbenchError(f"--rule {request.rule}: one of auto, {', '.join(JUDGES)}")
    start = time.perf_counter()
    run_dir = Path(request.sweep.results_dir or tempfile.mkdtemp(prefix="specbench-stress-")).expanduser()
    run_dir.mkdir(parents=True, exist_ok=True)
    off, on, where = _sides(request, run_dir)
    try:
        if request.sweep.backend == "embedded":
            shape = _embedded_shape(request, on.slot.live().engine)
        else:
            shape = _server_shape(request, _server_is_hybrid(request, on))
        conditions, not_run = default_matrix(shape, num_requests=request.num_requests)
        conditions = _select(conditions, request.conditions)
        rule = request.rule if request.rule != "auto" else ("output" if request.sweep.backend == "embedded"
                                                            else "canary")

        def progress(line: str) -> None:
            if not request.quiet:
                print(line, file=sys.stderr, flush=True)

        settings = StressSettings(request.max_tokens, request.seed)
        for line in plan_lines(conditions, not_run, off, on, settings):
            progress(line)
        runs = run_matrix(conditions, off, on, settings, progress)
    finally:
        for side in (off, on):
            side.slot.close()
    verdicts = tuple(judge(run, rule) for run in runs)
    target = "hybrid target (recurrent state), " if shape.is_hybrid else ""
    title = f"{where}, {target}k={request.num_steps} vs k=0, greedy, {request.max_tokens} tokens per answer"
    return StressReport(title, rule, verdicts, not_run, time.perf_counter() - start)


__all__ = ["NotRun", "StressRequest", "run_stress"]

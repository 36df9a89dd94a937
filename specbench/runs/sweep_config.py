"""What a sweep runs: workload, grid, load pattern, engine options and outputs, as one frozen record."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from specbench.config import ENGINE_OPTION_NAMES, EngineConfig, options_added_later
from specbench.errors import SpecbenchError
from specbench.runs import deadlines

# Where results go and how they are shown: free to differ when a run is resumed.
# The side-call deadlines bound how long a broken server may stall a run, not what a cell measures.
RUN_LOCAL_FIELDS = frozenset({"results_dir", "run_id", "resume", "quiet", "api_key_env", "optimize", "info_timeout",
                              "metrics_timeout", "cache_reset_timeout"})
RAMP_UP_STRATEGIES = ("linear",)
OPTIMIZE_TARGETS = ("throughput", "tpot")  # best k: highest output throughput | lowest median TPOT
EMBEDDED = "embedded"
DEFAULT_MAX_WARMUP = 8  # default warmup per cell: min(concurrency, this)
MAX_WARMUP = 1024  # an explicit --warmup above this is refused (unmeasured requests; a typo, not a plan)
# Settings that change what a run measures (which prompts, how many, how long the outputs, the load on the engine):
# runs that differ in any of them are not like for like, whatever the engine did. Values are read from a manifest's
# effective `sampling` when recorded there (workload defaults resolved), else from its `config`. What comparisons are
# for (method, num_steps, engine options, label) is deliberately absent; workload version and data sha256 are
# checked with the models (specbench.compare.run_info).
MEASUREMENT_SETTINGS = (
    "workload", "limit", "shots", "chat_template", "max_tokens", "ignore_eos", "stop", "input_len", "output_len",
    "top_p", "top_k", "request_rate", "burstiness", "warmup", "seed",
    # the load pattern: a ramp, a duration bound or a warm prefix cache change every latency measured
    "duration", "ramp_up_strategy", "ramp_up_start_rps", "ramp_up_end_rps", "cache_reset",
)

# `specbench sweep`'s defaults, declared once (the CLI and the plan read them; the library's SweepConfig keeps
# the literal defaults below so a notebook gets exactly what it asks for):
# - without --method on the embedded engine it measures speculation: n-gram drafts (no drafter needed), or the
#   draft LM when --draft is given (`default_method`), at DEFAULT_SWEEP_NUM_STEPS;
# - without --num-prompts it runs a sample (the first N of the dataset; mt_bench/spec_bench: seeded across
#   categories) and, its cells being short and noisy, DEFAULT_SAMPLE_REPEATS repeats (a spread to report);
#   the gsm8k/mtbench presets run the whole split once.
DEFAULT_SWEEP_NUM_STEPS = (0, 3)
DEFAULT_NUM_PROMPTS = 50
SAMPLED_WORKLOADS = ("gsm8k", "mt_bench", "spec_bench")  # datasets sampled by default (own prompt files: all)
DEFAULT_SAMPLE_REPEATS = 3
CONFIRM_ABOVE_S = 30 * 60  # a longer estimated sweep started from a terminal needs --yes


DEFAULT_HELP_METHOD = "ngram"  # what --help shows as --method's default (the usual outcome of default_method)


def default_method(draft: str | None) -> str:
    """--method when not given: a drafter that works with any target (n-gram), or the draft LM passed."""
    return DEFAULT_HELP_METHOD if draft is None else "draft"


def default_limit(workload: str) -> int | None:
    """--num-prompts when not given: a sample of the built-in datasets, all of anything else."""
    return DEFAULT_NUM_PROMPTS if workload in SAMPLED_WORKLOADS else None


def default_repeats(is_default_sample: bool) -> int:
    """--repeats when not given: DEFAULT_SAMPLE_REPEATS for the default prompt sample, else 1."""
    return DEFAULT_SAMPLE_REPEATS if is_default_sample else 1


@dataclass(frozen=True)
class SweepConfig:
    # workload
    workload: str = "gsm8k"
    data_dir: str | None = None  # None: $SPECBENCH_DATA_DIR, ../shared/data, the hub (workloads.data)
    limit: int | None = None  # N samples (None: all): the first N, or seeded across categories (workloads.questions)
    shots: int | None = None  # gsm8k few-shot examples (None: workload default, 5)
    chat_template: bool | None = None  # None: the workload's default (on for chat workloads)
    max_tokens: int | None = None  # None: workload default (gsm8k 256, mt_bench 1024)
    input_len: int | None = None  # random workload prompt length
    output_len: int | None = None  # random workload output length
    # grid: the cartesian product of these three, times `repeats`
    concurrency: tuple[int, ...] = (1,)
    temperature: tuple[float | None, ...] = (0.0,)  # None: the workload's per-sample default
    num_steps: tuple[int, ...] = (0,)
    speedup: bool = True  # add num_steps 0 (the baseline of speedup and agreement) to the grid
    top_p: float = 1.0
    top_k: int = -1
    # load pattern
    request_rate: float = math.inf  # inf: all at once under the concurrency cap; else Poisson/gamma arrivals
    burstiness: float = 1.0  # gamma shape of inter-arrival times (1 = Poisson)
    duration: float | None = None  # seconds of arrivals per cell, samples cycled (None: each sample once)
    ramp_up_strategy: str | None = None  # "linear": the arrival rate ramps from start to end rps (load_pattern.py)
    ramp_up_start_rps: float | None = None
    ramp_up_end_rps: float | None = None
    cache_reset: bool = True  # reset the server's prefix cache before each cell where it offers an endpoint
    goodput: tuple[str, ...] = ()  # --goodput KEY:MS service-level objectives (metrics/goodput.py)
    optimize: str = "throughput"  # best k per (workload, concurrency, temperature): throughput | tpot
    reasoning_parser: str | None = None  # "think": split inline <think>...</think> reasoning from the answer
    # Unmeasured requests run before every cell; None: num_warmup's default (one per slot up to DEFAULT_MAX_WARMUP).
    warmup: int | None = None
    repeats: int = 1
    # backend: where requests run (the embedded engine, or an OpenAI-compatible server over HTTP)
    backend: str = EMBEDDED  # embedded | openai
    base_url: str | None = None  # openai: server root, e.g. http://127.0.0.1:8000
    server_model: str | None = None  # openai: model to request (None: the server's first /v1/models entry)
    api_key_env: str | None = None  # openai: environment variable holding the API key (the key is never stored)
    request_timeout: float = deadlines.REQUEST_TIMEOUT_S  # openai: seconds per request, connect to last byte
    # openai: seconds each side call may take, connect to last byte (runs/deadlines.py)
    info_timeout: float = deadlines.INFO_TIMEOUT_S  # each of /v1/models, /version, /props
    metrics_timeout: float = deadlines.METRICS_TIMEOUT_S  # one /metrics scrape
    cache_reset_timeout: float = deadlines.CACHE_RESET_TIMEOUT_S  # one prefix-cache reset
    # openai: specbench launches the server per num-steps group from these (backends/server_template.py)
    server_cmd: str | None = None  # template with {num_steps} {method} {port} {model} {draft} {host}, or preset:NAME
    server_baseline_cmd: str | None = None  # template for num-steps 0 (None: the preset's, else server_cmd)
    server_adapter: str = "auto"  # whose metrics and response fields to read (backends/server_adapters.py)
    server_ready_timeout: float = deadlines.SERVER_READY_TIMEOUT_S  # seconds a launched server may take to get ready
    # engine: the shared option group, stored flat in manifests under the same keys as the command line's
    # options. Its max_num_steps and max_concurrency are not the sweep's: the grid sets them (backends/embedded.py).
    # Over HTTP only target, method, draft and tokenizer are read (labels, --server-cmd templates).
    engine: EngineConfig = field(default_factory=EngineConfig)
    # outputs
    label: str | None = None
    results_dir: str = "results"
    run_id: str | None = None  # None: <timestamp>-<config hash>
    resume: str | None = None  # run directory to finish
    quiet: bool = False

    @property
    def grid_num_steps(self) -> tuple[int, ...]:
        # A running server's speculative config is fixed: an HTTP run against --base-url measures one k; with
        # --server-cmd specbench launches one server per k, the baseline included.
        values = set(self.num_steps) | ({0} if self.speedup and self.has_num_steps_control else set())
        return tuple(sorted(values))

    @property
    def max_num_steps(self) -> int:
        return max(self.grid_num_steps)

    @property
    def is_embedded(self) -> bool:
        return self.backend == EMBEDDED

    @property
    def has_num_steps_control(self) -> bool:
        """specbench sets k per cell: the embedded engine, or a server it launches per k."""
        return self.is_embedded or self.server_cmd is not None

    def num_warmup(self, concurrency: int) -> int:
        """Warmup requests before a cell at `concurrency`: --warmup, else one per slot (every slot and batch shape
        warmed before the measured window) but at most DEFAULT_MAX_WARMUP (-c 100000 must not run 100000 first)."""
        return min(concurrency, DEFAULT_MAX_WARMUP) if self.warmup is None else self.warmup

    def to_dict(self) -> dict[str, Any]:
        """Flat and JSON-safe (a manifest's `config`): engine options beside the sweep's own fields, tuples as
        lists, an infinite rate as the string "inf"."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "engine":
                out.update((name, getattr(self.engine, name)) for name in ENGINE_OPTION_NAMES)
            else:
                out[f.name] = getattr(self, f.name)
        out["request_rate"] = "inf" if math.isinf(self.request_rate) else self.request_rate
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}

    @classmethod
    def from_flat(cls, values: Mapping[str, Any]) -> SweepConfig:
        """From flat names, as on the command line and in a manifest: engine options go into `engine`."""
        own = dict(values)
        engine = EngineConfig(**{name: own.pop(name) for name in ENGINE_OPTION_NAMES if name in own})
        return cls(**own, engine=engine)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepConfig:
        unknown = sorted(set(data) - set(FLAT_NAMES))
        if unknown:
            raise SpecbenchError(f"manifest config has unknown fields {', '.join(unknown)} (newer specbench?)")
        values = {**options_added_later(), **data}  # a run recorded before an option existed keeps its behaviour
        values["request_rate"] = float(values.get("request_rate", math.inf))
        for name in ("concurrency", "temperature", "num_steps", "eagle_aux_layer_ids", "synthetic_acceptance",
                     "goodput"):
            if values.get(name) is not None:
                values[name] = tuple(values[name])
        return cls.from_flat(values)

    def identity(self) -> dict[str, Any]:
        """The fields that define the measurements (a resumed run must match them)."""
        return {k: v for k, v in self.to_dict().items() if k not in RUN_LOCAL_FIELDS}


# The keys of `to_dict`: what a manifest stores, what --resume compares, what a command line may set.
FLAT_NAMES: tuple[str, ...] = tuple(
    name for f in dataclasses.fields(SweepConfig) for name in (ENGINE_OPTION_NAMES if f.name == "engine" else (f.name,))
)

"""What a sweep runs: workload, grid, load pattern, engine options and outputs, as one frozen record."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from specbench.config import ENGINE_OPTION_NAMES, EngineConfig
from specbench.errors import SpecbenchError

# Where results go and how they are shown: free to differ when a run is resumed.
RUN_LOCAL_FIELDS = frozenset({"results_dir", "run_id", "resume", "quiet", "api_key_env", "optimize"})
RAMP_UP_STRATEGIES = ("linear",)
OPTIMIZE_TARGETS = ("throughput", "tpot")  # best k: highest output throughput | lowest median TPOT
EMBEDDED = "embedded"
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
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class SweepConfig:
    # workload
    workload: str = "gsm8k"
    data_dir: str | None = None  # None: $SPECBENCH_DATA_DIR, ../shared/data, the hub (workloads.data)
    limit: int | None = None  # first N samples in dataset order (None: all)
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
    # Unmeasured requests run before every cell; None: the cell's concurrency (one per slot, so the measured
    # window starts with every batch shape and slot warmed).
    warmup: int | None = None
    repeats: int = 1
    # backend: where requests run (the embedded engine, or an OpenAI-compatible server over HTTP)
    backend: str = EMBEDDED  # embedded | openai
    base_url: str | None = None  # openai: server root, e.g. http://127.0.0.1:8000
    server_model: str | None = None  # openai: model to request (None: the server's first /v1/models entry)
    api_key_env: str | None = None  # openai: environment variable holding the API key (the key is never stored)
    request_timeout: float = 600.0  # openai: seconds per request, connect to last byte
    # openai: specbench launches the server per num-steps group from these (backends/server_template.py)
    server_cmd: str | None = None  # template with {num_steps} {method} {port} {model} {draft} {host}, or preset:NAME
    server_baseline_cmd: str | None = None  # template for num-steps 0 (None: the preset's, else server_cmd)
    server_adapter: str = "auto"  # whose metrics and response fields to read (backends/server_adapters.py)
    server_ready_timeout: float = 600.0  # seconds a launched server may take to answer /health
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
        return concurrency if self.warmup is None else self.warmup

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
        values = dict(data)
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


def validate_config(config: SweepConfig) -> None:
    """Every check that needs neither data nor models; raises SpecbenchError with one message."""
    from specbench.backends import BENCH_BACKENDS
    from specbench.workloads import workload_factory

    workload_factory(config.workload)
    BENCH_BACKENDS.get(config.backend)
    if config.is_embedded:  # over HTTP the method only labels what the server runs (and torch is not needed)
        from specbench.spec.registry import PROPOSERS

        PROPOSERS.get(config.engine.method)
    _check_backend(config)
    _check_values("--concurrency", config.concurrency, lambda v: v >= 1, ">= 1")
    if not config.temperature:
        raise SpecbenchError("--temperature needs at least one value")
    _check_values("--temperature", [t for t in config.temperature if t is not None], lambda v: v >= 0, ">= 0")
    _check_values("--num-steps", config.num_steps, lambda v: v >= 0, ">= 0")
    if config.is_embedded and config.engine.method == "none" and config.max_num_steps > 0:  # a server picks its own
        raise SpecbenchError(
            f"--num-steps {','.join(map(str, config.num_steps))} needs a speculative --method (ngram, draft, ...)"
        )
    for flag, value, ok, need in (
        ("--limit", config.limit, lambda v: v >= 1, ">= 1"),
        ("--shots", config.shots, lambda v: v >= 0, ">= 0"),
        ("--max-tokens", config.max_tokens, lambda v: v >= 1, ">= 1"),
        ("--input-len", config.input_len, lambda v: v >= 1, ">= 1"),
        ("--output-len", config.output_len, lambda v: v >= 1, ">= 1"),
        ("--request-rate", config.request_rate, lambda v: v > 0, "> 0 (inf for all at once)"),
        ("--burstiness", config.burstiness, lambda v: v > 0, "> 0"),
        ("--warmup", config.warmup, lambda v: v >= 0, ">= 0"),
        ("--repeats", config.repeats, lambda v: v >= 1, ">= 1"),
        ("--top-p", config.top_p, lambda v: 0 < v <= 1, "in (0, 1]"),
        ("--top-k", config.top_k, lambda v: v == -1 or v >= 1, "-1 (off) or >= 1"),
    ):
        if value is not None:
            _check_values(flag, [value], ok, need)
    _check_load_pattern(config)
    if config.run_id is not None and not _RUN_ID.match(config.run_id):
        raise SpecbenchError(f"--run-id {config.run_id!r}: use letters, digits, '.', '_' and '-' only")


def _check_load_pattern(config: SweepConfig) -> None:
    from specbench.metrics.goodput import parse_goodput

    parse_goodput(config.goodput)
    if config.optimize not in OPTIMIZE_TARGETS:
        raise SpecbenchError(f"--optimize must be one of {', '.join(OPTIMIZE_TARGETS)}, got {config.optimize!r}")
    from specbench.backends.reasoning import REASONING_PARSERS

    if config.reasoning_parser is not None and config.reasoning_parser not in REASONING_PARSERS:
        raise SpecbenchError(f"--reasoning-parser must be one of {', '.join(REASONING_PARSERS)}, "
                             f"got {config.reasoning_parser!r}")
    if config.duration is not None and not (config.duration > 0 and math.isfinite(config.duration)):
        raise SpecbenchError(f"--duration must be a finite number of seconds > 0, got {config.duration}")
    ramp = (config.ramp_up_start_rps, config.ramp_up_end_rps)
    if config.ramp_up_strategy is None:
        if any(v is not None for v in ramp):
            raise SpecbenchError("--ramp-up-start-rps / --ramp-up-end-rps need --ramp-up-strategy linear")
        return
    if config.ramp_up_strategy not in RAMP_UP_STRATEGIES:
        raise SpecbenchError(f"--ramp-up-strategy must be one of {', '.join(RAMP_UP_STRATEGIES)}, "
                             f"got {config.ramp_up_strategy!r}")
    if any(v is None for v in ramp):
        raise SpecbenchError("--ramp-up-strategy needs --ramp-up-start-rps and --ramp-up-end-rps")
    if not all(v > 0 and math.isfinite(v) for v in ramp):
        raise SpecbenchError(f"--ramp-up-start-rps / --ramp-up-end-rps must be finite and > 0, got {ramp}")
    if not math.isinf(config.request_rate):
        raise SpecbenchError("--ramp-up-strategy sets the arrival rate itself: leave --request-rate out")


def _check_backend(config: SweepConfig) -> None:
    if config.is_embedded:
        for flag, value in (("--base-url", config.base_url), ("--model", config.server_model),
                            ("--api-key-env", config.api_key_env)):
            if value is not None:
                raise SpecbenchError(f"{flag} needs an HTTP backend (--backend openai)")
        return
    if config.engine.inject is not None:
        raise SpecbenchError("--inject needs the embedded backend (faults are injected into specbench's engine)")
    if config.server_cmd is not None:
        _check_server_launch(config)
        return
    if config.server_baseline_cmd is not None:
        raise SpecbenchError("--server-baseline-cmd needs --server-cmd")
    if not config.base_url or not config.base_url.startswith(("http://", "https://")):
        raise SpecbenchError(
            f"--backend {config.backend} needs --base-url http(s)://HOST:PORT, got {config.base_url!r}"
        )
    if len(config.num_steps) != 1:
        raise SpecbenchError(
            f"--backend {config.backend}: the server's speculative config is fixed; give the one --num-steps it runs "
            f"(0 for a non-speculative server), got {','.join(map(str, config.num_steps))}"
        )
    if not config.request_timeout > 0:
        raise SpecbenchError(f"--request-timeout must be > 0, got {config.request_timeout}")


def _check_server_launch(config: SweepConfig) -> None:
    from specbench.backends.server_adapters import SERVER_ADAPTERS
    from specbench.backends.server_template import check_template

    if config.base_url is not None:
        raise SpecbenchError("--server-cmd launches its own server: drop --base-url")
    check_template(config.server_cmd)
    if config.server_baseline_cmd is not None:
        check_template(config.server_baseline_cmd, "--server-baseline-cmd")
    if config.server_adapter != "auto":
        SERVER_ADAPTERS.get(config.server_adapter)
    if not config.server_ready_timeout > 0:
        raise SpecbenchError(f"--server-ready-timeout must be > 0, got {config.server_ready_timeout}")
    if not config.request_timeout > 0:
        raise SpecbenchError(f"--request-timeout must be > 0, got {config.request_timeout}")


def _check_values(flag: str, values, ok, need: str) -> None:
    values = list(values)
    if flag in ("--concurrency", "--num-steps") and not values:
        raise SpecbenchError(f"{flag} needs at least one value")
    bad = [v for v in values if not ok(v)]
    if bad:
        raise SpecbenchError(f"{flag} must be {need}, got {bad[0]}")

"""What a sweep runs: workload, grid, load pattern, engine options and outputs, as one frozen record."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from specbench.config import ENGINE_OPTION_NAMES, Allowed, EngineConfig, option, options_added_later
from specbench.errors import SpecbenchError
from specbench.runs import deadlines
from specbench.runs.cell_key import DEFAULT_TEMPERATURE
from specbench.runs.comma_lists import (
    format_int_list,
    format_temperature_list,
    parse_int_list,
    parse_name_list,
    parse_temperature_list,
)
from specbench.speculation.draft_shape import DraftShape
from specbench.workloads.gsm8k import NUM_SHOTS as GSM8K_NUM_SHOTS
from specbench.workloads.speed_bench_layout import DEFAULT_DIR_NAME as SPEED_BENCH_DIR
from specbench.workloads.speed_bench_layout import DEFAULT_SPLIT as SPEED_BENCH_DEFAULT_SPLIT
from specbench.workloads.speed_bench_layout import SPLITS as SPEED_BENCH_SPLITS

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
    "speed_bench_split", "speed_bench_categories", "top_p", "top_k", "request_rate", "burstiness", "warmup", "seed",
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
# datasets sampled by default (own prompt files: all)
SAMPLED_WORKLOADS = ("gsm8k", "mt_bench", "spec_bench", "speed_bench")
DEFAULT_SAMPLE_REPEATS = 3
CONFIRM_ABOVE_S = 30 * 60  # a longer estimated sweep started from a terminal needs --yes
SPECULATIVE_NUM_STEPS = (0, 1, 3, 5)  # --num-steps when not given, with an explicit speculative --method
DEFAULT_HELP_METHOD = "ngram"  # what --help shows as --method's default (the usual outcome of default_method)
RESULTS_DIR = "results"  # where runs go (and where compare, plot and notebooks look them up)

# Bounds shared by several options (bench/validate.py checks them).
AT_LEAST_ONE = Allowed(lambda v: v >= 1, ">= 1")
NON_NEGATIVE = Allowed(lambda v: v >= 0, ">= 0")


def default_num_steps(method: str) -> tuple[int, ...]:
    """--num-steps when not given, for an explicit --method (a server backend's included)."""
    return (0,) if method == "none" else SPECULATIVE_NUM_STEPS


def default_method(draft: str | None) -> str:
    """--method when not given: a drafter that works with any target (n-gram), or the draft LM passed."""
    return DEFAULT_HELP_METHOD if draft is None else "draft"


def default_limit(workload: str) -> int | None:
    """--num-prompts when not given: a sample of the built-in datasets, all of anything else."""
    return DEFAULT_NUM_PROMPTS if workload in SAMPLED_WORKLOADS else None


def default_repeats(is_default_sample: bool) -> int:
    """--repeats when not given: DEFAULT_SAMPLE_REPEATS for the default prompt sample, else 1."""
    return DEFAULT_SAMPLE_REPEATS if is_default_sample else 1


# Option value -> field value, where the command line's form differs (None: not given, the command decides).
def _parse_num_steps(text: str | None) -> tuple[int, ...] | None:
    return None if text is None else parse_int_list(text, "--num-steps")


def _parse_budgets(text: str | None) -> tuple[int, ...]:  # --num-draft-tokens; not given: no budget
    return () if text is None else parse_int_list(text, "--num-draft-tokens")


def _parse_names(text: str | None) -> tuple[str, ...] | None:  # --speed-bench-categories
    return None if text is None else parse_name_list(text, "--speed-bench-categories")


def _parse_goodput(values: list[str] | None) -> tuple[str, ...]:  # --goodput is repeatable
    return tuple(values or ())


@dataclass(frozen=True)
class SweepConfig:
    """The one declaration of sweep options: `specbench sweep` (and its presets gsm8k, mtbench) is generated from
    these fields (cli/sweep_options.py); the engine's own options are EngineConfig's group."""

    # workload
    workload: str = option("gsm8k", "gsm8k | mt_bench | spec_bench | speed_bench (a local SPEED-Bench copy) | "
                           "random | file:PATH (JSONL prompt/messages, ShareGPT JSON)", aliases=("-w",))
    # None: $SPECBENCH_DATA_DIR, ../shared/data, the hub (workloads.data)
    data_dir: str | None = option(
        None, "local data root (gsm8k/, mt_bench/, spec_bench/, speed_bench/ in upstream formats); else "
        "$SPECBENCH_DATA_DIR, else ../shared/data beside the current directory or the checkout, else the hub")
    # N samples (None: all): the first N, or seeded across categories (workloads.questions). On the command line
    # not given means the default sample (default_limit) and 0 means all.
    limit: int | None = option(
        None, "prompts per cell: the first N (mt_bench, spec_bench, speed_bench: a seeded sample across categories); "
        "0 = all "
        f"(default: {DEFAULT_NUM_PROMPTS} of {'/'.join(SAMPLED_WORKLOADS)}, else all)",
        flag="--num-prompts", aliases=("--limit", "-n"), bounds=AT_LEAST_ONE)
    shots: int | None = option(  # None: the workload's
        None, f"gsm8k few-shot examples (default {GSM8K_NUM_SHOTS})", bounds=NON_NEGATIVE)
    chat_template: bool | None = option(  # None: the workload's default (on for chat workloads)
        None, "apply the tokenizer's chat template (default: on for chat workloads)",
        flag="--chat-template/--no-chat-template")
    max_tokens: int | None = option(  # None: the workload's (gsm8k 256, mt_bench 1024)
        None, "max new tokens (default: the workload's)", bounds=AT_LEAST_ONE)
    input_len: int | None = option(None, "random workload prompt length", bounds=AT_LEAST_ONE)
    output_len: int | None = option(None, "random workload output length", bounds=AT_LEAST_ONE)
    # speed_bench: where the local copy is and what of it to run (workloads/speed_bench_layout.py); None: the
    # workload's defaults (<data root>/speed_bench, the qualitative split, every category)
    speed_bench_data: str | None = option(
        None, "speed_bench: a local SPEED-Bench copy (never downloaded): a folder holding <split>/ folders (the hub "
        "snapshot resolved by specdec_bench's prepare_data.py, e.g. data/speed), a split's folder, or one .parquet/"
        f".jsonl file (default: <data root>/{SPEED_BENCH_DIR})")
    speed_bench_split: str | None = option(
        None, f"speed_bench split: {' | '.join(SPEED_BENCH_SPLITS)} (default {SPEED_BENCH_DEFAULT_SPLIT})")
    speed_bench_categories: tuple[str, ...] | None = option(
        None, "speed_bench categories to run, e.g. coding,math (throughput splits: low_entropy,mixed,high_entropy; "
        "default: all)", parse=_parse_names)
    # grid: the cartesian product of these three, times `repeats`
    concurrency: tuple[int, ...] = option(
        (1,), "requests in flight, e.g. 1,16,64", aliases=("-c",),
        parse=functools.partial(parse_int_list, flag="--concurrency"), text=format_int_list, bounds=AT_LEAST_ONE)
    temperature: tuple[float | None, ...] = option(  # None: the workload's per-sample default
        (0.0,), f"e.g. 0,1; '{DEFAULT_TEMPERATURE}' = the workload's per-sample temperature", aliases=("-t",),
        parse=parse_temperature_list, text=format_temperature_list, bounds=NON_NEGATIVE)
    # The command line picks the default from the method (cli_default None: see `sweep`).
    num_steps: tuple[int, ...] = option(
        (0,), f"draft tokens per round, e.g. 0,1,3,5 (default: {format_int_list(DEFAULT_SWEEP_NUM_STEPS)} without "
        f"--method, {format_int_list(SPECULATIVE_NUM_STEPS)} with one, 0 with --method none)", aliases=("-k",),
        parse=_parse_num_steps, cli_default=None, bounds=NON_NEGATIVE)
    # The draft tree's shape per speculative k (speculation/draft_shape.py): the grid takes every (topk, budget)
    # pair; chains (topk 1) take no budget, and k = 0 only the chain. SGLang's --speculative-eagle-topk and
    # --speculative-num-draft-tokens (that one counts the root too: launch presets add it).
    eagle_topk: tuple[int, ...] = option(
        (1,), "tree drafts: children kept per draft node, e.g. 1,2,4 (1 = chains; methods draft, eagle, eagle3, "
        "mtp)", parse=functools.partial(parse_int_list, flag="--eagle-topk"), text=format_int_list,
        bounds=AT_LEAST_ONE)
    num_draft_tokens: tuple[int, ...] = option(  # (): as many nodes as the steps give
        (), "tree drafts: drafted tokens per round (the tree's node budget, root excluded), e.g. 8,16 (default: "
        "every node the steps and --eagle-topk give)", parse=_parse_budgets, cli_default=None)
    speedup: bool = option(  # add num_steps 0 (the baseline of speedup and agreement) to the grid
        True, "add the num-steps 0 baseline (speedup, answer agreement; embedded or --server-cmd)",
        flag="--speedup/--no-speedup")
    top_p: float = option(1.0, None, bounds=Allowed(lambda v: 0 < v <= 1, "in (0, 1]"))
    top_k: int = option(-1, None, bounds=Allowed(lambda v: v == -1 or v >= 1, "-1 (off) or >= 1"))
    # load pattern
    request_rate: float = option(  # inf: all at once under the concurrency cap; else Poisson/gamma arrivals
        math.inf, "arrivals/s; inf = all at once under the concurrency cap",
        bounds=Allowed(lambda v: v > 0, "> 0 (inf for all at once)"))
    burstiness: float = option(  # gamma shape of inter-arrival times (1 = Poisson)
        1.0, "gamma shape of arrival gaps (1 = Poisson, < 1 burstier)", bounds=Allowed(lambda v: v > 0, "> 0"))
    duration: float | None = option(  # None: each sample once
        None, "seconds of arrivals per cell, samples cycled (instead of each sample once)")
    ramp_up_strategy: str | None = option(  # the arrival rate ramps from start to end rps (load_pattern.py)
        None, "linear: ramp the arrival rate from --ramp-up-start-rps to --ramp-up-end-rps over the cell (replaces "
        "--request-rate)")
    ramp_up_start_rps: float | None = option(None, "ramp start rate (req/s)")
    ramp_up_end_rps: float | None = option(None, "ramp end rate (req/s)")
    cache_reset: bool = option(
        True, "reset the server's prefix cache before each cell where it offers an endpoint (vLLM "
        "/reset_prefix_cache, SGLang /flush_cache)", flag="--cache-reset/--no-cache-reset")
    goodput: tuple[str, ...] = option(  # service-level objectives KEY:MS (metrics/goodput.py)
        (), "SLO bounds in ms, e.g. 'ttft:200,tpot:50,e2el:2000' (repeatable): goodput counts the requests meeting "
        "every bound", parse=_parse_goodput, cli_type=list[str] | None, cli_default=None)
    optimize: str = option(
        "throughput", "best k per (workload, concurrency, temperature): throughput (highest output throughput) | "
        "tpot (lowest median TPOT)")
    reasoning_parser: str | None = option(
        None, "think: split inline <think>...</think> reasoning from the answer (embedded engine, or servers without "
        "their own parser); the answer is scored")
    # Unmeasured requests run before every cell; None: num_warmup's default (one per slot up to DEFAULT_MAX_WARMUP).
    warmup: int | None = option(
        None, "unmeasured requests before each cell, synthetic prompts (default: the cell's concurrency, at most "
        f"{DEFAULT_MAX_WARMUP}; at most {MAX_WARMUP})",
        bounds=Allowed(lambda v: 0 <= v <= MAX_WARMUP, f"in [0, {MAX_WARMUP}]"))
    # On the command line not given means default_repeats (cli_default None: see `sweep`).
    repeats: int = option(
        1, f"run the grid N times (noise estimate; default {DEFAULT_SAMPLE_REPEATS} for the default sample, else 1)",
        cli_default=None, bounds=AT_LEAST_ONE)
    # backend: where requests run (the embedded engine, or an OpenAI-compatible server over HTTP)
    backend: str = option(EMBEDDED, "embedded (in-process engine) | openai (an OpenAI-compatible server: vLLM, "
                          "SGLang, TensorRT-LLM, specbench serve)")
    base_url: str | None = option(None, "server root, e.g. http://127.0.0.1:8000")
    server_model: str | None = option(None, "model to request (default: the server's first /v1/models entry)",
                                      flag="--model")
    # the key itself is never stored
    api_key_env: str | None = option(None, "environment variable holding the API key (never stored)")
    # Deadlines on whole calls, connect to last byte (runs/deadlines.py); recorded in the manifest's config.
    request_timeout: float = option(deadlines.REQUEST_TIMEOUT_S,
                                    "openai: seconds one streamed request may take, connect to last byte")
    info_timeout: float = option(deadlines.INFO_TIMEOUT_S,
                                 "openai: seconds each of /v1/models, /version, /props may take")
    metrics_timeout: float = option(deadlines.METRICS_TIMEOUT_S,
                                    "openai: seconds one /metrics scrape may take (two per cell)")
    cache_reset_timeout: float = option(deadlines.CACHE_RESET_TIMEOUT_S,
                                        "openai: seconds one prefix-cache reset may take")
    # openai: specbench launches the server per num-steps group from these (backends/server_template.py)
    server_cmd: str | None = option(
        None, "openai: launch the server per (num-steps, tree shape) group from this template ({num_steps} {method} "
        "{port} {model} {draft} {host} {eagle_topk} {num_draft_tokens}: SGLang's count, the root included) or "
        "preset:NAME (llama-server, llama-server-ngram, vllm, sglang, specbench: each maps --method draft, eagle, "
        "eagle3, mtp and the tree shape to its server's flags, refusing what it cannot run); "
        "replaces --base-url. No shell: the template is split into arguments like a shell would (quote an argument "
        "with spaces), then each placeholder is filled inside its argument, so a value with spaces stays one "
        "argument; a value starting with '-', an empty one or an unbalanced quote is refused")
    server_baseline_cmd: str | None = option(  # None: the preset's, else server_cmd
        None, "template for the num-steps 0 server (default: the preset's non-speculative one, else --server-cmd)")
    server_adapter: str = option(  # backends/server_adapters.py
        "auto", "whose /metrics and response fields to read: auto (detected from /metrics, /version, /props) | vllm "
        "| sglang | llamacpp | specbench")
    server_ready_timeout: float = option(deadlines.SERVER_READY_TIMEOUT_S,
                                         "seconds a launched server may take to become ready")
    # engine: the shared option group, stored flat in manifests under the same keys as the command line's
    # options. Its max_num_steps and max_concurrency are not the sweep's: the grid sets them (backends/embedded.py).
    # Over HTTP only target, method, draft and tokenizer are read (labels, --server-cmd templates).
    engine: EngineConfig = field(default_factory=EngineConfig)
    # The fault the engine carries (test machinery: its caller applies it, run_sweep's `fault`); recorded so that
    # every table of the run says it is a mutant. None: a real run.
    inject: str | None = option(None, "engine fault injected (specbench.faults); marks the run a mutant", cli=False)
    # outputs
    label: str | None = option(None, "tag stored with every row, e.g. before / after")
    results_dir: str = option(RESULTS_DIR, "parent of the run directory")
    run_id: str | None = option(None, "default: <time>-<config hash>")
    resume: str | None = option(None, "finish the missing cells of RUN_DIR")  # run directory to finish
    quiet: bool = option(False, "no progress and no plan on stderr", aliases=("-q",))

    @property
    def grid_num_steps(self) -> tuple[int, ...]:
        # A running server's speculative config is fixed: an HTTP run against --base-url measures one k; with
        # --server-cmd specbench launches one server per k, the baseline included.
        values = set(self.num_steps) | ({0} if self.speedup and self.has_num_steps_control else set())
        return tuple(sorted(values))

    @property
    def grid_draft_shapes(self) -> tuple[DraftShape, ...]:
        """The tree shapes each speculative k runs, in grid order: chains first (they take no budget), then each
        topk > 1 with each budget (or none)."""
        budgets: tuple[int | None, ...] = self.num_draft_tokens or (None,)
        shapes = [DraftShape(topk, None if topk == 1 else budget) for topk in sorted(self.eagle_topk)
                  for budget in budgets]
        return tuple(dict.fromkeys(shapes))

    @property
    def has_choices(self) -> bool:
        """Several (num_steps, draft shape) points per grid point: a best one to recommend."""
        return len(self.grid_num_steps) > 1 or len(self.grid_draft_shapes) > 1

    @property
    def has_trees(self) -> bool:
        return any(shape.is_tree for shape in self.grid_draft_shapes)

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
        for name in ("concurrency", "temperature", "num_steps", "eagle_topk", "num_draft_tokens", "eagle_aux_layer_ids",
                     "synthetic_acceptance", "goodput", "speed_bench_categories"):
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

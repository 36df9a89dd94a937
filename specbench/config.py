"""Frozen engine configuration shared by the library API and the CLI."""

from __future__ import annotations

import math
import os
import re
import typing
from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from specbench.errors import SpecbenchError

# How EAGLE-3 aux-layer ids are read: the checkpoint field's own convention, HF hidden_states
# indices (vLLM, speculators), or layer-output ids (SGLang: hidden_states[id + 1]).
EAGLE_AUX_CONVENTIONS = ("auto", "hidden-states-index", "layer-output")


# `option(..., before=...)` default: the option existed from the start.
ALWAYS = object()

# --device: auto, cpu, cuda or cuda:N (whether that card exists is checked when the engine is built).
DEVICE_PATTERN = re.compile(r"auto|cpu|cuda(:[0-9]{1,3})?")


@dataclass(frozen=True)
class Range:
    """Allowed values of a numeric option: finite, lo <= value <= hi (lo < value when `lo_open`).

    The upper bounds are far above any real run; they exist so an absurd value is refused at once instead of
    overflowing an allocation or a seed later. Tuple options apply the range to each element.
    """

    lo: float
    hi: float
    lo_open: bool = False

    def describe(self) -> str:
        return f"{'(' if self.lo_open else '['}{_number(self.lo)}, {_number(self.hi)}]"

    def check(self, flag: str, value: Any, *, integer: bool) -> None:
        """Raise one SpecbenchError naming the option `flag` when `value` is not a finite number within the range."""
        what = "an integer" if integer else "a finite number"
        if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
            raise SpecbenchError(f"{flag} must be {what} in {self.describe()}, got {value!r}")
        if not math.isfinite(value):
            raise SpecbenchError(f"{flag} must be finite, got {value!r}")
        if value < self.lo or value > self.hi or (self.lo_open and value == self.lo):
            raise SpecbenchError(f"{flag} must be {what} in {self.describe()}, got {value!r}")


@dataclass(frozen=True)
class Allowed:
    """Allowed values of a sweep option (each element of a tuple option; None, where the field takes it, always):
    `ok(value)`, else bench/validate.py refuses the run saying the option must be `need`."""

    ok: Callable[[Any], bool]
    need: str


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


# `option(..., cli_default=...)` default: the command line's default is the field's (shown as `text` of it).
FIELD_DEFAULT = object()


def option(default, help: str | None, *, flag: str | None = None, aliases: tuple[str, ...] = (),
           parse: Callable[[Any], Any] | None = None, text: Callable[[Any], str] | None = None,
           cli_type: Any = None, cli_default: Any = FIELD_DEFAULT, cli: bool = True, before: Any = ALWAYS,
           bounds: Range | Allowed | None = None, default_factory: Callable[[], Any] | None = None) -> Any:
    """A field with its command-line option: `--<name-with-dashes>` unless `flag`, also spelled `aliases` (short
    forms included); `parse` maps the option's value to the field (tuple fields take comma lists, typed `str` on the
    command line unless `cli_type`) and `text` the field's default back to the option's; `cli_default`: the
    command line's default when it is not the field's (None: the command picks one, e.g. from other options);
    cli=False: set by each command itself, not the shared group; `before`: how runs recorded before the option
    existed behaved (a manifest without it resumes that way); `bounds`: the values a numeric option accepts,
    checked on every EngineConfig (a Range; CLI and library alike) or by validate_config (a sweep's Allowed);
    `default_factory` (with default None): the default is computed each time a config is constructed."""
    meta = {"help": help, "flag": flag, "aliases": aliases, "parse": parse, "text": text, "cli_type": cli_type,
            "cli_default": cli_default, "cli": cli, "before": before, "bounds": bounds}
    if default_factory is not None:
        return field(default_factory=default_factory, metadata=meta)
    return field(default=default, metadata=meta)


def field_default(f) -> Any:
    """A field's default value (calling its default_factory, if it has one)."""
    return f.default_factory() if f.default_factory is not MISSING else f.default


# The test suite (tests/conftest.py) and scripts/gpu_check.sh turn the debug invariants on for every engine they
# build by setting this variable; it is read only here, when an EngineConfig is constructed without an explicit
# debug_invariants, never while an engine runs. `specbench check` and the selftest set the value explicitly.
DEBUG_INVARIANTS_ENV = "SPECBENCH_DEBUG_INVARIANTS"


def debug_invariants_from_env() -> bool:
    return os.environ.get(DEBUG_INVARIANTS_ENV, "0") not in ("", "0", "false", "False")


# auto: fused Triton kernels in the model layers on CUDA tensors when Triton imports, torch elsewhere.
# on:   fused on every device where the kernels can run (CPU only under TRITON_INTERPRET=1: tests), else an error.
# off:  the eager torch reference layers everywhere.
FUSED_KERNEL_POLICIES = ("auto", "on", "off")
# The expert kernels of MoE layers on the fused path (models/moe_kernel_sets.py): gemv (kernels/moe_gemv.py for 1-64
# tokens, prefill on the torch reference) | grouped (issue 47: few-token down + combine, grouped GEMM prefill).
MOE_KERNEL_SETS = ("auto", "gemv", "grouped")  # the first is the default (models/moe_kernel_sets.py)
# The gated-delta-rule kernels of hybrid targets' Gated DeltaNet layers (recurrent/kernel_choice.py): torch (our
# references) | fla (fla-core's Triton kernels, CUDA only) | auto (fla on CUDA where fla-core imports, else torch).
# recurrent/kernel_choice.py CHOICES names the same values (a test holds them equal; neither unit imports the other).
RECURRENT_KERNEL_CHOICES = ("torch", "triton", "fla", "auto")


def parse_layer_ids(text: str | None) -> tuple[int, ...] | None:
    """'2, 16,29' -> (2, 16, 29); None stays None."""
    if text is None:
        return None
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise SpecbenchError(f"--eagle-aux-layer-ids takes comma-separated integers, got {text!r}") from None


def parse_rates(text: str | None) -> tuple[float, ...] | None:
    if text is None:
        return None
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise SpecbenchError(f"--synthetic-acceptance takes comma-separated rates, got {text!r}") from None


@dataclass(frozen=True)
class EngineConfig:
    """The one declaration of engine options: every model-loading command's option group is generated from it."""

    target: str = option("default", "HF dir, hub id, .gguf file, preset (with --load-format dummy), or 'default'")
    method: str = option("none", "speculative method: none | ngram | draft | eagle | eagle3 | mtp")
    draft: str | None = option(None, "draft model (--method draft) or EAGLE head dir (eagle, eagle3)")
    # The largest k (drafts per round) the engine is built for: CUDA graphs are captured up to it; also the k it
    # starts with. The current k has one owner, the scheduler (LLMEngine.set_num_steps). 0 = plain decoding.
    # A sweep's grid sets it, so each command declares its own --num-steps.
    max_num_steps: int = option(0, "draft tokens per round", cli=False, bounds=Range(0, 256))
    dtype: str = option("auto", "fp32 | bf16 | fp16 | auto (fp32 on CPU, bf16 on CUDA)")
    device: str = option("auto", "cpu | cuda | cuda:N | auto")
    load_format: str = option("auto", "auto | safetensors | gguf | pt | dummy (applies to target and draft)")
    allow_pickle: bool = option(False, "allow pytorch_model.bin (weights_only load)")
    tokenizer: str | None = option(None, "tokenizer source (for dummy presets)")
    block_size: int = option(16, "tokens per KV block", bounds=Range(1, 1024))
    kv_cache_gb: float | None = option(None, "KV pool budget in GiB (default: a fraction of free GPU memory, "
                                       "1 GiB on CPU)", bounds=Range(0, 2**20, lo_open=True))
    gpu_memory_utilization: float = option(0.85, "fraction of GPU memory the engine may hold",
                                          bounds=Range(0, 1, lo_open=True))
    # exact pool size (overrides the budgets; tests force preemption with it)
    num_kv_blocks: int | None = option(None, "exact KV pool size in blocks", cli=False, bounds=Range(1, 2**31 - 1))
    # A sweep's concurrency grid sets it, so each command declares it.
    max_concurrency: int = option(64, "max running requests", cli=False, bounds=Range(1, 2**16))
    max_num_batched_tokens: int = option(
        8192, "max tokens per prefill step (with --enable-chunked-prefill: per step, decode/verify tokens first, "
        "then prompt chunks)", bounds=Range(1, 2**24))
    # Chunked prefill (Scheduler.schedule_mixed, engine/mixed_step.py): long prompts split into chunks that share a
    # step with the running requests' decode/verify tokens, so a long prompt's arrival no longer stalls every running
    # request for a whole prefill. Off by default: the whole-prompt prefill step stays what every earlier run used.
    enable_chunked_prefill: bool = option(
        False, "split prompts into chunks that share a step with running requests' decode/verify tokens, within "
        "--max-num-batched-tokens (vLLM's name; --no-chunked-prefill: a whole-prompt prefill step)",
        flag="--enable-chunked-prefill/--no-chunked-prefill", before=False)
    # Automatic prefix caching (engine/prefix_reuse.py): full KV blocks of committed tokens are kept by content hash
    # and shared read-only by later requests with the same prefix; off where it cannot be safe (the engine says why).
    enable_prefix_caching: bool = option(
        True, "reuse the KV of cached prompt prefixes across requests (--no-prefix-caching: recompute every prompt)",
        flag="--enable-prefix-caching/--no-prefix-caching", before=False)
    # Hybrid targets (recurrent-state layers) only: a prefix hit resumes their state from a snapshot taken at a block
    # boundary (recurrent/state_snapshots.py), each the size of one request's state; the store is allocated up front
    # beside the state slots. Runs before it recomputed every prompt on hybrids (0).
    state_snapshots: int = option(
        64, "recurrent-state snapshots kept for prefix-cache hits on hybrid targets, each one request's state "
        "(0: no prefix caching on them)", before=0, bounds=Range(0, 2**20))
    state_snapshot_blocks: int = option(
        1, "KV blocks between recurrent-state snapshots on hybrid targets (a prefix hit resumes at the last one)",
        before=1, bounds=Range(1, 2**16))
    # Applied on whichever thread steps the engine (runtime/cpu_threads.py): embedded sweeps and serve alike.
    cpu_threads: int | None = option(
        None, "torch intra-op threads for the engine's CPU work (default: torch's, one per core); 1 avoids "
        "OpenMP spin-waits, which inflate CPU time on a busy machine", before=None, bounds=Range(1, 4096))
    # Also at most the model's trained context (models/loader.py checks it before allocating).
    max_model_len: int | None = option(None, "context limit (default: model's)", bounds=Range(1, 2**24))
    attention_backend: str = option(
        "auto", "auto (triton on CUDA, else torch) | torch | triton | flashinfer (optional extra "
        "'specbench-cli[flashinfer]'; CUDA only, falls back to auto's choice with a note when not importable)")
    verifier: str = option("auto", "auto (triton on CUDA, else torch) | torch | triton")
    # Forced per-position acceptance rates (unconditional, position 1..k) for performance work at real
    # shapes without real weights. Output is then NOT lossless; manifests and tables say so.
    synthetic_acceptance: tuple[float, ...] | None = option(
        None, "force per-position acceptance, e.g. '0.73,0.52,0.35' (performance work; output NOT lossless)",
        parse=parse_rates, bounds=Range(0, 1))
    # CUDA graphs for decode/verify and draft steps are on whenever the device and attention backend allow;
    # True runs every forward eagerly (debugging, or comparing against graphs).
    enforce_eager: bool = option(False, "run every forward eagerly (no CUDA graphs; they are on by default on CUDA)")
    # Plain decode steps and EAGLE rounds are launched before the host reads the previous one (engine/inflight.py,
    # engine/step_loop.py); False waits for every step's tokens before scheduling the next (the reference loop).
    async_scheduling: bool = option(
        True, "overlap host work with the GPU: launch the next decode step or EAGLE round before reading the last "
        "(--no-async-scheduling: one step at a time)",
        flag="--async-scheduling/--no-async-scheduling", before=False)
    # Fused Triton kernels in the model layers (norms, RoPE, SiLU-and-mul, decode-batch projections:
    # models/fused_kernels.py), fixed per model when the engine is built: a fused engine and an unfused reference
    # engine can live in one process.
    fused_kernels: str = option("auto", "fused Triton kernels in the model layers: auto (on CUDA when triton "
                                "imports) | on | off (the eager torch layers)", before="auto")
    # Which expert kernels MoE layers run where the fused kernels run (MOE_KERNEL_SETS; models/moe_kernel_sets.py).
    moe_kernels: str = option("auto", "MoE expert kernels where fused kernels run: auto (gemv for 1-64 tokens, the "
                              "grouped GEMM for prefill: each phase's faster set on the H100) | gemv (prefill: the "
                              "per-expert torch loop) | grouped (also the few-token down with the combine in its "
                              "epilogue)", before="gemv")
    # Which gated-delta-rule kernels hybrid targets' Gated DeltaNet layers run (RECURRENT_KERNEL_CHOICES;
    # recurrent/kernel_choice.py); the conv stays ours. auto: triton on CUDA (1.46x torch's plain decode on the H100).
    recurrent_kernels: str = option("auto", "gated-delta-rule kernels of hybrid targets: torch (our references) | "
                                    "triton (ours: decode and chain verifies in fused launches, CUDA graphs kept; "
                                    "other rows torch) | fla (fla-core's Triton kernels; CUDA, pip install "
                                    "fla-core; no CUDA graphs) | auto (triton on CUDA unless --fused-kernels off, "
                                    "else torch)", before="torch")
    # Debug invariants (attention/invariants.py; the device-vs-host checks of rounds drafted ahead), read once
    # when the engine is built and handed to every backend and proposer. Default: $SPECBENCH_DEBUG_INVARIANTS
    # (debug_invariants_from_env, read when the EngineConfig is constructed: the test suite's switch).
    debug_invariants: bool = option(
        None, "check the attention metadata and draft plans on every forward (slow; debugging, specbench check)",
        flag="--debug-invariants/--no-debug-invariants", before=False, default_factory=debug_invariants_from_env,
        cli_default=None)  # not given on the command line: the EngineConfig's default (the variable, read then)
    ngram_min: int = option(1, "shortest n-gram to match (ngram method)", bounds=Range(1, 64))
    ngram_max: int = option(4, "longest n-gram to match (ngram method)", bounds=Range(1, 64))
    # EAGLE-3 aux layers: ids overriding the checkpoint's, and how ids are read (EAGLE_AUX_CONVENTIONS).
    eagle_aux_layer_ids: tuple[int, ...] | None = option(
        None, "EAGLE-3 aux layer ids overriding the head's, e.g. '2,16,29'", parse=parse_layer_ids,
        bounds=Range(-4096, 4096))
    eagle_aux_convention: str = option(
        "auto", "how EAGLE-3 aux ids are read: auto (the checkpoint field's own) | hidden-states-index | layer-output")
    # torch generators take seeds below 2**63.
    seed: int = option(0, "engine seed (dummy weights, unseeded requests)", bounds=Range(0, 2**63 - 1))

    def __post_init__(self) -> None:
        self._check_bounds()
        if not isinstance(self.device, str) or not DEVICE_PATTERN.fullmatch(self.device):
            raise SpecbenchError(f"device (--device) must be auto, cpu, cuda or cuda:N, got {self.device!r}")
        if self.method == "none" and self.max_num_steps:
            raise SpecbenchError("method 'none' takes max_num_steps 0; pick a proposer (ngram, draft, ...) to "
                                 "speculate")
        if self.ngram_min < 1 or self.ngram_max < self.ngram_min:
            raise SpecbenchError(f"need 1 <= ngram_min (--ngram-min) <= ngram_max (--ngram-max), got "
                                 f"{self.ngram_min}, {self.ngram_max}")
        if self.synthetic_acceptance is not None:
            rates = tuple(float(r) for r in self.synthetic_acceptance)
            if not rates or any(not 0 <= r <= 1 for r in rates) or any(b > a for a, b in zip(rates, rates[1:])):
                raise SpecbenchError(f"synthetic_acceptance (--synthetic-acceptance) rates must be non-increasing "
                                     f"values in [0, 1], got {self.synthetic_acceptance}")
            if len(rates) < self.max_num_steps:
                raise SpecbenchError(f"synthetic_acceptance (--synthetic-acceptance) gives {len(rates)} rates for "
                                     f"max_num_steps {self.max_num_steps}")
            object.__setattr__(self, "synthetic_acceptance", rates)
        if self.fused_kernels not in FUSED_KERNEL_POLICIES:
            raise SpecbenchError(f"unknown fused_kernels (--fused-kernels) {self.fused_kernels!r}; supported: "
                                 f"{', '.join(FUSED_KERNEL_POLICIES)}")
        if self.moe_kernels not in MOE_KERNEL_SETS:
            raise SpecbenchError(f"unknown moe_kernels (--moe-kernels) {self.moe_kernels!r}; supported: "
                                 f"{', '.join(MOE_KERNEL_SETS)}")
        if self.recurrent_kernels not in RECURRENT_KERNEL_CHOICES:
            raise SpecbenchError(f"unknown recurrent_kernels (--recurrent-kernels) {self.recurrent_kernels!r}; "
                                 f"supported: {', '.join(RECURRENT_KERNEL_CHOICES)}")
        if self.eagle_aux_convention not in EAGLE_AUX_CONVENTIONS:
            raise SpecbenchError(
                f"unknown eagle_aux_convention (--eagle-aux-convention) {self.eagle_aux_convention!r}; "
                f"supported: {', '.join(EAGLE_AUX_CONVENTIONS)}"
            )
        if self.eagle_aux_layer_ids is not None:
            if not self.eagle_aux_layer_ids or not all(isinstance(i, int) for i in self.eagle_aux_layer_ids):
                raise SpecbenchError(f"eagle_aux_layer_ids (--eagle-aux-layer-ids) must be non-empty integers, got "
                                     f"{self.eagle_aux_layer_ids}")
            object.__setattr__(self, "eagle_aux_layer_ids", tuple(self.eagle_aux_layer_ids))

    def _check_bounds(self) -> None:
        """Every option declared with `bounds`: a finite number (or each element of a tuple) within them."""
        for f in fields(self):
            bounds, value = f.metadata["bounds"], getattr(self, f.name)
            if bounds is None or value is None:
                continue
            # The name a user typed: the shared group's flag; a command's own option (num_steps) by field name.
            label = f"{f.name} (--{f.name.replace('_', '-')})" if f.metadata["cli"] else f.name
            if f.metadata["parse"] is not None:  # a tuple option: each element
                if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list)):
                    raise SpecbenchError(f"{label} must be a list of numbers, got {value!r}")
                for element in value:
                    bounds.check(label, element, integer=f.name in _INTEGER_OPTIONS)
            else:
                bounds.check(label, value, integer=f.name in _INTEGER_OPTIONS)

    def to_dict(self) -> dict:
        return asdict(self)


def _is_integer_hint(hint: Any) -> bool:
    """int, int | None, tuple[int, ...] (| None): the option takes integers."""
    args = typing.get_args(hint)
    return hint is int or int in args or any(_is_integer_hint(a) for a in args if typing.get_origin(a) is tuple)


_INTEGER_OPTIONS = frozenset(
    name for name, hint in typing.get_type_hints(EngineConfig).items() if _is_integer_hint(hint)
)


def options_added_later() -> dict[str, Any]:
    """Option -> how a run recorded before the option existed behaved (manifests without the key)."""
    return {f.name: f.metadata["before"] for f in fields(EngineConfig) if f.metadata["before"] is not ALWAYS}


# The options every model-loading command shares (the rest, max_num_steps and max_concurrency, shape each run).
ENGINE_OPTION_NAMES: tuple[str, ...] = tuple(f.name for f in fields(EngineConfig) if f.metadata["cli"])

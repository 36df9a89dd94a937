"""Frozen engine configuration shared by the library API and the CLI."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from specbench.errors import SpecbenchError

# How EAGLE-3 aux-layer ids are read: the checkpoint field's own convention, HF hidden_states
# indices (vLLM, speculators), or layer-output ids (SGLang: hidden_states[id + 1]).
EAGLE_AUX_CONVENTIONS = ("auto", "hidden-states-index", "layer-output")


# `option(..., before=...)` default: the option existed from the start.
ALWAYS = object()


def option(default, help: str, *, flag: str | None = None, parse: Callable[[str | None], Any] | None = None,
           cli: bool = True, before: Any = ALWAYS) -> Any:
    """A field with its command-line option: `--<name-with-dashes>` unless `flag`; `parse` maps the option's text
    to the field (tuple fields take comma lists); cli=False: set by each command itself, not the shared group;
    `before`: how runs recorded before the option existed behaved (a manifest without it resumes that way)."""
    meta = {"help": help, "flag": flag, "parse": parse, "cli": cli, "before": before}
    return field(default=default, metadata=meta)


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
    method: str = option("none", "speculative method: none | ngram | draft | eagle | eagle3")
    draft: str | None = option(None, "draft model (--method draft) or EAGLE head dir (eagle, eagle3)")
    # The largest k (drafts per round) the engine is built for: CUDA graphs are captured up to it; also the k it
    # starts with. The current k has one owner, the scheduler (LLMEngine.set_num_steps). 0 = plain decoding.
    # A sweep's grid sets it, so each command declares its own --num-steps.
    max_num_steps: int = option(0, "draft tokens per round", cli=False)
    dtype: str = option("auto", "fp32 | bf16 | fp16 | auto (fp32 on CPU, bf16 on CUDA)")
    device: str = option("auto", "cpu | cuda | cuda:N | auto")
    load_format: str = option("auto", "auto | safetensors | gguf | pt | dummy (applies to target and draft)")
    allow_pickle: bool = option(False, "allow pytorch_model.bin (weights_only load)")
    tokenizer: str | None = option(None, "tokenizer source (for dummy presets)")
    block_size: int = option(16, "tokens per KV block")
    kv_cache_gb: float | None = option(None, "KV pool budget in GiB (default: a fraction of free GPU memory, "
                                       "1 GiB on CPU)")
    gpu_memory_utilization: float = option(0.85, "fraction of GPU memory the engine may hold")
    # exact pool size (overrides the budgets; tests force preemption with it)
    num_kv_blocks: int | None = option(None, "exact KV pool size in blocks", cli=False)
    # A sweep's concurrency grid sets it, so each command declares it.
    max_concurrency: int = option(64, "max running requests", cli=False)
    max_num_batched_tokens: int = option(8192, "max tokens per prefill step")
    # Applied on whichever thread steps the engine (runtime/cpu_threads.py): embedded sweeps and serve alike.
    cpu_threads: int | None = option(
        None, "torch intra-op threads for the engine's CPU work (default: torch's, one per core); 1 avoids "
        "OpenMP spin-waits, which inflate CPU time on a busy machine", before=None)
    max_model_len: int | None = option(None, "context limit (default: model's)")
    attention_backend: str = option(
        "auto", "auto (triton on CUDA, else torch) | torch | triton | flashinfer (optional extra "
        "'specbench-cli[flashinfer]'; CUDA only, falls back to auto's choice with a note when not importable)")
    verifier: str = option("auto", "auto (triton on CUDA, else torch) | torch | triton")
    # Forced per-position acceptance rates (unconditional, position 1..k) for performance work at real
    # shapes without real weights. Output is then NOT lossless; manifests and tables say so.
    synthetic_acceptance: tuple[float, ...] | None = option(
        None, "force per-position acceptance, e.g. '0.73,0.52,0.35' (performance work; output NOT lossless)",
        parse=parse_rates)
    # CUDA graphs for decode/verify and draft steps are on whenever the device and attention backend allow;
    # True runs every forward eagerly (debugging, or comparing against graphs).
    enforce_eager: bool = option(False, "run every forward eagerly (no CUDA graphs; they are on by default on CUDA)")
    # Plain decode steps and EAGLE rounds are launched before the host reads the previous one (engine/overlap.py,
    # engine/round_overlap.py); False waits for every step's tokens before scheduling the next (the reference loop).
    async_scheduling: bool = option(
        True, "overlap host work with the GPU: launch the next decode step or EAGLE round before reading the last "
        "(--no-async-scheduling: one step at a time)",
        flag="--async-scheduling/--no-async-scheduling", before=False)
    ngram_min: int = option(1, "shortest n-gram to match (ngram method)")
    ngram_max: int = option(4, "longest n-gram to match (ngram method)")
    # EAGLE-3 aux layers: ids overriding the checkpoint's, and how ids are read (EAGLE_AUX_CONVENTIONS).
    eagle_aux_layer_ids: tuple[int, ...] | None = option(
        None, "EAGLE-3 aux layer ids overriding the head's, e.g. '2,16,29'", parse=parse_layer_ids)
    eagle_aux_convention: str = option(
        "auto", "how EAGLE-3 aux ids are read: auto (the checkpoint field's own) | hidden-states-index | layer-output")
    seed: int = option(0, "engine seed (dummy weights, unseeded requests)")
    # Fault injection (specbench.faults): a named engine mutant for `specbench check` / selftest. None = off.
    inject: str | None = option(None, "engine fault to inject (see specbench selftest); marks the run as a mutant")

    def __post_init__(self) -> None:
        if self.max_num_steps < 0:
            raise SpecbenchError(f"max_num_steps must be >= 0, got {self.max_num_steps}")
        if self.method == "none" and self.max_num_steps:
            raise SpecbenchError("method 'none' takes max_num_steps 0; pick a proposer (ngram, draft, ...) to "
                                 "speculate")
        if self.max_concurrency < 1:
            raise SpecbenchError(f"max_concurrency must be >= 1, got {self.max_concurrency}")
        if self.cpu_threads is not None and self.cpu_threads < 1:
            raise SpecbenchError(f"cpu_threads must be >= 1, got {self.cpu_threads}")
        if self.block_size < 1:
            raise SpecbenchError(f"block_size must be >= 1, got {self.block_size}")
        if self.kv_cache_gb is not None and self.kv_cache_gb <= 0:
            raise SpecbenchError(f"kv_cache_gb must be > 0, got {self.kv_cache_gb}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise SpecbenchError(f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}")
        if self.ngram_min < 1 or self.ngram_max < self.ngram_min:
            raise SpecbenchError(f"need 1 <= ngram_min <= ngram_max, got {self.ngram_min}, {self.ngram_max}")
        if self.synthetic_acceptance is not None:
            rates = tuple(float(r) for r in self.synthetic_acceptance)
            if not rates or any(not 0 <= r <= 1 for r in rates) or any(b > a for a, b in zip(rates, rates[1:])):
                raise SpecbenchError(
                    f"synthetic acceptance rates must be non-increasing values in [0, 1], got {self.synthetic_acceptance}"
                )
            if len(rates) < self.max_num_steps:
                raise SpecbenchError(f"synthetic acceptance gives {len(rates)} rates for max_num_steps "
                                     f"{self.max_num_steps}")
            object.__setattr__(self, "synthetic_acceptance", rates)
        if self.eagle_aux_convention not in EAGLE_AUX_CONVENTIONS:
            raise SpecbenchError(
                f"unknown eagle_aux_convention {self.eagle_aux_convention!r}; "
                f"supported: {', '.join(EAGLE_AUX_CONVENTIONS)}"
            )
        if self.eagle_aux_layer_ids is not None:
            if not self.eagle_aux_layer_ids or not all(isinstance(i, int) for i in self.eagle_aux_layer_ids):
                raise SpecbenchError(f"eagle_aux_layer_ids must be non-empty integers, got {self.eagle_aux_layer_ids}")
            object.__setattr__(self, "eagle_aux_layer_ids", tuple(self.eagle_aux_layer_ids))

        if self.inject is not None:
            from specbench.faults import resolve_fault

            if resolve_fault(self.inject) is None:
                object.__setattr__(self, "inject", None)

    def to_dict(self) -> dict:
        return asdict(self)


def options_added_later() -> dict[str, Any]:
    """Option -> how a run recorded before the option existed behaved (manifests without the key)."""
    return {f.name: f.metadata["before"] for f in fields(EngineConfig) if f.metadata["before"] is not ALWAYS}


# The options every model-loading command shares (the rest, max_num_steps and max_concurrency, shape each run).
ENGINE_OPTION_NAMES: tuple[str, ...] = tuple(f.name for f in fields(EngineConfig) if f.metadata["cli"])

"""Frozen engine configuration shared by the library API and the CLI."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from specbench.errors import SpecbenchError

# How EAGLE-3 aux-layer ids are read: the checkpoint field's own convention, HF hidden_states
# indices (vLLM, speculators), or layer-output ids (SGLang: hidden_states[id + 1]).
EAGLE_AUX_CONVENTIONS = ("auto", "hidden-states-index", "layer-output")


@dataclass(frozen=True)
class EngineConfig:
    target: str  # HF dir, hub id, .gguf file, or (load_format="dummy") a preset name
    method: str = "none"  # proposer name: none | ngram | draft | eagle | eagle3
    draft: str | None = None  # draft model (method draft) or EAGLE head (eagle, eagle3) source
    num_steps: int = 0  # drafts per round (k); 0 = plain decoding
    dtype: str = "auto"  # fp32 | bf16 | fp16 | auto (fp32 on CPU, bf16 on CUDA)
    device: str = "auto"
    load_format: str = "auto"  # auto | safetensors | gguf | pt | dummy (applies to target and draft)
    allow_pickle: bool = False  # allow pytorch_model.bin (loaded with weights_only=True)
    tokenizer: str | None = None  # overrides the tokenizer source (needed for dummy presets)
    block_size: int = 16
    kv_cache_gb: float | None = None  # KV pool budget; default: fraction of free GPU memory, or 1 GiB on CPU
    gpu_memory_utilization: float = 0.85  # fraction of total GPU memory the engine may hold
    num_kv_blocks: int | None = None  # exact pool size (overrides the budgets; tests force preemption with it)
    max_concurrency: int = 64
    max_num_batched_tokens: int = 8192
    max_model_len: int | None = None
    attention_backend: str = "auto"  # auto (triton on CUDA when importable, else torch) | torch | triton
    verifier: str = "auto"  # auto (triton on CUDA when importable, else torch) | torch | triton
    # Forced per-position acceptance rates (unconditional, position 1..k) for performance work at real
    # shapes without real weights. Output is then NOT lossless; manifests and tables say so.
    synthetic_acceptance: tuple[float, ...] | None = None
    # CUDA graphs for decode/verify and draft steps are on whenever the device and attention backend allow;
    # True runs every forward eagerly (debugging, or comparing against graphs).
    enforce_eager: bool = False
    ngram_min: int = 1
    ngram_max: int = 4
    # EAGLE-3 aux layers: ids overriding the checkpoint's, and how ids are read (EAGLE_AUX_CONVENTIONS).
    eagle_aux_layer_ids: tuple[int, ...] | None = None
    eagle_aux_convention: str = "auto"
    seed: int = 0
    # Fault injection (specbench.faults): a named engine mutant for `specbench check` / selftest. None = off.
    inject: str | None = None

    def __post_init__(self) -> None:
        if self.num_steps < 0:
            raise SpecbenchError(f"num_steps must be >= 0, got {self.num_steps}")
        if self.method == "none" and self.num_steps:
            raise SpecbenchError("method 'none' takes num_steps 0; pick a proposer (ngram, draft, ...) to speculate")
        if self.max_concurrency < 1:
            raise SpecbenchError(f"max_concurrency must be >= 1, got {self.max_concurrency}")
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
            if len(rates) < self.num_steps:
                raise SpecbenchError(f"synthetic acceptance gives {len(rates)} rates for num_steps {self.num_steps}")
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

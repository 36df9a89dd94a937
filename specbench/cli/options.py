"""Engine options shared by every command that loads models."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

Target = Annotated[
    str, typer.Option("--target", help="HF dir, hub id, .gguf file, preset (with --load-format dummy), or 'default'")
]
Draft = Annotated[
    Optional[str], typer.Option("--draft", help="draft model (--method draft) or EAGLE head dir (eagle, eagle3)")
]
Method = Annotated[str, typer.Option("--method", help="speculative method: none | ngram | draft | eagle | eagle3")]
Dtype = Annotated[str, typer.Option("--dtype", help="fp32 | bf16 | fp16 | auto")]
Device = Annotated[str, typer.Option("--device", help="cpu | cuda | cuda:N | auto")]
LoadFormat = Annotated[str, typer.Option("--load-format", help="auto | safetensors | gguf | pt | dummy")]
AllowPickle = Annotated[bool, typer.Option("--allow-pickle", help="allow pytorch_model.bin (weights_only load)")]
Tokenizer = Annotated[Optional[str], typer.Option("--tokenizer", help="tokenizer source (for dummy presets)")]
KvCacheGb = Annotated[Optional[float], typer.Option("--kv-cache-gb", help="KV pool budget in GiB")]
GpuMemUtil = Annotated[float, typer.Option("--gpu-memory-utilization", help="fraction of GPU memory to use")]
BlockSize = Annotated[int, typer.Option("--block-size", help="tokens per KV block")]
MaxConcurrency = Annotated[int, typer.Option("--max-concurrency", help="max running requests")]
MaxModelLen = Annotated[Optional[int], typer.Option("--max-model-len", help="context limit (default: model's)")]
NgramMin = Annotated[int, typer.Option("--ngram-min", help="shortest n-gram to match (ngram method)")]
NgramMax = Annotated[int, typer.Option("--ngram-max", help="longest n-gram to match (ngram method)")]
EagleAuxLayerIds = Annotated[
    Optional[str],
    typer.Option("--eagle-aux-layer-ids", help="EAGLE-3 aux layer ids overriding the head's, e.g. '2,16,29'"),
]
EagleAuxConvention = Annotated[
    str,
    typer.Option(
        "--eagle-aux-convention",
        help="how EAGLE-3 aux ids are read: auto (the checkpoint field's own) | hidden-states-index | layer-output",
    ),
]
DataDir = Annotated[
    Optional[str],
    typer.Option("--data-dir", help="local data root (gsm8k/, mt_bench/, spec_bench/ in upstream formats); else "
                 "$SPECBENCH_DATA_DIR, else ../shared/data beside the current directory or the checkout, else the hub"),
]
Seed = Annotated[int, typer.Option("--seed", help="engine seed (dummy weights, unseeded requests)")]


def parse_layer_ids(text: str | None) -> tuple[int, ...] | None:
    """'2, 16,29' -> (2, 16, 29); None stays None."""
    if text is None:
        return None
    from specbench.errors import SpecbenchError

    try:
        ids = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise SpecbenchError(f"--eagle-aux-layer-ids takes comma-separated integers, got {text!r}") from None
    return ids

AttentionBackendOpt = Annotated[
    str,
    typer.Option(
        "--attention-backend",
        help="auto (triton on CUDA, else torch) | torch | triton | flashinfer (optional extra "
        "'specbench-cli[flashinfer]'; CUDA only, falls back to auto's choice with a note when not importable)",
    ),
]
EnforceEager = Annotated[
    bool, typer.Option("--enforce-eager", help="run every forward eagerly (no CUDA graphs; they are on by default on CUDA)")
]
VerifierOpt = Annotated[str, typer.Option("--verifier", help="auto (triton on CUDA, else torch) | torch | triton")]
SyntheticAcceptance = Annotated[
    Optional[str],
    typer.Option(
        "--synthetic-acceptance",
        help="force per-position acceptance, e.g. '0.73,0.52,0.35' (performance work; output NOT lossless)",
    ),
]


def parse_rates(text: str | None) -> tuple[float, ...] | None:
    if text is None:
        return None
    from specbench.errors import SpecbenchError

    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise SpecbenchError(f"--synthetic-acceptance takes comma-separated rates, got {text!r}") from None

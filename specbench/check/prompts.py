"""The fixed prompt sets of `specbench check`: GSM8K test questions and MT-Bench first turns from the data dir."""

from __future__ import annotations

import json
from pathlib import Path

from specbench.errors import SpecbenchError


def _data_root(data_dir: str | None) -> Path:
    """Found as `sweep` finds its data: --data-dir, $SPECBENCH_DATA_DIR, then ../shared/data."""
    from specbench.workloads.data import resolve_data_source

    source = resolve_data_source(data_dir)
    if source.data_dir is None:
        raise SpecbenchError(f"check needs local prompts (gsm8k/, mt_bench/); searched {', '.join(source.searched)}")
    return source.data_dir


def check_prompts(data_dir: str | None, num_gsm8k: int = 4, num_mt_bench: int = 4) -> list[str]:
    root = _data_root(data_dir)
    try:
        with open(root / "gsm8k" / "test.jsonl") as f:
            gsm = [json.loads(line)["question"] for _, line in zip(range(num_gsm8k), f)]
        with open(root / "mt_bench" / "question.jsonl") as f:
            mt = [json.loads(line)["turns"][0] for _, line in zip(range(num_mt_bench), f)]
    except (OSError, ValueError, KeyError) as exc:
        raise SpecbenchError(f"cannot read check prompts under {root}: {exc}") from None
    return gsm + mt

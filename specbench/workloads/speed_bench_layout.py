"""SPEED-Bench's published layout (NVIDIA, 2026: a speculative-decoding benchmark), declared once.

What was found, and where:
- Dataset card, https://huggingface.co/datasets/nvidia/SPEED-Bench (README `dataset_info`): parquet, one config
  per split family, each with a single `test` split: `qualitative` (880 rows) and `throughput_1k`, `throughput_2k`,
  `throughput_8k`, `throughput_16k`, `throughput_32k` (1536 rows each). Every config has the same 8 features:
  question_id (string), category (string), sub_category (string), turns (list of strings), source (string),
  src_id (string), difficulty (string), multiturn (bool).
- AIPerf's SPEED-Bench tutorial (https://docs.nvidia.com/aiperf/tutorials/datasets-inputs/
  profile-with-speed-bench-dataset, ai-dynamo/aiperf docs/tutorials/speed-bench.md): the qualitative split's
  11 categories (80 prompts each, below) and the throughput buckets' 3 entropy tiers of 512 prompts each,
  named low_entropy, mixed, high_entropy in its per-tier variants (`speed_bench_throughput_{ISL}_{tier}`);
  greedy decoding with a 4K output cap for non-reasoning models.
- NVIDIA Model-Optimizer examples/specdec_bench (specdec_bench/datasets/speed.py, prepare_data.py): the hub copy
  ships placeholder turns (the text below) for prompts whose source licences forbid redistribution; its
  `prepare_data.py` resolves them from the sources and writes `<output_dir>/speed/<config>/test.parquet`, which
  is the copy users point specbench at. Multi-turn rows keep every user turn in `turns`, asked in order.

Assumed (not stated by those sources): that a throughput split's `category` column holds the tier names above
(AIPerf filters its per-tier variants by them); that the hub snapshot keeps each config's files under a folder
named after the config. JSONL with the same fields (e.g. `datasets.Dataset.to_json`) is accepted beside parquet.
"""

from __future__ import annotations

QUALITATIVE = "qualitative"
THROUGHPUT_SPLITS = ("throughput_1k", "throughput_2k", "throughput_8k", "throughput_16k", "throughput_32k")
SPLITS = (QUALITATIVE, *THROUGHPUT_SPLITS)
DEFAULT_SPLIT = QUALITATIVE

QUALITATIVE_CATEGORIES = ("coding", "humanities", "math", "multilingual", "qa", "rag", "reasoning", "roleplay",
                          "stem", "summarization", "writing")
THROUGHPUT_CATEGORIES = ("low_entropy", "mixed", "high_entropy")

# The hub's unresolved turns start with this sentence (specdec_bench refuses them too).
PLACEHOLDER_PREFIX = "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH"
PREPARE_HINT = ("resolve the hub copy first with NVIDIA Model-Optimizer's examples/specdec_bench/prepare_data.py "
                "and pass its output directory")

DATA_SUFFIXES = (".parquet", ".jsonl")
DEFAULT_DIR_NAME = "speed_bench"  # under the data root (--data-dir) when no --speed-bench-data is given

# Defaults of a run (AIPerf's recommendation for non-reasoning models).
DEFAULT_MAX_TOKENS = 4096
DEFAULT_TEMPERATURE = 0.0


def categories_of(split: str) -> tuple[str, ...]:
    """The categories a split's rows may carry."""
    return QUALITATIVE_CATEGORIES if split == QUALITATIVE else THROUGHPUT_CATEGORIES
